# Board app (MicroPython only): the asyncio client's heap figures, from gc.mem_alloc() deltas with automatic
# collection off (so nothing allocated in a window is freed before it is counted). Steady state: each window
# follows a warm-up, and its figure is the bytes allocated per message.
#   - the heap the library's modules take, and a client with its buffers (max_packet_size 1024, max_inflight 8,
#     receive_maximum 8), before and after connect();
#   - the session alone (sans-IO, bytes in and out of its buffers): publish and receive, with heap_lock checks;
#   - the client: publish_nowait + flush, awaited publish, received messages (a handler, and messages());
#   - the simulator's own I/O (a jsnet write + awaited read), which a real board's stream does not have.
# The sim keeps the Python side of every awaited JS promise alive until Node's GC finalizes its proxy, so
# a heap figure across I/O is taken between two settle()s: a JS GC, then gc.collect().
# The test publishes to PREFIX/h (handler) or PREFIX/m (messages()) when told "RX <h|m> <qos> <count>".
# Prints RESULT {figure: bytes}.
import asyncio
import gc
import js
import json
import micropython

import config

gc.collect()
_m0 = gc.mem_alloc()
import tinymqtt_port  # noqa: E402 (the library's share of the heap is what these imports take)
from tinymqtt.aio import AsyncClient  # noqa: E402
from tinymqtt.session import Session  # noqa: E402
from tinymqtt.session5 import Session5  # noqa: E402
from tinymqtt.packets import encode_publish, v5  # noqa: E402
from tinymqtt import aliases  # noqa: E402,F401  a v5 client with topic aliases loads both at its CONNACK:
v5()  # counted here with the library, not in the client's own figures

gc.collect()
IMPORTS = gc.mem_alloc() - _m0

V, W, N, PREFIX = config.VERSION, config.WARMUP, config.N, config.PREFIX
PAYLOAD = b"0123456789abcdef"
LIMITS = {"max_packet_size": 1024, "max_inflight": 8, "receive_maximum": 8}
fig = {"imports": IMPORTS}


async def settle():
    for _ in range(3):
        if hasattr(js, "gc"):  # node --expose-gc
            js.gc()
        await asyncio.sleep_ms(10)  # the JS finalizers run meanwhile
        gc.collect()


def start():
    gc.collect()
    gc.disable()
    return gc.mem_alloc()


def stop(a, n):
    b = gc.mem_alloc()
    gc.enable()
    return (b - a) // n


def locked(s, fn, n):
    """True when n calls of fn() allocate nothing with the heap locked (an exception must not escape while it
    is: that hangs this port). An allocation fails mid-call, so the session's buffers are reset after it."""
    micropython.heap_lock()
    try:
        for _ in range(n):
            fn()
        ok = True
    except MemoryError:
        ok = False
    micropython.heap_unlock()
    if not ok:
        s.inlen = s.outlen = 0
    return ok


def session_figures():
    # The session alone: what publishing and receiving cost before any driver or I/O.
    gc.collect()
    a = gc.mem_alloc()
    s = (Session5 if V == 5 else Session)(client_id="heap", version=V, **LIMITS)  # the driver's share is the difference to a client
    gc.collect()
    fig["session"] = gc.mem_alloc() - a
    ib = memoryview(s.inbuf)
    s.connect(0)
    connack = b"\x20\x03\x00\x00\x00" if V == 5 else b"\x20\x02\x00\x00"
    ib[0:len(connack)] = connack
    s.received(len(connack), 0)
    topic = PREFIX + "s"
    s.subscribe([(topic, 2)], handler=lambda m: None)
    s.outlen = 0
    for q in (0, 1, 2):
        def flow():
            pid = s.publish(topic, PAYLOAD, q)
            s.outlen = 0
            if q:  # the server's acks, as bytes: PUBACK, or PUBREC then PUBCOMP
                ib[0] = 0x40 if q == 1 else 0x50
                ib[4] = 0x70
                for k in (0, 4):
                    ib[k + 1], ib[k + 2], ib[k + 3] = 2, pid >> 8, pid & 0xFF
                s.received(4 * q, 0)
                s.outlen = 0

        for _ in range(W):
            flow()
        a = start()
        for _ in range(N):
            flow()
        fig["session publish+acks q%d" % q] = stop(a, N)
        fig["session publish+acks q%d heap_lock" % q] = locked(s, flow, N)
        # A received PUBLISH (QoS 2: and its PUBREL), read in place.
        pkt = bytearray(64)
        n = encode_publish(pkt, V, topic.encode(), PAYLOAD, q, False, False, 7 if q else 0, None, 0, 0)
        if q == 2:
            pkt[n:n + 4] = b"\x62\x02\x00\x07"
            n += 4
        mv = memoryview(pkt)[0:n]

        def rx():
            ib[0:n] = mv
            s.received(n, 0)
            s.outlen = 0

        for _ in range(W):
            rx()
        a = start()
        for _ in range(N):
            rx()
        fig["session receive q%d" % q] = stop(a, N)
        fig["session receive q%d heap_lock" % q] = locked(s, rx, N)


