# Unix-port app: one client (config.API "blocking" or "aio") through the test's fault proxy, which cuts the
# link at random points. ROLE "publisher": N messages at QoS 1 and N at QoS 2 on TOPIC ("q1-%06d" / "q2-%06d"),
# until every flow has completed. ROLE "subscriber": subscribed (QoS 2) to TOPIC in a persistent session,
# READY, then counts what arrives until every payload came at least once. The session outlives each cut
# (v5: session expiry, 3.1.1: clean=False). Prints RESULT {got: {payload: count}, lost: LOST events, errors}.
import json
import time

import config
from tinymqtt.errors import ConnectError, ConnectionLost, RemoteProtocolError
from tinymqtt.session import LOST

V, N, TOPIC = config.VERSION, config.N, config.TOPIC
PERSIST = {"session_expiry": 600, "clean": False} if V == 5 else {"clean": False}
OPTS = dict(client_id=config.CLIENT_ID, version=V, max_inflight=32, keepalive=10, backoff_min_ms=20,
            backoff_max_ms=200, **PERSIST)
got, lost, errors = {}, [], []


def on_message(m):
    p = bytes(m.payload).decode()
    got[p] = got.get(p, 0) + 1


def on_event(ev, value, reason):
    if ev == LOST:
        lost.append(str(value))


def setup(c):
    c.on_event = on_event
    c.on_disconnect = lambda e: errors.append(str(e))
    c.on_message = on_message


def finished():
    return len(got) >= 2 * N if config.ROLE == "subscriber" else False


def report():
    print("RESULT", json.dumps({"got": got, "lost": lost, "errors": len(errors)}))


def blocking():
    from tinymqtt.client import Client
    c = Client(config.BROKER_HOST, config.BROKER_PORT, **OPTS)
    setup(c)
    c.connect()
    start = time.ticks_ms()
    if config.ROLE == "subscriber":
        c.subscribe(TOPIC, 2)
        print("READY")
        while not finished() and time.ticks_diff(time.ticks_ms(), start) < 90000:
            c.loop(0.05)
    else:
        for i in range(N):
            c.publish(TOPIC, b"q1-%06d" % i, 1)
            c.publish(TOPIC, b"q2-%06d" % i, 2)
            if i % 16 == 0:
                c.loop(0)
        while c.session.flights.count and time.ticks_diff(time.ticks_ms(), start) < 90000:
            c.loop(0.02)
    report()
    c.disconnect()


async def aio():
    import asyncio
    from tinymqtt.aio import AsyncClient
    c = AsyncClient(config.BROKER_HOST, config.BROKER_PORT, **OPTS)
    setup(c)
    await c.connect()
    start = time.ticks_ms()
    if config.ROLE == "subscriber":
        await c.subscribe(TOPIC, 2, handler=on_message)
        print("READY")
        while not finished() and time.ticks_diff(time.ticks_ms(), start) < 90000:
            await asyncio.sleep_ms(20)
    else:
        for i in range(N):
            while c.publish_nowait(TOPIC, b"q1-%06d" % i, 1) < 0:  # every slot taken: let acks in
                await asyncio.sleep_ms(5)
            while c.publish_nowait(TOPIC, b"q2-%06d" % i, 2) < 0:
                await asyncio.sleep_ms(5)
            try:
                await c.flush()
            except (OSError, ConnectionLost, RemoteProtocolError, ConnectError):  # (what ends a link)
                pass  # the reader task sees the cut too and reconnects; the session keeps the messages
        while c.session.flights.count and time.ticks_diff(time.ticks_ms(), start) < 90000:
            await asyncio.sleep_ms(20)
    report()
    await c.disconnect()


if config.API == "aio":
    import asyncio
    asyncio.run(aio())
else:
    blocking()
