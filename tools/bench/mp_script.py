# The code the bench runs under the real MicroPython 1.27 (the WebAssembly build, tests/support/mp_run.mjs),
# with lib/tinymqtt imported from .mpy files. It measures with gc.mem_alloc() (bytes allocated, the GC off
# while it counts) and time.ticks_us(), and prints one line per figure: BENCH {"k": key, "v": value}.
# tools/bench/mp.py prepends ITER (loop length), BOARDS ({name: Session options}) and PARTS (which of memory,
# codec, heap to run: heap runs alone, in a fresh interpreter, so it sees every import it pays for).
import asyncio
import gc
import json
import time


def out(k, v):
    print("BENCH " + json.dumps({"k": k, "v": v}))


def per_call(fn, n, arg):
    # Heap bytes per fn(arg) over n calls, after 20 warm-up calls (steady state: caches filled).
    i = 0
    while i < 20:
        fn(arg)
        i += 1
    gc.collect()
    gc.disable()
    before = gc.mem_alloc()
    i = 0
    while i < n:
        fn(arg)
        i += 1
    after = gc.mem_alloc()
    gc.enable()
    return (after - before) / n


def _loop_us(fn, n, arg):
    i = 0
    t = time.ticks_us()
    while i < n:
        fn(arg)
        i += 1
    return time.ticks_diff(time.ticks_us(), t)


def us_per_call(fn, n, arg):
    # The clock of this port ticks in milliseconds: n doubles until a loop lasts >= 100 ms; best of three loops.
    while _loop_us(fn, n, arg) < 100000:
        n *= 2
    return min(_loop_us(fn, n, arg), _loop_us(fn, n, arg), _loop_us(fn, n, arg)) / n


def memory():
    from benchcycles import PubCycle, RxCycle, Feed, connected
    n = ITER
    out("alloc.harness", per_call(Feed(RxCycle(connected(4, 0), 1, 0)).run, n, 0))
    for v, alias in ((4, 0), (5, 0), (5, 8)):
        for q in (0, 1, 2):
            s = connected(v, alias, max_inflight=8, **({"send_alias_maximum": alias} if v == 5 else {}))
            c = PubCycle(s, q)
            out("alloc.pub.v%d.q%d.alias%d" % (v, q, alias and 1), per_call(c.run, n, 0))
    for v, alias in ((4, 0), (5, 0), (5, 8)):
        for q in (0, 1, 2):
            s = connected(v, 0, receive_maximum=8, **({"topic_alias_maximum": alias} if v == 5 else {}))
            c = RxCycle(s, q, alias)
            out("alloc.rx.v%d.q%d.alias%d" % (v, q, alias and 1), per_call(c.run, n, 0))


def codec():
    from benchcycles import codec_cases
    for name, fn in codec_cases():
        out(name, us_per_call(fn, ITER, 0))


class FakeTransport:
    """What the blocking client writes goes nowhere; the first read brings the CONNACK."""

    def __init__(self, connack):
        self.connack = connack

    def write(self, buf, n):
        pass

    def readinto(self, buf, off, timeout_ms):
        c = self.connack
        if c is None:
            return 0
        self.connack = None
        buf[off:off + len(c)] = c
        return len(c)

    def close(self):
        pass


class FakeStream:
    def __init__(self, connack):
        self.connack = connack
        self.never = asyncio.Event()

    async def readable(self, buf, off):
        if self.connack is None:  # (after the CONNACK the scripted server says nothing more)
            await self.never.wait()

    def readinto(self, buf, off):
        c = self.connack
        if c is None:
            return 0
        self.connack = None
        buf[off:off + len(c)] = c
        return len(c)

    def write(self, buf, n):
        pass

    async def drain(self):
        pass

    def close(self):
        pass


class FakePort:
    def __init__(self, version):
        self.connack = b"\x20\x03\x00\x00\x00" if version == 5 else b"\x20\x02\x00\x00"

    def network_up(self, timeout_ms=0):
        return True

    def open(self, host, port, tls=None):
        return FakeTransport(self.connack)

    async def open_stream(self, host, port, tls=None):
        return FakeStream(self.connack)

    def ticks_ms(self):
        return time.ticks_ms()


async def heap():
    # (each gc.collect() follows an await: the WebAssembly build frees garbage only once it is back in JS)
    await asyncio.sleep_ms(1)
    gc.collect()
    base = gc.mem_alloc()
    import tinymqtt.client
    import tinymqtt.session5  # noqa: F401 (and what a version=5 client loads when it connects)
    import tinymqtt.aliases  # noqa: F401
    await asyncio.sleep_ms(1)
    gc.collect()
    out("heap.import.client", gc.mem_alloc() - base)
    import tinymqtt.aio  # noqa: F401 (what importing it costs is the figure)
    await asyncio.sleep_ms(1)
    gc.collect()
    out("heap.import.client+aio", gc.mem_alloc() - base)
    from tinymqtt.client import Client
    from tinymqtt.aio import AsyncClient
    for name in BOARDS:
        out("heap.aio.%s" % name, await connected(AsyncClient, BOARDS[name]))
        out("heap.client.%s" % name, await connected(Client, BOARDS[name]))


async def connected(cls, opts):
    # The heap a connected client holds. MicroPython's GC still sees what a coroutine's frame once held (stale
    # stack slots, and a finished coroutine the caller's slot keeps), so the client is dropped here before
    # returning, or it would outlive its figure and vanish during the next one; and an asyncio client closed
    # just before needs a few turns of the loop (its cancelled tasks end) before it is garbage.
    await asyncio.sleep_ms(50)
    gc.collect()
    before = gc.mem_alloc()
    c = cls("broker", 1883, port_impl=FakePort(5), reconnect=False, client_id="bench", version=5, **opts)
    aio = cls.__name__ == "AsyncClient"
    if aio:
        await c.connect()
    else:
        c.connect()
    await asyncio.sleep_ms(1)
    gc.collect()
    n = gc.mem_alloc() - before
    if aio:
        await c.close()
    c = None
    return n


async def main():
    for part in PARTS:
        r = globals()[part]()
        if r is not None:
            await r
    out("done", 1)


# This port has no asyncio.run (JS drives the loop) and its top-level coroutine cannot take a cancellation
# (asyncio.wait_for throws one): everything runs in a task the top level awaits, as tools/sim/run.mjs does.
await asyncio.create_task(main())
