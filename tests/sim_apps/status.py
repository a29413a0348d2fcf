# Board app: the retained online/offline status pattern. Connects with a retained Will "offline" on
# PREFIX/status, publishes a retained "online", then ends as config.END says: "crash" (the connection closes
# without DISCONNECT, so the broker publishes the Will) or "graceful" (publishes "offline" itself, then a
# DISCONNECT, which discards the Will), once a message arrives on PREFIX/ctl. Prints RESULT {connected, present,
# code} once "online" is acknowledged.
import asyncio
import json

import config
from tinymqtt import props as P
from tinymqtt.aio import AsyncClient
from tinymqtt.packets import Packet, PUBLISH

V = config.VERSION
STATUS = config.PREFIX + "status"


async def main():
    props = None
    if V == 5:  # the Will's own properties travel in CONNECT and come back on the Will message
        props = {P.WILL_DELAY_INTERVAL: 0, P.CONTENT_TYPE: "text/plain", P.USER_PROPERTY: [("board", "sim")]}
    will = Packet(PUBLISH, topic=STATUS, payload=b"offline", qos=1, retain=True, props=props)
    c = AsyncClient(config.BROKER_HOST, config.BROKER_PORT, client_id=config.CLIENT_ID, version=V, will=will,
                    reconnect=False)
    present = await c.connect()
    await c.subscribe(config.PREFIX + "ctl", 1)
    code = await c.publish(STATUS, b"online", qos=1, retain=True)
    print("RESULT", json.dumps({"connected": c.is_connected(), "present": present, "code": code}))
    await c.messages().__anext__()
    if config.END == "graceful":
        await c.publish(STATUS, b"offline", qos=1, retain=True)
        await c.disconnect()
    else:
        await c.close()  # no DISCONNECT: to the broker this is a crash


asyncio.run(main())
