# The realistic program (tools/bench/realistic.py) with Peter Hinch's mqtt_as: connect with a will, subscribe
# (in its connect handler, so that every reconnect subscribes again), a QoS 1 reading every PERIOD_MS,
# survive a broker restart (mqtt_as reconnects by itself). `network` and `machine` are a board's built-ins:
# on the unix port, stand-ins (fp/network.py, tests/fakes/machine.py), imported before the baseline.
# real_common.py holds what every client's program shares.
import gc
import asyncio
import machine  # noqa: F401
import network  # noqa: F401
import config
import real_common as rc

gc.collect()
BASE = gc.mem_alloc()
from mqtt_as import MQTTClient, config as cfg  # noqa: E402 (what importing it costs is part of the figure)

got = []
connects = [0]


async def on_connect(client):
    await client.subscribe(rc.DATA, 1)
    connects[0] += 1


cfg["server"], cfg["port"], cfg["client_id"] = config.BROKER_HOST, config.BROKER_PORT, config.CLIENT_ID
cfg["will"] = (rc.STATUS, "offline", False, 1)
cfg["keepalive"] = 60
cfg["subs_cb"] = lambda topic, msg, retained: got.append(len(msg))
cfg["connect_coro"] = on_connect


async def main():
    c = MQTTClient(cfg)
    await c.connect(quick=True)  # quick: no 5 s Wi-Fi check on the first connect (a reconnect still makes it)
    while not connects[0]:
        await asyncio.sleep_ms(10)
    run = rc.Run(BASE, got, connects)
    while not run.done():
        if run.due():
            await c.publish(rc.DATA, run.reading(), qos=1)  # while the broker is away, this waits for it
        await asyncio.sleep_ms(50)
    if config.MEASURE:
        await run.ameasure(lambda: c.publish(rc.OTHER, rc.PAYLOAD), lambda: c.publish(rc.OTHER, rc.PAYLOAD, qos=1),
                           lambda: c.publish(rc.DATA, rc.PAYLOAD, qos=1))
    run.result()
    await c.disconnect()

asyncio.run(main())