async def bridge_figure():
    # The simulator's I/O alone: a PINGREQ written and its PINGRESP awaited, on a raw connection.
    st = await tinymqtt_port.open_stream(config.BROKER_HOST, config.BROKER_PORT)
    buf = bytearray(64)
    cid = b"heapraw"
    connect = bytearray(b"\x10\x00\x00\x04MQTT\x04\x02\x00\x3c\x00") + bytearray([len(cid)]) + cid
    connect[1] = len(connect) - 2
    st.write(connect, len(connect))
    await st.readable(buf, 0)
    st.readinto(buf, 0)
    ping = bytearray(b"\xc0\x00")
    for i in range(W + N):
        if i == W:
            a = start()
        st.write(ping, 2)
        await st.readable(buf, 0)
        st.readinto(buf, 0)
    fig["sim bridge write+read"] = stop(a, N)
    st.close()


async def main():
    # A client: constructing one is measured exactly (no I/O, so nothing is pinned); connect() adds the
    # stream and the reader and ticker tasks.
    gc.collect()
    a = gc.mem_alloc()
    c = AsyncClient(config.BROKER_HOST, config.BROKER_PORT, client_id=config.CLIENT_ID, version=V, **LIMITS)
    gc.collect()
    fig["client"] = gc.mem_alloc() - a
    await settle()
    a = gc.mem_alloc()
    await c.connect()
    await settle()
    fig["connect"] = gc.mem_alloc() - a
    session_figures()
    await bridge_figure()
    topic = PREFIX + "p"  # nobody subscribes to it

    for q in (0, 1, 2):  # (loops inline: a helper coroutine would be counted too)
        for i in range(W + N):  # the first W warm up
            if i == W:
                a = start()
            while c.publish_nowait(topic, PAYLOAD, q) < 0:  # every slot taken: the reader frees them
                await asyncio.sleep_ms(1)  # not 0: this port's loop runs ready tasks without letting JS (I/O) in
            await c.flush()
        while c.session.flights.count:
            await asyncio.sleep_ms(1)
        fig["aio publish_nowait+flush q%d" % q] = stop(a, N)
        for i in range(W + N):
            if i == W:
                a = start()
            await c.publish(topic, PAYLOAD, q)
        fig["aio await publish q%d" % q] = stop(a, N)

    # Received messages: the test publishes W + N of them, one at a time, once told.
    count, marks = [0], [0]
    done = asyncio.Event()

    def on_msg(m):
        count[0] += 1
        if count[0] == W:
            marks[0] = start()
        elif count[0] == W + N:
            marks[0] = stop(marks[0], N)
            done.set()

    async def consume():
        async for m in c.messages():
            on_msg(m)

    await c.subscribe(PREFIX + "h", 2, handler=on_msg)
    await c.subscribe(PREFIX + "m", 2)
    consumer = asyncio.create_task(consume())
    for mode in ("h", "m"):
        for q in (0, 1, 2):
            count[0] = 0
            done.clear()
            print("RX", mode, q, W + N)
            await asyncio.wait_for(done.wait(), 30)
            fig["aio receive q%d (%s)" % (q, "handler" if mode == "h" else "messages()")] = marks[0]
    consumer.cancel()
    await c.disconnect()
    print("RESULT", json.dumps(fig))


asyncio.run(main())
