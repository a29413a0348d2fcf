# Board app (MicroPython): the asyncio client streams both ways with the esp32's buffers (4 KB in, 2 KB out):
# subscribe(..., chunks=True) to the retained image on PREFIX + "image" (summed as it arrives), then
# publish_nowait(topic, file, 1, length=n) + flush() of a file written here, to PREFIX + "up", and
# `await publish(topic, file, 1, length=n)` of a 256 KB one (larger than the test's heap), to PREFIX + "up2".
# Prints RESULT {"bytes": n, "sum": checksum, "chunks": k, "published": n, "awaited": n, "reason": code}.
import asyncio
import json

import config
from tinymqtt.aio import AsyncClient

st = {"bytes": 0, "sum": 0, "chunks": 0, "done": False}


def on_chunk(msg, total, offset, chunk):
    if offset == 0:
        st["bytes"] = st["sum"] = st["chunks"] = 0
    k = st["sum"]
    for i in range(len(chunk)):
        k = (k + chunk[i]) & 0xFFFF
    st["sum"] = k
    st["bytes"] += len(chunk)
    st["chunks"] += 1
    if offset + len(chunk) == total:
        st["done"] = True


async def main():
    c = AsyncClient(config.BROKER_HOST, config.BROKER_PORT, client_id=config.CLIENT_ID, version=config.VERSION,
                    max_packet_size=4096, out_size=2048, max_stream_size=1 << 20)
    await c.connect()
    await c.subscribe(config.PREFIX + "image", 1, handler=on_chunk, chunks=True)
    for _ in range(200):
        if st["done"]:
            break
        await asyncio.sleep_ms(50)
    n = 100000
    buf = bytearray(1000)
    with open("up.bin", "wb") as f:
        for i in range(n // 1000):
            buf[0] = i & 255
            f.write(buf)
    with open("up.bin", "rb") as f:
        c.publish_nowait(config.PREFIX + "up", f, 1, length=n)
        await c.flush()
        for _ in range(100):  # until its PUBACK
            if not c.session.flights.count:
                break
            await asyncio.sleep_ms(50)
    st["published"] = n if not c.session.flights.count else 0
    n = 256 * 1024
    buf = bytearray(1024)
    with open("up2.bin", "wb") as f:
        for i in range(n // 1024):
            buf[0] = (i + 7) & 255
            f.write(buf)
    with open("up2.bin", "rb") as f:
        st["reason"] = await c.publish(config.PREFIX + "up2", f, 1, length=n)  # returns with its PUBACK
        st["awaited"] = f.tell()
    await c.disconnect()
    print("RESULT", json.dumps(st))


asyncio.run(main())
