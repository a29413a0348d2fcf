# Issue 31, points 1-9: bad input never poisons the client, and the defaults lose no data. Each test runs the public
# API of the real clients against a real mosquitto (or, where only a misbehaving server can show it, the scripted
# fake broker): a refused call raises at the call, naming the argument and its one fault with the reason code, and
# leaves the session exactly as it was; the next valid call works and the link stays up.
import asyncio
import os
import time

import pytest

import tinymqtt_port
from tests.support.fakebroker import FakeBroker
from tinymqtt import props as P
from tinymqtt.aio import AsyncClient
from tinymqtt.client import Client
from tinymqtt.errors import ConnectionLost, LocalProtocolError, RemoteProtocolError
from tinymqtt.packets import Packet, PUBLISH, PUBACK, PUBREC, PUBREL, PUBCOMP
from tinymqtt import session as _session

OVERSIZE = getattr(_session, "OVERSIZE", 17)  # (an event of on_event)

V311, V5 = 4, 5
VERSIONS = [pytest.param(V311, id="v3.1.1"), pytest.param(V5, id="v5")]


def uid(tag):
    return "bad-%s-%d-%d" % (tag, os.getpid(), time.monotonic_ns() % 10**9)


def state(s):
    """What a refused call must leave as it was: everything queued, sent or remembered by the session."""
    f = s.flights
    return (s.state, s.outlen, bytes(s.out[:s.outlen]), s.inlen, f.count, f.queued, f.head, bytes(f.state),
            list(f.pid), list(f.topic), dict(s.subs), list(s._resub_todo), set(s._rx_pid),
            list(getattr(s, "_handlers", ())), f._next_pid)


def refused(call, reason, *words):
    """call() raises LocalProtocolError with reason, its message holding every one of words and no " or " list
    of faults; returns the message."""
    with pytest.raises(LocalProtocolError) as e:
        call()
    assert e.value.reason == reason, (e.value.reason, e.value.msg)
    for w in words:
        assert w in e.value.msg, (w, e.value.msg)
    return e.value.msg


class Counter:
    """A subscriber (the blocking client, 3.1.1) counting what arrives on its topics."""

    def __init__(self, broker, topic, qos=2):
        self.got = []
        self.c = Client(broker.host, broker.port, client_id=uid("sub"), version=V311, port_impl=tinymqtt_port)
        self.c.on_message = lambda m: self.got.append((m.topic, bytes(m.payload), m.qos))
        self.c.connect()
        self.c.subscribe(topic, qos)

    def wait(self, n, *others, timeout=5):
        """What arrived once n messages did (or timeout), looping the other (publishing) clients meanwhile."""
        end = time.monotonic() + timeout
        while len(self.got) < n and time.monotonic() < end:
            self.c.loop(0.02)
            for o in others:
                o.loop(0.02)
        return self.got

    def close(self):
        self.c.disconnect()


def blocking(broker, version, **kw):
    c = Client(broker.host, broker.port, client_id=uid("c"), version=version, port_impl=tinymqtt_port, **kw)
    c.drops = []
    c.on_disconnect = c.drops.append
    c.connect()
    return c


# ------------------------------------------------------------------ 1. a payload of the wrong type

@pytest.mark.parametrize("version", VERSIONS)
def test_1_payload_of_the_wrong_type_is_refused_and_the_client_goes_on(broker, version):
    topic = uid("t1")
    sub = Counter(broker, topic)
    c = blocking(broker, version)
    try:
        for payload in ({"a": 1}, 5, 1.5, None, [1, 2]):
            for qos in (0, 1, 2):
                before = state(c.session)
                msg = refused(lambda: c.publish(topic, payload, qos), 0x82, "payload", type(payload).__name__)
                assert " or " not in msg.split("must be")[0]
                assert state(c.session) == before
        c.publish(topic, "h\u00e9", 1)  # a str is sent as UTF-8
        c.publish(topic, bytearray(b"ok"), 2)
        assert sub.wait(2, c) == [(topic, "h\u00e9".encode(), 1), (topic, b"ok", 2)]
        c.loop(0.2)
        assert c.is_connected() and not c.drops and not c.session.flights.count
    finally:
        c.disconnect()
        sub.close()


