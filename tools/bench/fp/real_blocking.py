# The realistic program (tools/bench/realistic.py), with tinymqtt's blocking client: connect with a will,
# subscribe with a callback, a QoS 1 reading every PERIOD_MS, survive a broker restart (the client reconnects
# and subscribes again by itself). The same program is written for every client (real_*.py); real_common.py
# holds what they share (the phases, the heap figures, the RESULT line).
import gc
import config
import real_common as rc

gc.collect()
BASE = gc.mem_alloc()
from tinymqtt.client import Client  # noqa: E402 (what importing it costs is part of the figure)
from tinymqtt.packets import Packet, PUBLISH  # noqa: E402

got = []
connects = [0]


def on_connect(connack):
    connects[0] += 1


c = Client(config.BROKER_HOST, config.BROKER_PORT, client_id=config.CLIENT_ID, version=4,
           will=Packet(PUBLISH, topic=rc.STATUS, payload=b"offline", qos=1), **config.SESSION)
c.on_message = lambda m: got.append(len(m.payload))  # (profile mqtt311 has no per-subscription handlers)
c.on_connect = on_connect
c.connect()
c.subscribe(rc.DATA, 1)
run = rc.Run(BASE, got, connects)
while not run.done():
    if run.due():
        c.publish(rc.DATA, run.reading(), 1)  # while the broker is away, the session keeps it for the resend
    c.loop(0.05)

if config.MEASURE:
    def pub0():
        c.publish(rc.OTHER, rc.PAYLOAD, 0)
        c.loop(0)

    run.measure(pub0, lambda: c.wait_for(c.publish(rc.OTHER, rc.PAYLOAD, 1)),
                lambda: c.wait_for(c.publish(rc.DATA, rc.PAYLOAD, 1)), lambda: c.loop(0.05))
run.result()
c.disconnect()
