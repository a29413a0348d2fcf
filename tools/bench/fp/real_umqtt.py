# The realistic program (tools/bench/realistic.py) with umqtt.simple (micropython-lib): connect with a will,
# subscribe with a callback, a QoS 1 reading every PERIOD_MS, survive a broker restart. umqtt.simple neither
# reconnects nor resubscribes: the program does, as its users write it (umqtt.robust's way: on OSError,
# connect again). real_common.py holds what every client's program shares.
import gc
import time
import config
import real_common as rc

gc.collect()
BASE = gc.mem_alloc()
from umqtt.simple import MQTTClient  # noqa: E402 (what importing it costs is part of the figure)

got = []
connects = [0]
c = MQTTClient(config.CLIENT_ID, config.BROKER_HOST, config.BROKER_PORT, keepalive=60)
c.set_last_will(rc.STATUS, b"offline", qos=1)
c.set_callback(lambda topic, msg: got.append(len(msg)))


def connect():
    while True:
        try:
            c.connect()
            c.subscribe(rc.DATA, qos=1)
            connects[0] += 1
            return
        except OSError:
            c.sock.close()
            time.sleep_ms(500)


connect()
run = rc.Run(BASE, got, connects)
while not run.done():
    try:
        if run.due():
            c.publish(rc.DATA, run.reading(), qos=1)  # waits for the PUBACK (a message arriving meanwhile is handled)
        c.check_msg()
    except OSError:  # the broker went away: readings due meanwhile are lost (umqtt.simple keeps no session)
        c.sock.close()
        connect()
    time.sleep_ms(50)

if config.MEASURE:
    run.measure(lambda: c.publish(rc.OTHER, rc.PAYLOAD), lambda: c.publish(rc.OTHER, rc.PAYLOAD, qos=1),
                lambda: c.publish(rc.DATA, rc.PAYLOAD, qos=1), c.wait_msg)
run.result()
c.disconnect()