async def test_1_asyncio_payload_of_the_wrong_type(broker):
    topic = uid("t1a")
    c = AsyncClient(broker.host, broker.port, client_id=uid("a"), port_impl=tinymqtt_port)
    await c.connect()
    try:
        before = state(c.session)
        refused(lambda: c.publish(topic, {"a": 1}, qos=1), 0x82, "payload", "dict")
        refused(lambda: c.publish_nowait(topic, 7, qos=0), 0x82, "payload", "int")
        assert state(c.session) == before
        assert await c.publish(topic, b"fine", qos=1) in (0, 0x10)
        assert c.is_connected()
    finally:
        await c.disconnect()


# ------------------------------------------------------------------ 2. subscribe with QoS 3

@pytest.mark.parametrize("version", VERSIONS)
def test_2_subscribe_qos_3_is_refused_and_never_replayed(broker, version):
    topic = uid("t2")
    c = blocking(broker, version)
    try:
        for qos in (3, -1, 1.0, "1", None):
            before = state(c.session)
            msg = refused(lambda: c.subscribe(topic, qos), 0x9B, "qos", "0, 1 or 2")
            assert "server" not in msg
            assert state(c.session) == before
        assert c.subscribe(topic, 1) == [1]
        c.publish(topic, b"x", 1)
        got = []
        c.on_message = lambda m: got.append(bytes(m.payload))
        end = time.monotonic() + 3
        while not got and time.monotonic() < end:
            c.loop(0.05)
        assert got == [b"x"] and not c.drops and list(c.session.subs) == [topic]
    finally:
        c.disconnect()


# ------------------------------------------------------------------ 3. unsubscribe with an invalid filter

@pytest.mark.parametrize("version", VERSIONS)
def test_3_unsubscribe_with_an_invalid_filter_is_refused(broker, version):
    topic = uid("t3")
    c = blocking(broker, version)
    try:
        c.subscribe(topic + "/#", 1)
        for bad in ("a/#/b", "", "a+", None, []):
            before = state(c.session)
            refused(lambda: c.unsubscribe(bad), 0x8F)
            assert state(c.session) == before
        refused(lambda: c.unsubscribe([topic + "/#", "x/#/y"]), 0x8F, "x/#/y")
        assert list(c.session.subs) == [topic + "/#"]  # not forgotten by the refused call
        c.unsubscribe(topic + "/#")
        c.loop(0.2)
        assert c.is_connected() and not c.drops and not c.session.subs
    finally:
        c.disconnect()


# ------------------------------------------------------------------ 4. the will

@pytest.mark.parametrize("will,reason,words", [
    (("a/#", b"x", 0, False), 0x90, ("will topic", "wildcard")),
    (("", b"x", 0, False), 0x90, ("will topic", "empty")),
    (Packet(PUBLISH, topic="a/+", payload=b"x"), 0x90, ("will topic",)),
    (("a", {"x": 1}, 0, False), 0x82, ("will payload", "dict")),
    (("a", b"x", 3, False), 0x9B, ("will qos", "0, 1 or 2")),
    (("a", b"x", 1, "yes"), 0x82, ("will retain",)),
    (("a", b"x", 1), 0x82, ("will must be",)),
], ids=["wildcard", "empty", "packet", "payload", "qos", "retain", "3-tuple"])
@pytest.mark.parametrize("version", VERSIONS)
def test_4_an_invalid_will_is_refused_at_construction(broker, version, will, reason, words):
    refused(lambda: Client(broker.host, broker.port, version=version, will=will), reason, *words)


@pytest.mark.parametrize("version", VERSIONS)
def test_4_will_as_a_tuple_is_published(broker, version):
    topic = uid("t4")
    sub = Counter(broker, topic)
    props = {P.MESSAGE_EXPIRY_INTERVAL: 60} if version == V5 else None
    will = (topic, "gone", 1, False) + ((props,) if props else ())
    c = Client(broker.host, broker.port, client_id=uid("w"), version=version, will=will, keepalive=1,
               port_impl=tinymqtt_port)
    c.connect()
    c.transport.close()  # dies without DISCONNECT: the server publishes the will
    c.transport = None
    assert sub.wait(1, timeout=6) == [(topic, b"gone", 1)]
    sub.close()


# ------------------------------------------------------------------ 5. a message larger than our Maximum Packet Size

