# Board app (MicroPython only): streamed receive (subscribe(..., chunks=True)) of the retained images the test
# published beforehand on PREFIX + "<size>" (config.SIZES), with the esp32's buffers (4 KB in, 2 KB out), over a
# real socket, at QoS 1, on MQTT VERSION. For each image: its bytes and a checksum, the chunks, and the most heap
# in use during the receive (gc.mem_alloc() at every chunk, after a collection before it starts: what the receive
# needs). Then, unless config.COUNT is False (the bench's smallest-heap runs), the largest image once more with
# automatic collection off, to count what the public API allocates per chunk: gc.mem_alloc() from one call of
# the handler to the next (the next chunk's read, the session, the view), its largest and smallest step and its
# sum over every chunk after the first, beside the size of one memoryview slice measured in the same run (the
# chunk's view: the one allocation the API makes).
# Prints RESULT {"<size>": {...}, "view": bytes, "connected": heap, "count": {...}}.
import gc
import json

import config
from tinymqtt.client import Client

fig = {}
mv = memoryview(bytearray(8))
gc.collect()
for _ in range(2):  # (the second: the first may also grow a table)
    a = gc.mem_alloc()
    v = mv[1:2]
    fig["view"] = gc.mem_alloc() - a
# (every value stored below is a small int: storing it in this dict allocates nothing)
state = {"n": 0, "sum": 0, "chunks": 0, "peak": 0, "done": False, "total": 0, "last": 0, "second": 0,
         "step_max": 0, "step_min": 0}


def on_chunk(msg, total, offset, chunk):
    s = state
    m = gc.mem_alloc()
    if offset == 0:  # a new message (one cut off would come again from 0)
        s["n"] = s["sum"] = s["chunks"] = s["step_max"] = s["step_min"] = 0
    elif s["chunks"] == 1:
        s["second"] = m
    if s["chunks"] >= 1:  # the heap used from the previous chunk's call to this one
        d = m - s["last"]
        if d > s["step_max"] or s["chunks"] == 1:
            s["step_max"] = d
        if d < s["step_min"] or s["chunks"] == 1:
            s["step_min"] = d
    s["last"] = m
    k = s["sum"]
    for i in range(len(chunk)):  # (a checksum that allocates nothing: the test compares it with the image's)
        k = (k + chunk[i]) & 0xFFFF
    s["sum"] = k
    s["n"] += len(chunk)
    s["chunks"] += 1
    if m > s["peak"]:
        s["peak"] = m
    if offset + len(chunk) == total:
        s["done"] = True
        s["total"] = total


c = Client(config.BROKER_HOST, config.BROKER_PORT, reconnect=False, client_id=config.CLIENT_ID, version=config.VERSION,
           keepalive=30, max_packet_size=4096, out_size=2048, max_stream_size=2 << 20)
c.connect()
c.loop(0.2)
c.loop(0.5)  # (loop() converts each new timeout once: the one the receive loops use, seen before counting)
gc.collect()
fig["connected"] = gc.mem_alloc()


def receive(size):
    state["done"] = False
    state["peak"] = 0
    c.subscribe(config.PREFIX + str(size), 1, handler=on_chunk, chunks=True)
    k = 0
    while not state["done"] and k < 2000:
        c.loop(0.5)
        k += 1
    c.unsubscribe(config.PREFIX + str(size))


for size in config.SIZES:
    gc.collect()
    start = gc.mem_alloc()
    receive(size)
    fig[str(size)] = {"bytes": state["n"], "total": state["total"], "sum": state["sum"], "chunks": state["chunks"],
                      "peak": state["peak"], "start": start}
if getattr(config, "COUNT", True):
    size = max(config.SIZES)
    gc.collect()
    gc.disable()  # every byte allocated stays counted
    receive(size)
    gc.enable()
    s = state
    fig["count"] = {"size": size, "bytes": s["n"], "chunks": s["chunks"], "step_max": s["step_max"],
                    "step_min": s["step_min"], "sum": s["last"] - s["second"], "steps": s["chunks"] - 2}
fig["connected_end"] = c.is_connected()
c.disconnect()
print("RESULT", json.dumps(fig))
