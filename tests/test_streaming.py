# Streamed messages (docs/streaming.md) on CPython against a real mosquitto: a subscription made with
# chunks=True receives messages far larger than its 1 KB receive buffer in chunks, at QoS 0/1/2, MQTT 3.1.1 and 5;
# a QoS 1/2 message is acknowledged only after its last chunk; a handler that raises closes the link and the
# message comes again, whole, on the resumed session. Arguments are checked at the door.
import hashlib
import os
import time

import pytest

import tinymqtt_port
from tinymqtt.client import Client
from tinymqtt.errors import LocalProtocolError

SMALL = dict(max_packet_size=1024, out_size=1024)


def pair(broker, name, v, **opts):
    """A receiver with 1 KB buffers and a sender whose buffers grow (CPython's default)."""
    rx = Client(broker.host, broker.port, client_id="st-rx-" + name, version=v, **dict(SMALL, **opts))
    tx = Client(broker.host, broker.port, client_id="st-tx-" + name, version=v)
    rx.connect()
    tx.connect()
    return rx, tx


class Collector:
    def __init__(self):
        self.parts, self.done, self.sizes = {}, [], []
        self.starts = 0  # chunks at offset 0: a message begun (again, after a cut)

    def __call__(self, msg, total, offset, chunk):
        assert isinstance(chunk, memoryview) and offset + len(chunk) <= total
        if offset == 0:  # the first chunk of a message (a cut one comes again from 0)
            self.parts[msg.topic] = bytearray()
            self.starts += 1
        buf = self.parts[msg.topic]
        assert len(buf) == offset
        buf += chunk
        self.sizes.append(len(chunk))
        if offset + len(chunk) == total:  # the last chunk
            self.done.append((msg.topic, msg.qos, bytes(buf)))


def wait(c, cond, secs=10):
    end = time.time() + secs
    while not cond() and time.time() < end:
        c.loop(0.05)
    return cond()


@pytest.mark.parametrize("v", [4, 5])
def test_messages_larger_than_the_buffer_arrive_in_chunks(broker, v):
    rx, tx = pair(broker, "a%d" % v, v, max_stream_size=1 << 20)
    got = Collector()
    rx.subscribe("st/a%d/#" % v, 2, handler=got, chunks=True)
    if v == 5:  # we announced room for the streamed size, not the buffer's
        assert rx.session.props is None and rx.session.max_stream_size == 1 << 20
    images = {q: os.urandom(100_000 + q) for q in range(3)}
    for q, data in images.items():
        tx.publish("st/a%d/%d" % (v, q), data, q)
        tx.loop(0.01)
    small = b"fits in one chunk"
    tx.publish("st/a%d/small" % v, small, 1)
    assert wait(rx, lambda: len(got.done) == 4) and wait(tx, lambda: not tx.session.flights.count)
    by_topic = {t: (q, d) for t, q, d in got.done}
    for q, data in images.items():
        assert by_topic["st/a%d/%d" % (v, q)] == (q, data)
    assert by_topic["st/a%d/small" % v] == (1, small)
    assert max(got.sizes) <= 1024 and len(rx.session.inbuf) == 1024  # never grew
    assert wait(rx, lambda: not rx.session._rx_pid)  # the QoS 2 flow ended (PUBREL, PUBCOMP)
    rx.disconnect()
    tx.disconnect()


@pytest.mark.parametrize("v", [4, 5])
def test_a_handler_that_raises_leaves_the_message_unacknowledged_and_it_comes_again(broker, v):
    name = "b%d" % v
    rx, tx = pair(broker, name, v, clean=False, max_stream_size=1 << 20, **({"session_expiry": 60} if v == 5 else {}))
    got = Collector()
    fail = [True]

    def handler(msg, total, offset, chunk):
        if fail[0] and offset > 30_000:
            fail[0] = False
            raise OSError(28, "flash full")
        got(msg, total, offset, chunk)

    lost = []
    rx.on_disconnect = lost.append
    rx.subscribe("st/%s" % name, 1, handler=handler, chunks=True)
    data = os.urandom(80_000)
    tx.publish("st/%s" % name, data, 1)
    assert wait(rx, lambda: lost)  # the link closed at the raise
    assert "flash full" in str(lost[0]) and not got.done
    rx.backoff_min_ms = 1
    assert wait(rx, lambda: got.done)  # resumed: the broker sent it again, from its start
    assert got.done == [("st/%s" % name, 1, data)]
    assert wait(tx, lambda: not tx.session.flights.count)  # and it was acknowledged (once)
    rx.loop(0.2)
    assert len(got.done) == 1
    rx.disconnect()
    tx.disconnect()