def _oversize_run(broker, version, qos, client):
    topic = uid("t5")
    pub = Client(broker.host, broker.port, client_id=uid("p"), version=V311, port_impl=tinymqtt_port)
    pub.connect()
    pub.publish(topic, b"R" * 3000, qos, retain=True)  # a 3 KB retained message: mqtt311's buffers take 2048
    pub.loop(0.2)
    return pub, topic


@pytest.mark.parametrize("qos", [0, 1, 2])
def test_5_oversize_retained_message_on_311_is_skipped_acked_and_reported_once(broker, qos):
    pub, topic = _oversize_run(broker, V311, qos, "blocking")
    got, events = [], []
    c = Client(broker.host, broker.port, client_id=uid("s"), version=V311, clean=False, max_packet_size=2048,
               out_size=1024, port_impl=tinymqtt_port, backoff_min_ms=50)
    c.drops = []
    c.on_disconnect = c.drops.append
    c.on_message = lambda m: got.append((bytes(m.payload), m.qos))
    c.on_event = lambda ev, v, r: events.append((v.reason, str(v))) if ev == OVERSIZE else None
    try:
        c.connect()
        c.subscribe(topic, 2)
        pub.publish(topic, b"small", qos)
        end = time.monotonic() + 3
        while not got and time.monotonic() < end:
            c.loop(0.02)
            pub.loop(0.02)
        end = time.monotonic() + 3
        while c.session._rx_pid and time.monotonic() < end:  # QoS 2: until PUBREL came and PUBCOMP went
            c.loop(0.05)
        assert got == [(b"small", qos)]
        assert len(events) == 1 and events[0][0] == 0x95 and "3" in events[0][1] and "2048" in events[0][1]
        assert isinstance(c.last_error, RemoteProtocolError) and c.last_error.reason == 0x95
        assert not c.drops and c.is_connected()
        assert not c.session._rx_pid  # QoS 2: PUBCOMP went on its PUBREL
        c.disconnect()
        # acknowledged: the broker does not send it again to the kept session
        c2 = Client(broker.host, broker.port, client_id=c.session.client_id, version=V311, clean=False,
                    max_packet_size=2048, port_impl=tinymqtt_port)
        seen = []
        c2.on_event = lambda ev, v, r: seen.append(ev)
        c2.on_message = lambda m: seen.append(bytes(m.payload))
        c2.connect()
        c2.loop(0.5)
        assert OVERSIZE not in seen and not [s for s in seen if isinstance(s, bytes)]
        c2.disconnect()
    finally:
        pub.publish(topic, b"", 0, retain=True)
        pub.disconnect()


async def test_5_asyncio_oversize_retained_message_on_311(broker):
    pub, topic = _oversize_run(broker, V311, 1, "aio")
    c = AsyncClient(broker.host, broker.port, client_id=uid("as"), version=V311, max_packet_size=2048,
                    port_impl=tinymqtt_port)
    events = []
    c.on_event = lambda ev, v, r: events.append(v) if ev == OVERSIZE else None
    try:
        await c.connect()
        await c.subscribe(topic, 1)
        pub.publish(topic, b"small", 1)
        pub.loop(0.1)
        m = await asyncio.wait_for(c.messages().__anext__(), 5)
        assert bytes(m.payload) == b"small"
        assert len(events) == 1 and c.last_error is events[0] and c.is_connected()
    finally:
        await c.disconnect()
        pub.publish(topic, b"", 0, retain=True)
        pub.disconnect()


@pytest.mark.parametrize("qos", [1, 2])
def test_5_oversize_on_v5_from_a_server_that_ignores_our_maximum(qos):
    # mosquitto honours the Maximum Packet Size we announce in MQTT 5; a server that does not is skipped the same
    body = b"\x00\x01t" + b"\x00\x07" + b"\x00" + b"B" * 2994  # topic "t", packet id 7, no properties: 3000 bytes
    pkt = bytes([0x30 | qos << 1, 0x80 | 3000 & 0x7F, 3000 >> 7]) + body

    def server(fb):
        fb.handshake()
        fb.send_raw(pkt[:7])  # its header first: the packet id is read from the first chunk
        time.sleep(0.05)
        fb.send_raw(pkt[7:2000])
        fb.send_raw(pkt[2000:])
        a = fb.expect(PUBACK if qos == 1 else PUBREC, pid=7)
        if qos == 2:
            fb.send(Packet(PUBREL, pid=7))
            fb.expect(PUBCOMP, pid=7)
        fb.send(Packet(PUBLISH, topic="t", payload=b"next", qos=0))
        assert a

    fb = FakeBroker(V5)
    c = Client("127.0.0.1", fb.port, version=V5, client_id="o5", max_packet_size=2048, port_impl=tinymqtt_port)
    got, events, drops = [], [], []
    c.on_message = lambda m: got.append(bytes(m.payload))
    c.on_event = lambda ev, v, r: events.append(v) if ev == OVERSIZE else None
    c.on_disconnect = drops.append
    fb.start(server)
    try:
        c.connect()
        fb.run(c, until=lambda: got)
        assert got == [b"next"] and len(events) == 1 and not drops and c.session.inlen == 0
    finally:
        fb.stop(c)


