# Request/response over MQTT 5: the board serves requests on PREFIX/rpc. A request is JSON
# {"method": ..., "params": [...]} with a Response Topic and Correlation Data (MQTT 5 properties); the answer
# {"result": ...} or {"error": ...} goes to that topic with the same Correlation Data, so a caller can match
# answers to questions. Requests without a Response Topic are dropped. "quit" (or COUNT requests) ends it.
#   config: BROKER_HOST, BROKER_PORT, CLIENT_ID, PREFIX, COUNT
import asyncio
import gc
import json
import time

import config
from tinymqtt import props as P
from tinymqtt.aio import AsyncClient

PREFIX = getattr(config, "PREFIX", "tinymqtt/" + config.CLIENT_ID)
_T0 = time.ticks_ms() if hasattr(time, "ticks_ms") else 0


def _uptime_ms():
    return time.ticks_diff(time.ticks_ms(), _T0) if hasattr(time, "ticks_ms") else int(time.monotonic() * 1000)


METHODS = {
    "add": lambda *a: sum(a),
    "echo": lambda *a: list(a),
    "uptime_ms": _uptime_ms,
    "mem_free": lambda: gc.mem_free() if hasattr(gc, "mem_free") else None,
    "board": lambda: getattr(config, "BOARD", "?"),
}


def answer(payload):
    try:
        req = json.loads(payload)
        fn = METHODS.get(req.get("method"))
        if fn is None:
            return {"error": "no method %r" % req.get("method")}
        return {"result": fn(*req.get("params", []))}
    except (ValueError, TypeError, AttributeError) as e:
        return {"error": "bad request: %s" % e}


async def main():
    c = AsyncClient(config.BROKER_HOST, getattr(config, "BROKER_PORT", 1883), client_id=config.CLIENT_ID,
                    version=5, username=getattr(config, "MQTT_USERNAME", None),
                    password=getattr(config, "MQTT_PASSWORD", None), **getattr(config, "SESSION", {}))
    await c.connect()
    await c.subscribe(PREFIX + "/rpc", 1)
    print("READY", PREFIX + "/rpc")
    count, n = getattr(config, "COUNT", 0), 0
    async for msg in c.messages():
        pr = msg.props or {}
        if bytes(msg.payload) == b"quit":
            break
        if P.RESPONSE_TOPIC not in pr:
            continue
        out = {P.CORRELATION_DATA: pr[P.CORRELATION_DATA]} if P.CORRELATION_DATA in pr else {}
        out[P.CONTENT_TYPE] = "application/json"
        await c.publish(pr[P.RESPONSE_TOPIC], json.dumps(answer(bytes(msg.payload))), qos=1, props=out)
        n += 1
        print("ANSWERED", n)
        if count and n >= count:
            break
    await c.disconnect()
    print("DONE")


asyncio.run(main())