def test_oversize_skip_stays_for_subscriptions_without_chunks(broker):
    rx, tx = pair(broker, "c", 4)
    got, plain, events = Collector(), [], []
    rx.on_event = lambda ev, value, reason: events.append(ev)
    rx.subscribe("st/c/chunks", 1, handler=got, chunks=True)
    rx.subscribe("st/c/plain", 1, handler=lambda m: plain.append(bytes(m.payload)))
    tx.publish("st/c/plain", b"x" * 5000, 1)
    tx.publish("st/c/plain", b"small", 1)
    tx.publish("st/c/chunks", b"y" * 5000, 1)
    assert wait(rx, lambda: got.done and plain)
    assert plain == [b"small"] and got.done == [("st/c/chunks", 1, b"y" * 5000)] and 17 in events  # OVERSIZE
    rx.disconnect()
    tx.disconnect()


def test_chunks_arguments_are_checked_at_the_door(broker):
    c = Client(broker.host, broker.port, client_id="st-d", **SMALL)
    with pytest.raises(LocalProtocolError, match="chunks must be True"):
        c.subscribe("a", 1, handler=print, chunks=1)
    with pytest.raises(LocalProtocolError, match="needs a handler"):
        c.subscribe("a", 1, chunks=True)
    for bad in (-1, 1.5, "1", 1 << 28):
        with pytest.raises(LocalProtocolError, match="max_stream_size"):
            Client(broker.host, broker.port, max_stream_size=bad)
    with pytest.raises(LocalProtocolError, match="not with manual_ack"):
        Client(broker.host, broker.port, manual_ack=True).subscribe("a", 1, handler=print, chunks=True)
    assert not c.session.subs


# ---------------------------------------------------------------- real MicroPython: the heap a streamed receive needs

HEAP_APP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sim_apps", "stream_heap.py")
SIZES = (64 << 10, 256 << 10, 1 << 20)


def publish_images(broker, prefix, v):
    """The images, retained at QoS 1, published by CPython; returns size -> checksum as the board app sums it."""
    tx = Client(broker.host, broker.port, client_id="st-img-" + prefix.replace("/", "-"), version=v)
    tx.connect()
    sums = {}
    for size in SIZES:
        data = os.urandom(size)
        sums[size] = sum(data) & 0xFFFF
        tx.wait_for(tx.publish(prefix + str(size), data, 1, retain=True), 30)
    tx.disconnect()
    return sums


def stream_heap(broker, board, v, heap):
    import tools.sim
    prefix = "sh/%s/%d/" % (board, v)
    sums = publish_images(broker, prefix, v)
    env = dict(BROKER_HOST=broker.host, BROKER_PORT=broker.port, PREFIX=prefix, SIZES=list(SIZES), VERSION=v)
    p = tools.sim.run_app(HEAP_APP, env=env, board=board, heap=heap, timeout=120)
    res = tools.sim.results(p.stdout)
    assert p.returncode == 0 and len(res) == 1, "exit %d\n%s\n%s" % (p.returncode, p.stdout[-3000:], p.stderr[-3000:])
    res = res[0]
    assert res["connected_end"]
    for size in SIZES:
        r = res[str(size)]
        assert r["bytes"] == r["total"] == size and r["sum"] == sums[size], (size, r)
    n = res["count"]
    # allocation per chunk through the public API, automatic collection off: each chunk costs at most its view (a
    # memoryview, its size measured in the same interpreter), 0 B beyond it, over every chunk of the 1 MB image
    assert n["bytes"] == SIZES[-1] and n["steps"] >= 200, n
    assert n["step_max"] <= res["view"] and n["sum"] <= n["steps"] * res["view"], (n, res["view"])
    return res


