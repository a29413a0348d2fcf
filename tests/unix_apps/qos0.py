# Unix-port app: N QoS 0 messages of 1 KB ("%04d" + dots) on TOPIC, one client (config.API "blocking" or
# "aio") through a proxy that pauses between reads: nothing may be lost, so the link must never be declared
# dead by a send timeout. Prints RESULT {errors: every disconnect's error}.
import json

import config

OPTS = dict(client_id=config.CLIENT_ID, version=config.VERSION, reconnect=False)
errors = []


def payload(i):
    return b"%04d" % i + b"." * 1020


def blocking():
    from tinymqtt.client import Client
    c = Client(config.BROKER_HOST, config.BROKER_PORT, out_size=16384, **OPTS)
    c.on_disconnect = lambda e: errors.append(str(e))
    c.connect()
    for i in range(config.N):
        c.publish(config.TOPIC, payload(i), 0)
    c.disconnect()


async def aio():
    from tinymqtt.aio import AsyncClient
    c = AsyncClient(config.BROKER_HOST, config.BROKER_PORT, out_size=16384, **OPTS)
    c.on_disconnect = lambda e: errors.append(str(e))
    await c.connect()
    for i in range(config.N):
        await c.publish(config.TOPIC, payload(i), 0)
    await c.disconnect()


if config.API == "aio":
    import asyncio
    asyncio.run(aio())
else:
    blocking()
print("RESULT", json.dumps({"errors": [e for e in errors if e != "None"]}))