# ------------------------------------------------------------------ 6. CPython defaults carry what the broker carries

@pytest.mark.parametrize("version", VERSIONS)
def test_6_default_options_carry_a_100kb_message_both_ways(broker, version):
    topic = uid("t6")
    payload = bytes(range(256)) * 400  # 102,400 bytes
    c = blocking(broker, version)
    got = []
    c.on_message = lambda m: got.append(bytes(m.payload))
    try:
        assert len(c.session.inbuf) == 4096 and len(c.session.out) == 4096  # they start small
        c.subscribe(topic, 1)
        c.publish(topic, payload, 1)
        end = time.monotonic() + 5
        while not got and time.monotonic() < end:
            c.loop(0.05)
        assert got == [payload] and not c.drops and c.is_connected()
    finally:
        c.disconnect()


async def test_6_asyncio_default_options_carry_a_100kb_message(broker):
    topic = uid("t6a")
    payload = b"z" * 100000
    c = AsyncClient(broker.host, broker.port, client_id=uid("a6"), port_impl=tinymqtt_port)
    await c.connect()
    try:
        await c.subscribe(topic, 1)
        assert await c.publish(topic, payload, qos=1) in (0, 0x10)
        m = await asyncio.wait_for(c.messages().__anext__(), 5)
        assert bytes(m.payload) == payload
    finally:
        await c.disconnect()


# ------------------------------------------------------------------ 7. asyncio publish without a connection

async def test_7_asyncio_publish_before_connect_and_after_disconnect_raises(broker):
    c = AsyncClient(broker.host, broker.port, client_id=uid("a7"), port_impl=tinymqtt_port)
    with pytest.raises(ConnectionLost):
        await asyncio.wait_for(c.publish("t7", b"x", qos=1), 2)
    assert not c.session.flights.count
    await c.connect()
    await c.publish("t7", b"x", qos=1)
    await c.disconnect()
    for qos in (0, 1):
        with pytest.raises(ConnectionLost):
            await asyncio.wait_for(c.publish("t7", b"x", qos=qos), 2)
    b = Client(broker.host, broker.port, client_id=uid("b7"), port_impl=tinymqtt_port)
    b.connect()
    b.disconnect()
    with pytest.raises(ConnectionLost):  # the blocking client, for comparison
        b.publish("t7", b"x", 1)


# ------------------------------------------------------------------ 8. errors name the argument and the one fault

def test_8_errors_name_the_argument_and_the_one_fault():
    c = Client(version=V5, port_impl=tinymqtt_port)
    for topic, word in (("", "empty"), ("a/+", "wildcard"), ("a\x00", "U+0000"), (5, "int")):
        msg = refused(lambda: c.publish(topic, b"x"), 0x90, "topic", word)
        assert " or over" not in msg and "empty, not str" not in msg
    msg = refused(lambda: c.publish("t", b"x", 3), 0x9B, "qos", "0, 1 or 2")
    assert "server" not in msg
    refused(lambda: c.subscribe("a/b+", 1), 0x8F, "filter", "'+'")
    small = Client(version=V311, max_packet_size=4096, port_impl=tinymqtt_port)
    msg = refused(lambda: small.publish("t", b"x" * 100000, 1), 0x95, "payload", "out_size")
    assert "server" not in msg


