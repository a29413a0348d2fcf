# Unix-port app: TLS through the unix port's ssl (mbedTLS). For each case in config.CASES ([name, port, tls
# options, credentials?]) one client (config.API "blocking" or "aio") connects, publishes one QoS 1 message
# and disconnects. Prints RESULT {case, ok, error: the exception's class and text}.
import json

import config

V = config.VERSION


def result(name, ok, e=None):
    print("RESULT", json.dumps({"case": name, "ok": ok, "error": None if e is None else
                                "%s: %s" % (type(e).__name__, e)}))


def options(creds):
    opts = dict(client_id=config.CLIENT_ID, version=V, reconnect=False)
    if creds:
        opts.update(username=config.USER, password=config.SECRET.encode())
    return opts


def blocking(name, port, tls, creds):
    from tinymqtt.client import Client
    c = Client(config.HOST, port, tls=tls, **options(creds))
    try:
        c.connect()
        ok = c.wait_for(c.publish(config.TOPIC, b"over tls", 1), 10)
        c.disconnect()
        result(name, ok)
    except Exception as e:
        result(name, False, e)


async def aio(name, port, tls, creds):
    from tinymqtt.aio import AsyncClient
    c = AsyncClient(config.HOST, port, tls=tls, **options(creds))
    try:
        await c.connect()
        ok = await c.publish(config.TOPIC, b"over tls", 1) in (0, 0x10)  # 0x10: no subscriber
        await c.disconnect()
        result(name, ok)
    except Exception as e:
        await c.close()
        result(name, False, e)


for case in config.CASES:
    if config.API == "aio":
        import asyncio
        asyncio.run(aio(*case))
    else:
        blocking(*case)
