# Unix-port program: three tasks write and drain one asyncio stream of this tree's port (ports/linux, or
# ports/common under esp32 / picow) into a socket whose reader (a server in this program) stalls first, then reads
# everything: every byte must arrive, in order, and every drain must end. (MicroPython's own Stream.drain() drops
# what another task writes during it, and a second task's drain took the first's place in the IO queue: a hang.)
# Prints RESULT {"drained": [...], "bytes": n, "expected": n, "in_order": bool}.
import asyncio
import json

import config
import tinymqtt_port as port

got = [0, 0]  # bytes, a checksum of the first byte of each 4 KB block, in order


async def serve(r, w):
    await asyncio.sleep_ms(300)  # the client's socket fills meanwhile
    buf = bytearray(4096)
    while True:
        n = await r.readinto(buf)
        if not n:
            break
        for i in range(0, n, 4096):
            got[1] = (got[1] * 31 + buf[i]) & 0xFFFFFF
        got[0] += n
        if n < 4096:  # (keep blocks aligned: read the rest of this block)
            k = n
            while k < 4096:
                m = await r.readinto(memoryview(buf)[k:])
                if not m:
                    break
                k += m
                got[0] += m


async def main():
    port.network_up()
    srv = await asyncio.start_server(serve, "127.0.0.1", config.SERVER_PORT)
    st = await port.open_stream("127.0.0.1", config.SERVER_PORT)
    block = bytearray(4096)
    sent = [0, 0]  # blocks, checksum

    def put():
        block[0] = sent[0] & 255
        sent[1] = (sent[1] * 31 + block[0]) & 0xFFFFFF
        sent[0] += 1
        st.write(block, 4096)

    for i in range(1000):  # 4 MB: more than the socket takes while the server sleeps
        put()
    done = []

    async def drainer(k):
        await st.drain()
        done.append(k)

    async def writer():
        for i in range(20):
            put()
            await asyncio.sleep_ms(1)
        await st.drain()
        done.append("writer")

    await asyncio.wait_for(asyncio.gather(drainer(1), drainer(2), writer()), 20)
    st.close()
    for _ in range(100):
        if got[0] >= sent[0] * 4096:
            break
        await asyncio.sleep_ms(20)
    print("RESULT " + json.dumps({"drained": done, "bytes": got[0], "expected": sent[0] * 4096,
                                  "in_order": got[1] == sent[1]}))
    srv.close()


asyncio.run(main())