def test_8_the_servers_limits_are_named_as_the_servers():
    def server(fb):
        fb.handshake(props={P.MAXIMUM_QOS: 1, P.RETAIN_AVAILABLE: 0, P.MAXIMUM_PACKET_SIZE: 100})
        fb.expect_nothing(0.2)

    fb = FakeBroker(V5)
    c = Client("127.0.0.1", fb.port, version=V5, client_id="l8", port_impl=tinymqtt_port)
    fb.start(server)
    try:
        c.connect()
        refused(lambda: c.publish("t", b"x", 2), 0x9B, "server's Maximum QoS is 1")
        msg = refused(lambda: c.publish("t", b"x", 3), 0x9B, "0, 1 or 2")
        assert "server" not in msg
        refused(lambda: c.publish("t", b"x", 1, retain=True), 0x9A, "retain", "server")
        refused(lambda: c.publish("t", b"x" * 200, 1), 0x95, "server's Maximum Packet Size 100")
    finally:
        fb.stop(c)


# ------------------------------------------------------------------ 9. construction

def test_9_callbacks_as_constructor_arguments(broker):
    topic = uid("t9")
    seen = []
    c = Client(broker.host, broker.port, client_id=uid("c9"), port_impl=tinymqtt_port,
               on_connect=lambda p: seen.append("connect"), on_message=lambda m: seen.append(bytes(m.payload)),
               on_disconnect=lambda e: seen.append(("disconnect", e)),
               on_event=lambda ev, v, r: seen.append(ev) if ev == PUBACK else None)
    c.connect()
    c.subscribe(topic, 1)
    c.publish(topic, b"m", 1)
    end = time.monotonic() + 3
    while b"m" not in seen and time.monotonic() < end:
        c.loop(0.05)
    c.loop(0.1)
    c.disconnect()
    assert seen == ["connect", PUBACK, b"m", ("disconnect", None)] or seen == ["connect", b"m", PUBACK,
                                                                              ("disconnect", None)], seen


async def test_9_asyncio_callbacks_as_constructor_arguments(broker):
    seen = []
    c = AsyncClient(broker.host, broker.port, client_id=uid("a9"), port_impl=tinymqtt_port,
                    on_connect=lambda p: seen.append("connect"), on_disconnect=lambda e: seen.append("disconnect"))
    await c.connect()
    await c.disconnect()
    assert seen == ["connect", "disconnect"]


def test_9_keepalive_beside_the_deployed_session_options(broker):
    from tools import boards
    from tools.deploy import session_for
    for board, profile in (("esp32", None), ("esp32", "mqtt311"), ("linux", None)):
        session = session_for(boards.get(board, profile=profile))
        c = Client(broker.host, broker.port, client_id=uid("k9"), keepalive=10, port_impl=tinymqtt_port, **session)
        assert c.session.keepalive == 10 and len(c.session.inbuf) == session["max_packet_size"]
        c.connect()
        c.disconnect()


def test_9_version_defaults_to_the_highest_the_build_has():
    assert Client(port_impl=tinymqtt_port).session.version == 5
    assert AsyncClient(port_impl=tinymqtt_port).session.version == 5


def test_9_version_defaults_to_4_in_the_mqtt311_build(tmp_path):
    from tests.support import unixport
    if not unixport.available():
        pytest.skip("needs .venv/bin/micropython")
    app = tmp_path / "app.py"
    app.write_text("from tinymqtt.client import Client\nprint('RESULT', Client().session.version)\n")
    rc, out, _ = unixport.run(str(app), "esp32-mqtt311", timeout=60)
    assert rc == 0 and "RESULT 4" in out, out


def test_a_subscribe_refused_for_want_of_room_in_out_records_nothing():
    # batch=True may leave packets in `out`: a SUBSCRIBE that does not fit beside them is refused (0x97) before a
    # packet id is lent or the subscription recorded, and goes once `out` was written.
    s = _session.Session(client_id="x", max_packet_size=256, out_size=64)
    s.connect(0)
    s.outlen = 0  # (the driver wrote the CONNECT)
    s.inbuf[:4] = b"\x20\x02\x00\x00"  # CONNACK
    s.received(4, 0)
    s.outlen = 40  # 40 bytes not yet written
    for call in (lambda: s.subscribe([("a/" + "b" * 30, 1)]), lambda: s.unsubscribe(["c/" + "d" * 30])):
        try:
            call()
            raise AssertionError("not refused")
        except LocalProtocolError as e:
            assert e.reason == 0x97, e
    assert s.flights.count == 0 and not s.subs and s.outlen == 40
    s.outlen = 0
    assert s.subscribe([("a/" + "b" * 30, 1)]) == 1 and list(s.subs) == ["a/" + "b" * 30]
