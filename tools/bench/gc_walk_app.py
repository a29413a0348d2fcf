# Run by tools/bench/gc_walk.py on its instrumented 32-bit unix port (gc.walk() exists only there):
#   micropython gc_walk_app.py PORT QOS N CLIENT
# CLIENT: aio (await publish(wait=False)) | nowait (publish_nowait(), await flush() when every slot is taken) |
# blocking (batch=True). N messages of 64 B through the public API, WINDOW (environment, default 1000) in flight, as
# the bench's publishers send them; prints one line
# RESULT {json}: msgs/s, the heap allocations made per message (gc_alloc calls: call frames too large for the C
# stack, which MicroPython puts on the heap for the call and frees at its return, and real objects), how far each
# allocation searched the allocation table (bytes of it, 4 blocks each) and the bytes still allocated per message.
# TRACE=K (environment): also a line TRACE {json} every K messages: the heap block where gc_alloc's next search
# starts, the block of the last call frame, the session's two buffers (blocks from-to) and the table bytes searched
# per allocation since the last such line.
import gc
import json
import os
import sys
import time
import uctypes

PORT, QOS, N, CLIENT = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
TOPIC, PAYLOAD = "bench/gcwalk", b"x" * 64
TRACE = int(os.getenv("TRACE", "0"))
OPTIONS = dict(reconnect=False, client_id="gcwalk", version=4, max_inflight=int(os.getenv("WINDOW", "1000")),
               out_size=int(os.getenv("OUT_SIZE", "65536")), max_packet_size=int(os.getenv("IN_SIZE", "65536")))


def cpu():
    with open("/proc/self/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / 100


class Count:
    def start(self, session):
        gc.collect()
        self.heap, self.walk, self.cpu, self.t = gc.mem_alloc(), gc.walk(), cpu(), time.ticks_us()
        self.last = self.walk
        # (TRACE: where the session's two buffers lie, in heap blocks of 16 bytes)
        block = lambda b: (uctypes.addressof(b) - self.walk[4]) // 16
        self.buffers = [(block(b), block(b) + len(b) // 16) for b in (session.inbuf, session.out)]

    def sample(self, sent):
        # TRACE: every TRACE messages, where the allocator's search starts and where the last call frame went, beside
        # the buffers; and the table bytes searched per allocation since the last sample
        w = gc.walk()
        print("TRACE " + json.dumps({"sent": sent, "start": w[2], "frame": w[3], "buffers": self.buffers,
                                     "atb_per_alloc": (w[1] - self.last[1]) / max(w[0] - self.last[0], 1)}))
        self.last = w

    def result(self):
        s = time.ticks_diff(time.ticks_us(), self.t) / 1e6
        w = gc.walk()
        calls, scanned = w[0] - self.walk[0], w[1] - self.walk[1]
        print("RESULT " + json.dumps({"rate": N / s, "cpu_us": (cpu() - self.cpu) * 1e6 / N,
                                      "allocs": calls / N, "atb_per_alloc": scanned / max(calls, 1),
                                      "kept": (gc.mem_alloc() - self.heap) / N}))


def blocking():
    from tinymqtt.client import Client
    c = Client("127.0.0.1", PORT, batch=True, **OPTIONS)
    c.connect()
    count = Count()
    count.start(c.session)
    for sent in range(1, N + 1):
        c.publish(TOPIC, PAYLOAD, QOS)
        if TRACE and not sent % TRACE:
            count.sample(sent)
    while c.session.flights.count:
        c.loop(0.01)
    count.result()
    c.disconnect()


async def aio():
    import asyncio
    from tinymqtt.aio import AsyncClient
    c = AsyncClient("127.0.0.1", PORT, **OPTIONS)
    await c.connect()
    count = Count()
    count.start(c.session)
    sent = 0
    while sent < N:
        if CLIENT == "aio":
            await c.publish(TOPIC, PAYLOAD, QOS, wait=False)
        elif c.publish_nowait(TOPIC, PAYLOAD, QOS) < 0:  # every slot taken: the reader takes acks meanwhile
            await c.flush()
            continue
        sent += 1
        if TRACE and not sent % TRACE:
            count.sample(sent)
    await c.flush()
    while c.session.flights.count:
        await asyncio.sleep_ms(1)
    count.result()
    await c.disconnect()


if CLIENT in ("aio", "nowait"):
    import asyncio
    asyncio.run(aio())
else:
    blocking()
