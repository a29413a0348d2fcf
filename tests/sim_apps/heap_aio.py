# Board app (MicroPython only): the asyncio client's heap cost through its public API over a real socket,
# MQTT 5: publish_nowait() (under micropython.heap_lock(), a window of max_inflight calls at a time), await
# publish() (at QoS 0 also under heap_lock(), in windows of 8), and publish_nowait() + flush() + `async for`
# over messages() (the client receives what it publishes: the publish side, the read and the message
# together). Figures are
# gc.mem_alloc() deltas per message with automatic collection off; they include the reader task's awaited
# read and the stream's drain (on the simulated board its bridge to Node adds its own, see heap.py).
# Then one second idle (keepalive 60 s).
# Prints RESULT {"q1 await publish": bytes, "q1 publish_nowait locked": true, ...}.
import asyncio
import gc
import json
import micropython
import sys

import config
from tinymqtt.aio import AsyncClient

W, N, PREFIX = config.WARMUP, config.N, config.PREFIX
PAYLOAD = b"0123456789abcdef"
LIMITS = {"max_packet_size": 1024, "max_inflight": 8, "receive_maximum": 8}
fig = {}


def start():
    gc.collect()
    gc.disable()
    return gc.mem_alloc()


def stop(a, n):
    b = gc.mem_alloc()
    gc.enable()
    return (b - a) / n


async def main():
    c = AsyncClient(config.BROKER_HOST, config.BROKER_PORT, client_id=config.CLIENT_ID, version=5,
                    reconnect=False, **LIMITS)
    await c.connect()
    flights, topic, rtopic = c.session.flights, PREFIX + "p", PREFIX + "r"
    await c.subscribe(rtopic, 2)
    msgs = c.messages()
    for q in (0, 1, 2):
        ok = True
        for r in range(W + N // 8):  # windows of 8 publish_nowait() calls, the heap locked after warm-up
            if r >= W:
                micropython.heap_lock()
            try:
                for i in range(8):
                    c.publish_nowait(topic, PAYLOAD, q)
            except MemoryError:
                ok = False
            if r >= W:
                micropython.heap_unlock()
            await c.flush()
            while flights.count:
                await asyncio.sleep_ms(1)
        fig["q%d publish_nowait locked" % q] = ok
        for i in range(W + N):
            if i == W:
                a = start()
            await c.publish(topic, PAYLOAD, q)
        fig["q%d await publish" % q] = stop(a, N)
        if not q and sys.platform != "webassembly":  # QoS 0: no coroutine of the client's, only the stream's
            ok = True  # yield (the WebAssembly build's asyncio allocates 16 B for a yield itself: not there)
            for r in range(W + N // 8):
                if r >= W:
                    micropython.heap_lock()
                try:
                    for i in range(8):
                        await c.publish(topic, PAYLOAD, 0)
                except MemoryError:
                    ok = False
                if r >= W:
                    micropython.heap_unlock()
            fig["q0 await publish locked"] = ok
        for i in range(W + N):
            if i == W:
                a = start()
            c.publish_nowait(rtopic, PAYLOAD, q)
            await c.flush()
            await msgs.__anext__()
        fig["q%d publish_nowait + async for" % q] = stop(a, N)
        while flights.count:
            await asyncio.sleep_ms(1)
    await asyncio.sleep_ms(300)  # the last QoS 2 flow's PUBREL and PUBCOMP pass
    a = start()  # idle: the reader waits on the socket, the ticker sleeps, no keep-alive falls due
    await asyncio.sleep_ms(1000)
    fig["idle 1 s"] = stop(a, 1)
    fig["connected"] = c.is_connected()
    await c.disconnect()
    print("RESULT", json.dumps(fig))


asyncio.run(main())
