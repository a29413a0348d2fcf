# Board app: keep-alive. One client per protocol version in config.VERSIONS (client id CLIENT_ID + "v<N>"),
# each with a config.KEEPALIVE s keepalive, connected and idle for config.IDLE s. The test counts the PINGREQs
# in the broker's log. Prints RESULT {version: {connected, pinging, error}}.
import asyncio
import json

import config
from tinymqtt.aio import AsyncClient


async def main():
    cs = [AsyncClient(config.BROKER_HOST, config.BROKER_PORT, client_id=config.CLIENT_ID + "v%d" % v, version=v,
                      keepalive=config.KEEPALIVE, reconnect=False) for v in config.VERSIONS]
    for c in cs:
        await c.connect()
    await asyncio.sleep(config.IDLE)
    res = {}
    for v, c in zip(config.VERSIONS, cs):
        res[v] = {"connected": c.is_connected(), "pinging": c.session.pinging, "error": str(c.last_error)}
        await c.disconnect()
    print("RESULT", json.dumps(res))


asyncio.run(main())