def report_heap(label, v, heap, res):
    from tests.support.report import record
    record("MicroPython heap (%s, MQTT %s, -X heapsize=%s): streamed receive of 64 KB / 256 KB / 1 MB, most in use "
           "(B)" % (label, "3.1.1" if v == 4 else "5", heap),
           " / ".join(str(res[str(s)]["peak"]) for s in SIZES))
    n = res["count"]
    record("MicroPython heap (%s, MQTT %s): per chunk (B), mean / least / most over %d chunks" % (
        label, "3.1.1" if v == 4 else "5", n["steps"]),
        "%.1f / %d / %d (a memoryview: %d)" % (n["sum"] / n["steps"], n["step_min"], n["step_max"], res["view"]))


@pytest.mark.parametrize("v", [4, 5])
def test_streamed_receive_heap_is_flat_on_the_unix_port(broker, v):
    import tools.sim
    if not os.path.exists(tools.sim.MICROPYTHON):
        pytest.skip("no MicroPython unix port")
    res = stream_heap(broker, "unix", v, "160k")  # a heap smaller than the 256 KB image, let alone 1 MB
    report_heap("64-bit unix", v, "160k", res)


def test_streamed_receive_heap_is_flat_on_the_32_bit_unix_port(broker):
    from tests.support import unixport
    unixport.need32()
    res = stream_heap(broker, "unix32", 5, "96k")
    report_heap("32-bit unix", 5, "96k", res)


# ---------------------------------------------------------------- streamed publish

class Reads:
    """A file-like source that counts its reads and seeks (a file on a board's flash)."""

    def __init__(self, data, seekable=True):
        import io
        self.f = io.BytesIO(data)
        self.seeks = 0
        if seekable:
            self.seek = self._seek

    def readinto(self, b):
        return self.f.readinto(b)

    def _seek(self, pos):
        self.seeks += 1
        return self.f.seek(pos)


@pytest.mark.parametrize("v", [4, 5])
def test_publish_from_a_source_larger_than_the_send_buffer(broker, v):
    tx = Client(broker.host, broker.port, client_id="st-p%d" % v, version=v, **SMALL)
    rx = Client(broker.host, broker.port, client_id="st-pr%d" % v, version=v, max_stream_size=1 << 20, **SMALL)
    tx.connect()
    rx.connect()
    got = Collector()
    rx.subscribe("st/p%d/#" % v, 2, handler=got, chunks=True)
    data = {q: os.urandom(50_000 + q) for q in range(3)}
    for q in range(3):
        src = Reads(data[q])
        pid = tx.publish("st/p%d/%d" % (v, q), src, q, length=len(data[q]))
        assert len(tx.session.out) == 1024  # never grew: the payload went through `out` piece by piece
        if q:
            assert tx.wait_for(pid, 10) and src.seeks == 1
    assert wait(rx, lambda: len(got.done) == 3)
    assert sorted(got.done) == [("st/p%d/%d" % (v, q), q, data[q]) for q in range(3)]
    tx.disconnect()
    rx.disconnect()


def test_streamed_publish_arguments_are_checked_at_the_door(broker):
    c = Client(broker.host, broker.port, client_id="st-pd", **SMALL)
    c.connect()
    for bad in (-1, 1.5, "3", 1 << 28):
        with pytest.raises(LocalProtocolError, match="length"):
            c.publish("a", Reads(b"abc"), 1, length=bad)
    with pytest.raises(LocalProtocolError, match="readinto"):
        c.publish("a", b"abc", 1, length=3)
    with pytest.raises(LocalProtocolError, match="seek"):
        c.publish("a", Reads(b"abc", seekable=False), 1, length=3)
    c.publish("a", Reads(b"abc", seekable=False), 0, length=3)  # QoS 0 is never sent again: no seek needed
    assert not c.session.flights.count
    c.disconnect()


