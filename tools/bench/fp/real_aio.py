# The realistic program (tools/bench/realistic.py) with tinymqtt's asyncio client: connect with a will,
# subscribe with a handler, a QoS 1 reading every PERIOD_MS, survive a broker restart (the client reconnects
# and subscribes again by itself). real_common.py holds what every client's program shares.
import gc
import asyncio
import config
import real_common as rc

gc.collect()
BASE = gc.mem_alloc()
from tinymqtt.aio import AsyncClient  # noqa: E402 (what importing it costs is part of the figure)
from tinymqtt.packets import Packet, PUBLISH  # noqa: E402

got = []
connects = [0]


def on_connect(connack):
    connects[0] += 1


async def main():
    c = AsyncClient(config.BROKER_HOST, config.BROKER_PORT, client_id=config.CLIENT_ID, version=4,
                    will=Packet(PUBLISH, topic=rc.STATUS, payload=b"offline", qos=1), **config.SESSION)
    c.on_connect = on_connect
    await c.connect()
    await c.subscribe(rc.DATA, 1, handler=lambda m: got.append(len(m.payload)))
    run = rc.Run(BASE, got, connects)
    while not run.done():
        if run.due():
            c.publish_nowait(rc.DATA, run.reading(), 1)  # while the broker is away, the session keeps it
        await asyncio.sleep_ms(50)
    if config.MEASURE:
        await run.ameasure(lambda: c.publish(rc.OTHER, rc.PAYLOAD, 0), lambda: c.publish(rc.OTHER, rc.PAYLOAD, 1),
                           lambda: c.publish(rc.DATA, rc.PAYLOAD, 1))
    run.result()
    await c.disconnect()

asyncio.run(main())
