# Board app: a slow consumer of messages(). Subscribes to PREFIX/in (QoS 2: messages keep their QoS) with a
# small receive_maximum, says READY, then takes one message every config.PAUSE_MS until it has config.N.
# Records, after every message the session delivers, how many the client holds (the messages() ring) and
# how many it has not acknowledged (QoS 1/2 the session holds for the application).
# Prints RESULT {got: [payload, ...], held: max held, unacked: max unacknowledged, parked: times parked}.
import asyncio
import json

import config
from tinymqtt.aio import AsyncClient

stats = {"held": 0, "unacked": 0, "parked": 0}


async def main():
    c = AsyncClient(config.BROKER_HOST, config.BROKER_PORT, client_id=config.CLIENT_ID, version=config.VERSION,
                    reconnect=False, receive_maximum=config.RM)
    s, deliver = c.session, c.session.on_event

    def on_event(ev, value, reason):
        deliver(ev, value, reason)
        stats["held"] = max(stats["held"], c._inbox_n)
        stats["unacked"] = max(stats["unacked"], len(s._held))  # delivered, not acknowledged yet (app_acks.py)

    s.on_event = on_event
    await c.connect()
    await c.subscribe(config.PREFIX + "in", 2)
    print("READY")
    got = []
    msgs = c.messages()
    while len(got) < config.N:
        m = await asyncio.wait_for(msgs.__anext__(), 10)
        got.append(m.payload.decode())
        stats["parked"] += s.parked
        await asyncio.sleep(config.PAUSE_MS / 1000)  # the application is slow
    stats["got"] = got
    stats["connected"] = c.is_connected()
    print("RESULT", json.dumps(stats))
    await c.disconnect()


asyncio.run(main())