def test_a_streamed_publish_cut_midway_is_sent_again_from_the_start(broker):
    from tests.support.faultproxy import UP, Cut, FaultProxy, Plan, PUBLISH
    rx = Client(broker.host, broker.port, client_id="st-cut-rx", max_stream_size=1 << 20, **SMALL)
    rx.connect()
    got = Collector()
    rx.subscribe("st/cut", 1, handler=got, chunks=True)
    data = os.urandom(200_000)
    with FaultProxy(broker.host, broker.port) as px:
        px.plan = lambda number: Plan(Cut(UP, mid=PUBLISH, nth=1)) if number == 1 else None
        tx = Client(px.host, px.port, client_id="st-cut-tx", clean=False, session_expiry=60, backoff_min_ms=10, **SMALL)
        tx.connect()
        src = Reads(data)
        pid = tx.publish("st/cut", src, 1, length=len(data))  # the link is cut while the payload goes out
        assert tx.wait_for(pid, 10)
        assert len(px.cuts) == 1 and src.seeks == 2  # read again from its start on the resumed session
        tx.disconnect()
    assert wait(rx, lambda: got.done)
    rx.loop(0.3)
    assert got.done == [("st/cut", 1, data)]  # whole, once
    rx.disconnect()


async def aio_pair(broker, name, **tx_opts):
    """A connected asyncio (receiver, sender) at MQTT 5 with small buffers, the receiver taking st/NAME/# in chunks
    at QoS 2 into a Collector; and three payloads larger than the buffers, one per QoS."""
    from tinymqtt.aio import AsyncClient
    rx = AsyncClient(broker.host, broker.port, client_id="st-%s-rx" % name, version=5, max_stream_size=1 << 20,
                     **SMALL)
    tx = AsyncClient(broker.host, broker.port, client_id="st-%s-tx" % name, version=5, **dict(SMALL, **tx_opts))
    await rx.connect()
    await tx.connect()
    got = Collector()
    await rx.subscribe("st/%s/#" % name, 2, handler=got, chunks=True)
    return rx, tx, got, {q: os.urandom(60_000 + q) for q in range(3)}


async def test_the_asyncio_client_takes_chunks_and_publishes_from_a_source(broker):
    rx, tx, got, data = await aio_pair(broker, "aio")
    for q in range(3):
        tx.publish_nowait("st/aio/%d" % q, Reads(data[q]), q, length=len(data[q]))
        await tx.flush()
    import asyncio
    for _ in range(200):
        if len(got.done) == 3:
            break
        await asyncio.sleep(0.05)
    assert sorted(got.done) == [("st/aio/%d" % q, q, data[q]) for q in range(3)]
    await tx.disconnect()
    await rx.disconnect()


async def test_await_publish_streams_from_a_source_and_ends_with_the_flow(broker):
    # `await publish(topic, src, q, length=n)`: the payload goes through the 1 KB `out` piece by piece (it never
    # grows), the await ends once it is all written (QoS 0, wait=False) or its flow completed (QoS 1/2: the reason
    # code), and a source that ends short at the first piece raises ConnectionLost there, ending the connection.
    import asyncio
    from tinymqtt.errors import ConnectionLost
    rx, tx, got, data = await aio_pair(broker, "aw", reconnect=False)
    for q in range(3):
        src = Reads(data[q])
        r = await tx.publish("st/aw/%d" % q, src, q, length=len(data[q]))
        assert r == (0 if q else None) and src.f.tell() == len(data[q]) and len(tx.session.out) == 1024
        assert src.seeks == (1 if q else 0)
    src = Reads(data[0])
    assert await tx.publish("st/aw/nowait", src, 1, wait=False, length=len(data[0])) is None
    assert src.f.tell() == len(data[0])  # written whole before the await ended
    for _ in range(200):
        if len(got.done) == 4:
            break
        await asyncio.sleep(0.05)
    assert sorted(got.done) == sorted([("st/aw/%d" % q, q, data[q]) for q in range(3)] + [("st/aw/nowait", 1, data[0])])
    with pytest.raises(ConnectionLost) as e:
        await tx.publish("st/aw/short", Reads(b"x" * 100), 0, length=5000)
    assert "short" in str(e.value) and not tx.is_connected() and tx.last_error is e.value
    await tx.close()
    await rx.disconnect()


