# Unix-port app: keep-alive against a broker that goes silent (the test stops it with SIGSTOP after READY:
# the TCP link stays up, nothing answers). One client (config.API "blocking" or "aio"), keepalive
# config.KEEPALIVE s, no reconnect. Prints RESULT {lost: the link was declared dead, ms: after READY, error}.
import json
import time

import config

OPTS = dict(client_id=config.CLIENT_ID, version=config.VERSION, keepalive=config.KEEPALIVE, reconnect=False)
errors = []


def report(start, c):
    print("RESULT", json.dumps({"lost": not c.is_connected(), "ms": time.ticks_diff(time.ticks_ms(), start),
                                "error": str(c.last_error)}))


def blocking():
    from tinymqtt.client import Client
    c = Client(config.BROKER_HOST, config.BROKER_PORT, **OPTS)
    c.connect()
    print("READY")
    start = time.ticks_ms()
    while c.is_connected() and time.ticks_diff(time.ticks_ms(), start) < 30000:
        c.loop(0.1)
    report(start, c)


async def aio():
    import asyncio
    from tinymqtt.aio import AsyncClient
    c = AsyncClient(config.BROKER_HOST, config.BROKER_PORT, **OPTS)
    await c.connect()
    print("READY")
    start = time.ticks_ms()
    while c.is_connected() and time.ticks_diff(time.ticks_ms(), start) < 30000:
        await asyncio.sleep_ms(50)
    report(start, c)
    await c.close()


if config.API == "aio":
    import asyncio
    asyncio.run(aio())
else:
    blocking()
