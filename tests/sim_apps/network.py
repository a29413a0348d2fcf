# Board app: the board's own network goes down and comes back (the test toggles the simulated network:
# every socket is destroyed, and network_up() fails while it is down). The client keeps a persistent session
# and reconnects by itself. Prints DOWN <error> when the link is lost or a reconnect fails, UP <session present>
# on each CONNACK, GOT <payload> for each message on PREFIX/cmd (QoS 1); on "end": RESULT {connects, got}.
import asyncio
import json

import config
from tinymqtt.aio import AsyncClient

V = config.VERSION
connects, got = [], []


async def main():
    persist = {"session_expiry": 300} if V == 5 else {"clean": False}
    c = AsyncClient(config.BROKER_HOST, config.BROKER_PORT, client_id=config.CLIENT_ID, version=V,
                    backoff_min_ms=100, backoff_max_ms=200, **persist)
    c.on_disconnect = lambda err: print("DOWN", err)

    def up(connack):
        connects.append(c.session.session_present)
        print("UP", connects[-1])

    c.on_connect = up
    await c.connect()
    await c.subscribe(config.PREFIX + "cmd", 1)
    print("READY")
    async for m in c.messages():
        got.append(m.payload.decode())
        print("GOT", got[-1])
        if m.payload == b"end":
            break
    print("RESULT", json.dumps({"connects": connects, "got": got}))
    await c.disconnect()


asyncio.run(main())