# ---------------------------------------------------------------- bad bytes from the network (sans-IO)

def connected_session(v=4):
    from tinymqtt.driver import new_session
    events = []
    s = new_session(lambda ev, value, reason: events.append(ev), version=v, client_id="x", max_packet_size=64,
                    max_stream_size=1000)
    s.connect(0)
    s.outlen = 0
    connack = b"\x20\x02\x00\x00" if v == 4 else b"\x20\x03\x00\x00\x00"
    s.inbuf[0:len(connack)] = connack
    s.received(len(connack), 0)
    s.outlen = 0
    got = Collector()
    s.subscribe([("t", 1)], handler=got, chunks=True)
    s.outlen = 0
    return s, got, events


def feed(s, data):
    """Feeds the bytes as a socket would, as much as inbuf takes at a time; returns what received() raised."""
    i = 0
    try:
        for _ in range(10_000):  # bounded: bad bytes must never make it loop
            k = min(len(s.inbuf) - s.inlen, len(data) - i)
            s.inbuf[s.inlen:s.inlen + k] = data[i:i + k]
            i += k
            while s.received(k, 0):
                s.outlen = 0
                k = 0
            s.outlen = 0
            if i == len(data):
                return None
        raise AssertionError("received() made no progress")
    except Exception as e:
        return e


def publish_bytes(topic, payload, qos=1, pid=7, props=False):
    t = topic.encode()
    body = len(t).to_bytes(2, "big") + t
    body += pid.to_bytes(2, "big") if qos else b""
    body += b"\x00" if props else b""  # MQTT 5: an empty property block
    body += payload
    n, rl = len(body), b""
    while True:
        d, n = n & 0x7F, n >> 7
        rl += bytes([d | (0x80 if n else 0)])
        if not n:
            break
    return bytes([0x30 | qos << 1]) + rl + body


@pytest.mark.parametrize("v", [4, 5])
def test_a_streamed_message_fed_piecewise_arrives_whole_and_bad_headers_end_the_link(v):
    from tinymqtt.errors import RemoteProtocolError
    s, got, _ = connected_session(v)
    data = os.urandom(900)
    assert feed(s, publish_bytes("t", data, props=v == 5)) is None and got.done == [("t", 1, data)]
    # a topic length past the Remaining Length: a protocol error, never a negative skip
    s, got, _ = connected_session(v)
    bad = bytearray(publish_bytes("t", b"x" * 200, props=v == 5))
    bad[3:5] = (5000).to_bytes(2, "big")
    e = feed(s, bytes(bad))
    assert isinstance(e, (RemoteProtocolError,)) and not got.done
    # a payload over max_stream_size is skipped as too large (OVERSIZE), the link goes on
    s, got, events = connected_session(v)
    assert feed(s, publish_bytes("t", b"y" * 2000, props=v == 5) + publish_bytes("t", b"small", pid=8, props=v == 5)) is None
    assert got.done == [("t", 1, b"small")] and 17 in events


# ---------------------------------------------------------------- real MicroPython: streamed publish from a file

