# Board app (MicroPython only): streamed receive (subscribe(..., chunks=True)) of the retained images the test
# published beforehand on PREFIX + "<size>" (config.SIZES), with the esp32's buffers (4 KB in, 2 KB out), over a
# real socket, at QoS 1, on MQTT VERSION. For each image: its bytes and a checksum, the chunks, the most heap in
# use during the receive (gc.mem_alloc() at every chunk, after a collection before it starts: what the receive
# needs) and, with automatic collection off, the bytes allocated per chunk, beside the size of one memoryview
# slice measured in the same run (the chunk's view: the one allocation the API makes).
# Prints RESULT {"<size>": {...}, "view": bytes, "connected": heap}.
import array
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
D = array.array("i", [0] * 64)  # the heap used from one chunk's call to the next (the first image), preallocated
state = {"n": 0, "sum": 0, "chunks": 0, "peak": 0, "done": False, "total": 0, "first": 0, "last": 0}


def on_chunk(msg, total, offset, chunk):
    s = state
    m = gc.mem_alloc()
    if offset == 0:  # a new message (one cut off would come again from 0)
        s["n"] = s["sum"] = s["chunks"] = 0
        s["first"] = m
    if s["chunks"] < 64:
        D[s["chunks"]] = m - s["last"]
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
gc.collect()
fig["connected"] = gc.mem_alloc()
for size in config.SIZES:
    state["done"] = False
    state["peak"] = 0
    gc.collect()
    start = gc.mem_alloc()
    counting = size == config.SIZES[0]  # the first image: automatic collection off, to count the bytes per chunk
    if counting:
        gc.disable()
    c.subscribe(config.PREFIX + str(size), 1, handler=on_chunk, chunks=True)
    k = 0
    while not state["done"] and k < 2000:
        c.loop(0.5)
        k += 1
    per = list(D[1:min(state["chunks"], 64)]) if counting else None  # each chunk's bytes, from the 2nd chunk on
    gc.enable()
    c.unsubscribe(config.PREFIX + str(size))
    fig[str(size)] = {"bytes": state["n"], "total": state["total"], "sum": state["sum"], "chunks": state["chunks"],
                      "peak": state["peak"], "start": start, "per_chunk": per if counting else None}
fig["connected_end"] = c.is_connected()
c.disconnect()
print("RESULT", json.dumps(fig))
