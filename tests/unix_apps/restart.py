# Unix-port app: the broker restarts and forgets this client (clean session). One client (config.API
# "blocking" or "aio") subscribes to PREFIX/cmd (QoS 1) and says READY. The test stops the broker; once the
# link is lost the app publishes N at QoS 1 and N at QoS 2 on PREFIX/data while offline and says QUEUED; the
# test starts the broker again; the client reconnects by itself, resubscribes (no session present) and sends
# what waited. It ends on "end" arriving on PREFIX/cmd. Prints RESULT {connects: session present of each
# CONNACK, inflight, got}.
import json
import time

import config

V, N, PREFIX = config.VERSION, config.N, config.PREFIX
OPTS = dict(client_id=config.CLIENT_ID, version=V, backoff_min_ms=100, backoff_max_ms=300, max_inflight=2 * N + 2)
connects, got = [], []


def on_cmd(m):
    got.append(bytes(m.payload).decode())


def report(c):
    print("RESULT", json.dumps({"connects": connects, "inflight": c.session.flights.count, "got": got}))


def blocking():
    from tinymqtt.client import Client
    c = Client(config.BROKER_HOST, config.BROKER_PORT, **OPTS)
    c.on_connect = lambda connack: connects.append(c.session.session_present)
    c.connect()
    c.subscribe(PREFIX + "cmd", 1, handler=on_cmd)
    print("READY")
    start = time.ticks_ms()
    while c.is_connected() and time.ticks_diff(time.ticks_ms(), start) < 20000:
        c.loop(0.05)
    for i in range(N):
        c.publish(PREFIX + "data", b"q1-%d" % i, 1)
        c.publish(PREFIX + "data", b"q2-%d" % i, 2)
    print("QUEUED")
    while "end" not in got and time.ticks_diff(time.ticks_ms(), start) < 40000:
        c.loop(0.05)
    report(c)
    c.disconnect()


async def aio():
    import asyncio
    from tinymqtt.aio import AsyncClient
    c = AsyncClient(config.BROKER_HOST, config.BROKER_PORT, **OPTS)
    c.on_connect = lambda connack: connects.append(c.session.session_present)
    await c.connect()
    await c.subscribe(PREFIX + "cmd", 1, handler=on_cmd)
    print("READY")
    start = time.ticks_ms()
    while c.is_connected() and time.ticks_diff(time.ticks_ms(), start) < 20000:
        await asyncio.sleep_ms(50)
    for i in range(N):
        c.publish_nowait(PREFIX + "data", b"q1-%d" % i, 1)
        c.publish_nowait(PREFIX + "data", b"q2-%d" % i, 2)
    print("QUEUED")
    while "end" not in got and time.ticks_diff(time.ticks_ms(), start) < 40000:
        await asyncio.sleep_ms(50)
    report(c)
    await c.disconnect()


if config.API == "aio":
    import asyncio
    asyncio.run(aio())
else:
    blocking()