@pytest.mark.parametrize("board", ["unix", "unix32"])
def test_streamed_publish_from_a_file_on_the_unix_ports(broker, board):
    """tools/bench/stream_app.py once (ROUNDS=1): the board publishes a 1 MB file at QoS 1 through its 2 KB send
    buffer with a 256 KB heap; a CPython subscriber gets every byte as the file holds them."""
    import tools.sim
    from tools.bench.stream import APP, raw_peers
    if board == "unix32":
        from tests.support import unixport
        unixport.need32()
    elif not os.path.exists(tools.sim.MICROPYTHON):
        pytest.skip("no MicroPython unix port")
    prefix = "sp/%s/%d/" % (board, os.getpid())
    n = 1 << 20
    tx = Client(broker.host, broker.port, client_id="st-sp-img-" + board)
    tx.connect()
    tx.wait_for(tx.publish(prefix + str(n), os.urandom(n), 1, retain=True), 30)
    tx.disconnect()
    rx = Client(broker.host, broker.port, client_id="st-sp-rx-" + board, max_stream_size=2 << 20, **SMALL)
    rx.connect()
    got = Collector()
    rx.subscribe(prefix + "up", 1, handler=got, chunks=True)
    sender, sink = raw_peers(n, 1)
    env = dict(BROKER_HOST=broker.host, BROKER_PORT=broker.port, PREFIX=prefix, RAW_SENDER=sender, RAW_SINK=sink,
               ROUNDS=1)
    p = tools.sim.run_app(APP, env=env, board=board, heap="256k", timeout=120)
    res = tools.sim.results(p.stdout)
    assert p.returncode == 0 and len(res) == 1, "exit %d\n%s\n%s" % (p.returncode, p.stdout[-3000:], p.stderr[-3000:])
    assert res[0]["publish_acked"] and res[0]["raw_received"] == n
    assert wait(rx, lambda: got.done)
    expected = bytearray(n)
    for i in range(n // 4096):  # the file the app wrote: 4 KB blocks, the first byte of each its number
        expected[i * 4096] = i & 255
    assert got.done == [(prefix + "up", 1, bytes(expected))]
    rx.disconnect()


@pytest.mark.parametrize("v", [4, 5])
def test_the_asyncio_client_streams_both_ways_on_the_unix_port(broker, v):
    """tests/sim_apps/stream_aio.py with a heap smaller than the 256 KB image it receives and the 256 KB file it
    publishes with `await publish(..., length=n)`."""
    import tools.sim
    if not os.path.exists(tools.sim.MICROPYTHON):
        pytest.skip("no MicroPython unix port")
    prefix = "sa/%d/%d/" % (v, os.getpid())
    image = os.urandom(256 << 10)
    tx = Client(broker.host, broker.port, client_id="st-sa-img-%d" % v)
    tx.connect()
    tx.wait_for(tx.publish(prefix + "image", image, 1, retain=True), 30)
    tx.disconnect()
    rx = Client(broker.host, broker.port, client_id="st-sa-rx-%d" % v, max_stream_size=1 << 20, **SMALL)
    rx.connect()
    got = Collector()
    rx.subscribe(prefix + "up", 1, handler=got, chunks=True)
    rx.subscribe(prefix + "up2", 1, handler=got, chunks=True)
    env = dict(BROKER_HOST=broker.host, BROKER_PORT=broker.port, PREFIX=prefix, VERSION=v)
    p = tools.sim.run_app(os.path.join(os.path.dirname(os.path.abspath(__file__)), "sim_apps", "stream_aio.py"),
                          env=env, board="unix", heap="192k", timeout=120)
    res = tools.sim.results(p.stdout)
    assert p.returncode == 0 and len(res) == 1, "exit %d\n%s\n%s" % (p.returncode, p.stdout[-3000:], p.stderr[-3000:])
    res = res[0]
    assert res["bytes"] == len(image) and res["sum"] == sum(image) & 0xFFFF and res["chunks"] > 64, res
    assert res["published"] == 100000 and res["awaited"] == 256 << 10 and res["reason"] == 0, res
    assert wait(rx, lambda: len(got.done) == 2)
    expected = bytearray(100000)
    for i in range(100):
        expected[i * 1000] = i & 255
    expected2 = bytearray(256 << 10)
    for i in range(256):
        expected2[i * 1024] = (i + 7) & 255
    assert got.done == [(prefix + "up", 1, bytes(expected)), (prefix + "up2", 1, bytes(expected2))]
    rx.disconnect()


def test_a_source_shorter_than_its_length_ends_the_connection(broker):
    from tinymqtt.errors import ConnectionLost
    c = Client(broker.host, broker.port, client_id="st-short", reconnect=False, **SMALL)
    c.connect()
    c.publish("st/short", Reads(b"x" * 5000), 0, length=9000)  # it ends while `out` is written: the link closes
    assert not c.transport and "short of its length" in str(c.last_error)
    c = Client(broker.host, broker.port, client_id="st-short2", reconnect=False, **SMALL)
    c.connect()
    with pytest.raises(ConnectionLost, match="short of its length"):  # it ends in the first fill: raised at the call
        c.publish("st/short", Reads(b"x" * 500), 0, length=900)
    assert not c.transport and "short of its length" in str(c.last_error)


# ---------------------------------------------------------------- QoS 2 cut mid-transfer: whole, exactly once

def _resume_opts(v):
    return dict(clean=False, backoff_min_ms=10, **({"session_expiry": 60} if v == 5 else {}))


def _cut_name(cut):
    return repr(cut).strip("<>").replace(" ", "-").replace("#", "")


def _cuts_down():
    from tests.support.faultproxy import DOWN, PUBLISH, PUBREC, PUBREL, UP, Cut
    return [Cut(DOWN, mid=PUBLISH),  # the message coming down is cut: it comes again, from offset 0
            Cut(UP, mid=PUBREC),  # its PUBREC is lost: the server sends it again (DUP), never delivered twice
            Cut(DOWN, before=PUBREL)]  # PUBREC arrived, PUBREL is lost: it comes after the resume, no delivery


def _cuts_up():
    from tests.support.faultproxy import DOWN, PUBLISH, PUBREC, PUBREL, UP, Cut
    return [Cut(UP, mid=PUBLISH),  # the payload going up is cut: read again from the source's start
            Cut(DOWN, before=PUBREC),  # the server has it whole, its PUBREC is lost: sent again (DUP), once
            Cut(UP, before=PUBREL)]  # PUBREC arrived, our PUBREL is lost: PUBREL again, the source not read


@pytest.mark.parametrize("v", [4, 5])
@pytest.mark.parametrize("cut", _cuts_down(), ids=_cut_name)
def test_a_streamed_qos2_message_cut_while_it_arrives_is_delivered_whole_once(broker, v, cut):
    from tests.support.faultproxy import FaultProxy, Plan, PUBLISH
    name = "q2r-%d-%s" % (v, _cut_name(cut))
    data = os.urandom(150_000)
    with FaultProxy(broker.host, broker.port) as px:
        px.plan = lambda number: Plan(cut) if number == 1 else None
        rx = Client(px.host, px.port, client_id="st-" + name, version=v, max_stream_size=1 << 20,
                    **dict(SMALL, **_resume_opts(v)))
        rx.connect()
        got = Collector()
        rx.subscribe("st/" + name, 2, handler=got, chunks=True)
        tx = Client(broker.host, broker.port, client_id="st-tx-" + name, version=v)
        tx.connect()
        assert tx.wait_for(tx.publish("st/" + name, data, 2), 10)  # the server has it (PUBCOMP)
        assert wait(rx, lambda: got.done and not rx.session._rx_pid and len(px.cuts) == 1)
        rx.loop(0.3)
        assert len(px.cuts) == 1 and px.accepted == 2, (px.cuts, px.accepted)  # cut once, resumed once
        assert got.done == [("st/" + name, 2, data)]  # whole, exactly once
        assert got.starts == (2 if cut.mid == PUBLISH else 1)  # begun again from offset 0 only when cut inside it
        rx.disconnect()
        tx.disconnect()


@pytest.mark.parametrize("v", [4, 5])
@pytest.mark.parametrize("cut", _cuts_up(), ids=_cut_name)
def test_a_streamed_qos2_publish_cut_midway_is_delivered_whole_once(broker, v, cut):
    from tests.support.faultproxy import FaultProxy, Plan, PUBREL
    name = "q2p-%d-%s" % (v, _cut_name(cut))
    rx = Client(broker.host, broker.port, client_id="st-rx-" + name, version=v, max_stream_size=1 << 20, **SMALL)
    rx.connect()
    got = Collector()
    rx.subscribe("st/" + name, 2, handler=got, chunks=True)
    data = os.urandom(150_000)
    with FaultProxy(broker.host, broker.port) as px:
        px.plan = lambda number: Plan(cut) if number == 1 else None
        tx = Client(px.host, px.port, client_id="st-" + name, version=v, **dict(SMALL, **_resume_opts(v)))
        tx.connect()
        src = Reads(data)
        assert tx.wait_for(tx.publish("st/" + name, src, 2, length=len(data)), 10)
        assert len(px.cuts) == 1 and px.accepted == 2, (px.cuts, px.accepted)
        # the source is read from its start each time the PUBLISH goes out: again after the resume unless the
        # server's PUBREC had come (then only PUBREL is sent again)
        assert src.seeks == (1 if cut.before == PUBREL else 2), src.seeks
        tx.disconnect()
    assert wait(rx, lambda: got.done)
    rx.loop(0.3)
    assert got.done == [("st/" + name, 2, data)] and got.starts == 1  # whole, exactly once
    rx.disconnect()


@pytest.mark.parametrize("board,v,heap", [("unix", 5, "160k"), ("unix", 4, "160k"), ("unix32", 5, "128k"),
                                          ("sim", 5, 160 * 1024)])
def test_a_streamed_qos2_message_cut_three_times_arrives_whole_once_on_the_unix_ports(broker, board, v, heap):
    """tests/sim_apps/stream_qos2.py on the unix ports and the WebAssembly build (the simulated board, its socket
    Node's, tools/sim/run.mjs): the board publishes a 192 KB file at QoS 2 to a topic it subscribed to in
    chunks, with the esp32's buffers and a heap smaller than the message. The proxy cuts its first link in the
    middle of the PUBLISH going up (sent again, from the file's start), its second in the middle of the PUBLISH
    coming down (sent again by the server, from offset 0), its third in the middle of the board's PUBREC for it
    (the server sends the PUBLISH again, DUP: answered with PUBREC, never delivered twice)."""
    import tools.sim
    from tests.support.faultproxy import DOWN, PUBLISH, PUBREC, UP, Cut, FaultProxy, Plan
    if board == "unix32":
        from tests.support import unixport
        unixport.need32()
    elif not os.path.exists(tools.sim.MICROPYTHON):
        pytest.skip("no MicroPython unix port")
    cuts = {1: Cut(UP, mid=PUBLISH), 2: Cut(DOWN, mid=PUBLISH), 3: Cut(UP, mid=PUBREC)}
    size = 192 << 10
    with FaultProxy(broker.host, broker.port) as px:
        px.plan = lambda number: Plan(cuts[number]) if number in cuts else None
        env = dict(BROKER_HOST=px.host, BROKER_PORT=px.port, PREFIX="sq2/%s/%d/%d" % (board, v, os.getpid()),
                   VERSION=v, SIZE=size, CLIENT_ID="st-q2-%s-%d-%d" % (board, v, os.getpid()))
        p = tools.sim.run_app(os.path.join(os.path.dirname(os.path.abspath(__file__)), "sim_apps", "stream_qos2.py"),
                              env=env, board=board, heap=heap, timeout=120)
        res = tools.sim.results(p.stdout)
        assert p.returncode == 0 and len(res) == 1, "exit %d\n%s\n%s" % (p.returncode, p.stdout[-3000:],
                                                                          p.stderr[-3000:])
        res = res[0]
        assert [c[2] for c in px.cuts] == [repr(cuts[k]) for k in (1, 2, 3)] and all(c[3] for c in px.cuts), px.cuts
    assert res["published"] and not res["pending"], res
    # whole (every byte checked at its offset) and exactly once; begun twice: the cut one, then the whole one
    assert res["done"] == 1 and res["bytes"] == size and res["bad"] == 0 and res["starts"] == 2, res
