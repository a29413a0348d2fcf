# Board app: a subscribe handler that raises inside the asyncio client's reader task. The client must stop
# with that error (last_error, on_disconnect) and wake what awaits it, not leave an awaited QoS 1 publish
# waiting forever on a reader that is gone. Prints RESULT {returned, last_error, disconnected, closed}.
import asyncio
import json

import config
from tinymqtt.aio import AsyncClient

seen = []


def handler(message):
    raise ValueError("the handler failed")


async def main():
    c = AsyncClient(config.BROKER_HOST, config.BROKER_PORT, client_id=config.CLIENT_ID, version=config.VERSION,
                    reconnect=False)
    c.on_disconnect = lambda err: seen.append(repr(err))
    await c.connect()
    await c.subscribe(config.PREFIX + "in", 1, handler=handler)
    await c.publish(config.PREFIX + "in", b"boom", qos=1, wait=False)  # comes back to the handler
    # An awaited flow started now can only end if the client stops: the reader is the one that dies.
    returned = await asyncio.wait_for(c.publish(config.PREFIX + "other", b"x", qos=1), 10)
    print("RESULT", json.dumps({"returned": returned, "last_error": repr(c.last_error), "disconnected": seen,
                                "closed": not c.is_connected()}))


try:
    asyncio.run(main())
except ValueError:  # (CPython's asyncio.run may surface it; MicroPython's prints the task's traceback)
    pass
