# Hostile servers: the real blocking (and asyncio) client against tests/support/fakebroker.py sending every kind of
# malformed or unexpected packet that tests/test_fake_broker.py does not already cover, table-driven: reserved bits
# and flags, bad and non-minimal lengths, Remaining Lengths of 256 MB (never allocated: tracemalloc), oversize,
# unknown, misplaced and duplicate properties, bad property values and reason codes, packets in the wrong direction
# or before CONNACK, acks that do not fit the flow, topic aliases out of range, bad topics, and packets cut short
# by a close. For each: the client never raises anything but its own errors to the application; it closes that
# connection with the right v5 reason code (3.x: just closes); it reconnects by itself; and its session state is
# consistent: the QoS 1 and QoS 2 messages it had in flight are delivered after the reconnect.
import asyncio
import struct
import threading
import time
import tracemalloc

import pytest

import tinymqtt_port
from tests.support import report
from tests.support.fakebroker import FakeBroker
from tinymqtt import props as P
from tinymqtt.aio import AsyncClient
from tinymqtt.client import Client
from tinymqtt.errors import MQTTError, ConnectionLost, LocalProtocolError, RemoteProtocolError
from tinymqtt.packets import (Packet, CONNECT, CONNACK, PUBLISH, PUBACK, PUBREC, PUBREL, PUBCOMP, SUBSCRIBE, SUBACK,
                              UNSUBSCRIBE, UNSUBACK, DISCONNECT)

V311, V5 = 4, 5
BOTH, ONLY5, ONLY4 = (V5, V311), (V5,), (V311,)
PERSIST = {V5: dict(session_expiry=60), V311: dict(clean=False)}


# ---------------------------------------------------------------------------------------- raw packet builders

def vbi(n):
    out = bytearray()
    while True:
        d, n = n & 0x7F, n >> 7
        out.append(d | (0x80 if n else 0))
        if not n:
            return bytes(out)


def pkt(first, body):
    return bytes([first]) + vbi(len(body)) + body


def s16(b):
    return struct.pack(">H", len(b)) + b


def u16(n):
    return struct.pack(">H", n)


def pub(v, topic=b"t", payload=b"x", qos=0, pid=1, props=b"", flags=None):
    """A PUBLISH exactly as given: no validation (props: the raw property bytes, v5 only)."""
    first = 0x30 | (qos << 1) if flags is None else 0x30 | flags
    body = s16(topic) + (u16(pid) if (first >> 1) & 3 else b"")
    if v == V5:
        body += vbi(len(props)) + props
    return pkt(first, body + payload)


def ack(t, pid, v=V311, reason=None, props=None, flags=None):
    body = u16(pid)
    if v == V5 and (reason is not None or props is not None):
        body += bytes([reason or 0])
        if props is not None:
            body += vbi(len(props)) + props
    return pkt((t << 4) | ((2 if t == PUBREL else 0) if flags is None else flags), body)


def connack(v, flags=0, code=0, props=b""):
    return pkt(0x20, bytes([flags, code]) + (vbi(len(props)) + props if v == V5 else b""))


def prop_str(pid, s):
    return bytes([pid]) + s16(s)


# ---------------------------------------------------------------------------------------- the table
# Each case: (name, versions, phase, raw, outcome, reason, client options).
#   phase "connected": the client has a QoS 1 (pid a) and a QoS 2 (pid b) message in flight when raw arrives;
#   phase "connecting": raw answers CONNECT instead of a CONNACK (the same two messages wait in the queue).
#   raw: bytes, or fn(version, a, b) -> bytes. A raw starting with b"\x00SPLIT" is sent one byte per write.
#   outcome "close": the client closes the connection with DISCONNECT(reason) in v5 (3.x: just closes) and
#   reports RemoteProtocolError(reason); "lost": the server closes after raw, the client reports ConnectionLost;
#   "ignored": the connection carries on (raw is counted as unsolicited where that applies).
SPLIT = b"\x00SPLIT"
H = 0x30  # PUBLISH QoS 0

CASES = [
    # --- reserved bits and fixed header flags
    ("PUBREL flags 0000", BOTH, "connected", lambda v, a, b: ack(PUBREL, b, v, flags=0), "close", 0x81, {}),
    ("PUBACK flags 0001", BOTH, "connected", lambda v, a, b: ack(PUBACK, a, v, flags=1), "close", 0x81, {}),
    ("SUBACK flags 0010", BOTH, "connected", pkt(0x92, u16(1) + b"\x00"), "close", 0x81, {}),
    ("UNSUBACK flags 1000", BOTH, "connected", pkt(0xB8, u16(1)), "close", 0x81, {}),
    ("PINGRESP flags 1000", BOTH, "connected", b"\xD8\x00", "close", 0x81, {}),
    ("DISCONNECT flags 0001", ONLY5, "connected", b"\xE1\x00", "close", 0x81, {}),
    ("PUBLISH with DUP on QoS 0", BOTH, "connected", lambda v, a, b: pub(v, flags=0x08), "close", 0x81, {}),
    ("packet type 0", BOTH, "connected", b"\x00\x00", "close", 0x81, {}),
    ("AUTH in 3.1.1", ONLY4, "connected", b"\xF0\x00", "close", 0x81, {}),
    ("CONNACK reserved flag bits", BOTH, "connecting", lambda v, a, b: connack(v, flags=0x02), "close", 0x81, {}),
    # --- lengths
    ("PUBACK Remaining Length 0", BOTH, "connected", b"\x40\x00", "close", 0x81, {}),
    ("PUBACK Remaining Length 1", BOTH, "connected", b"\x40\x01\x00", "close", 0x81, {}),
    ("3.1.1 PUBACK with a reason byte", ONLY4, "connected", lambda v, a, b: pkt(0x40, u16(a) + b"\x00"), "close",
     0x81, {}),
    ("PINGRESP with a body", BOTH, "connected", b"\xD0\x01\x00", "close", 0x81, {}),
    ("Remaining Length in non-minimal form", BOTH, "connected", b"\xD0\x80\x00", "close", 0x81, {}),
    ("PUBLISH topic length past the end", BOTH, "connected", pkt(H, u16(9) + b"ab"), "close", 0x81, {}),
    ("PUBLISH QoS 1 cut inside its packet id", BOTH, "connected", pkt(0x32, s16(b"t") + b"\x00"), "close", 0x81, {}),
    ("SUBACK without reason codes", BOTH, "connected", lambda v, a, b: pkt(0x90, u16(7) + (b"\x00" if v == V5 else b"")),
     "close", 0x82, {}),
    ("CONNACK too short", BOTH, "connecting", b"\x20\x01\x00", "close", 0x81, {}),
    ("one byte over our Maximum Packet Size: a message skipped unread", BOTH, "connected",
     b"\x30" + vbi(4094) + s16(b"t") + b"x" * 4091, "skipped", 0, {}),
    ("5-byte Remaining Length, one byte per write", BOTH, "connected", SPLIT + b"\x40\x80\x80\x80\x80\x01", "close",
     0x81, {}),
    ("256 MB Remaining Length on a SUBACK, one byte per write", BOTH, "connected", SPLIT + b"\x90\xff\xff\xff\x7f",
     "close", 0x95, {}),
    ("256 MB Remaining Length instead of CONNACK", BOTH, "connecting", b"\x20\xff\xff\xff\x7f", "close", 0x95, {}),
    ("256 MB property length in a PUBACK", ONLY5, "connected",
     lambda v, a, b: pkt(0x40, u16(a) + b"\x00\xff\xff\xff\x7f"), "close", 0x81, {}),
    ("property length past the end", ONLY5, "connected", lambda v, a, b: pkt(0x40, u16(a) + b"\x00\x05"), "close",
     0x81, {}),
    ("User Property name past the end", ONLY5, "connected",
     lambda v, a, b: ack(PUBACK, a, v, 0, b"\x26\x00\xff\x61\x00\x01"), "close", 0x81, {}),
    ("Reason String of 65535 bytes (over our 4096)", ONLY5, "connected",
     lambda v, a, b: b"\x40\xa3\x80\x04" + u16(a) + b"\x00" + vbi(65538) + b"\x1f\xff\xff", "close", 0x95, {}),
    # --- properties
    ("unknown property 0x7F", ONLY5, "connected", lambda v, a, b: ack(PUBACK, a, v, 0, b"\x7f\x00"), "close", 0x81, {}),
    ("property id as a 2-byte VBI", ONLY5, "connected", lambda v, a, b: ack(PUBACK, a, v, 0, b"\x80\x01\x00"), "close",
     0x81, {}),
    ("Topic Alias in a PUBACK", ONLY5, "connected", lambda v, a, b: ack(PUBACK, a, v, 0, b"\x23\x00\x01"), "close",
     0x81, {}),
    ("Maximum QoS in a PUBLISH", ONLY5, "connected", lambda v, a, b: pub(v, props=b"\x24\x01"), "close", 0x81, {}),
    ("Topic Alias in CONNACK", ONLY5, "connecting", lambda v, a, b: connack(v, props=b"\x23\x00\x01"), "close", 0x81,
     {}),
    ("duplicate Reason String in a PUBACK", ONLY5, "connected",
     lambda v, a, b: ack(PUBACK, a, v, 0, prop_str(0x1F, b"a") + prop_str(0x1F, b"b")), "close", 0x82, {}),
    ("duplicate Topic Alias in a PUBLISH", ONLY5, "connected",
     lambda v, a, b: pub(v, props=b"\x23\x00\x01\x23\x00\x01"), "close", 0x82, dict(topic_alias_maximum=4)),
    ("duplicate Receive Maximum in CONNACK", ONLY5, "connecting",
     lambda v, a, b: connack(v, props=b"\x21\x00\x05\x21\x00\x05"), "close", 0x82, {}),
    ("Receive Maximum 0 in CONNACK", ONLY5, "connecting", lambda v, a, b: connack(v, props=b"\x21\x00\x00"), "close",
     0x82, {}),
    ("Maximum Packet Size 0 in CONNACK", ONLY5, "connecting",
     lambda v, a, b: connack(v, props=b"\x27\x00\x00\x00\x00"), "close", 0x82, {}),
    ("Maximum QoS 2 in CONNACK", ONLY5, "connecting", lambda v, a, b: connack(v, props=b"\x24\x02"), "close", 0x82, {}),
    ("Payload Format Indicator 2", ONLY5, "connected", lambda v, a, b: pub(v, props=b"\x01\x02"), "close", 0x82, {}),
    ("Subscription Identifier 0", ONLY5, "connected", lambda v, a, b: pub(v, props=b"\x0b\x00"), "close", 0x82, {}),
    ("Reason String not UTF-8", ONLY5, "connected",
     lambda v, a, b: ack(PUBACK, a, v, 0, prop_str(0x1F, b"\xc0\x80")), "close", 0x81, {}),
    ("Assigned Client Identifier with U+0000", ONLY5, "connecting",
     lambda v, a, b: connack(v, props=prop_str(0x12, b"a\x00b")), "close", 0x81, {}),
    # --- reason codes
    ("PUBACK reason code 0x05", ONLY5, "connected", lambda v, a, b: ack(PUBACK, a, v, 0x05), "close", 0x82, {}),
    ("PUBREC reason code 0x92", ONLY5, "connected", lambda v, a, b: ack(PUBREC, b, v, 0x92), "close", 0x82, {}),
    ("PUBCOMP reason code 0x80", ONLY5, "connected", lambda v, a, b: ack(PUBCOMP, b, v, 0x80), "close", 0x82, {}),
    ("SUBACK reason code 0x03", BOTH, "connected", pkt(0x90, u16(7) + b"\x00\x03"), "close", 0x82, {}),
    ("DISCONNECT reason code 0x19", ONLY5, "connected", b"\xE0\x01\x19", "close", 0x82, {}),
    ("CONNACK return code 6", ONLY4, "connecting", b"\x20\x02\x00\x06", "close", 0x81, {}),
    ("CONNACK refusal with session present", ONLY5, "connecting", lambda v, a, b: connack(v, 1, 0x87), "close", 0x82,
     {}),
    ("CONNACK session present for a clean start", ONLY5, "connecting", lambda v, a, b: connack(v, 1, 0), "close",
     0x82, {}),
    ("CONNACK session present for a clean session", ONLY4, "connecting", lambda v, a, b: connack(v, 1, 0), "close",
     0x82, dict(clean=True)),
    # --- the wrong direction, or before CONNACK
    ("CONNECT from the server", BOTH, "connected", pkt(0x10, s16(b"MQTT") + b"\x04\x02\x00\x3c" + s16(b"x")), "close",
     0x82, {}),
    ("CONNECT with a bad protocol name from the server", BOTH, "connected",
     pkt(0x10, s16(b"a/y") + b"\x05\x02\x00\x3c" + s16(b"x")), "close", 0x82, {}),  # found by the fuzzer
    ("UNSUBSCRIBE from the server", BOTH, "connected",
     lambda v, a, b: pkt(0xA2, u16(3) + (b"\x00" if v == V5 else b"") + s16(b"a")), "close", 0x82, {}),
    ("PINGREQ from the server", BOTH, "connected", b"\xC0\x00", "close", 0x82, {}),
    ("a second CONNACK", BOTH, "connected", lambda v, a, b: connack(v), "close", 0x82, {}),
    ("PUBACK before CONNACK", BOTH, "connecting", lambda v, a, b: ack(PUBACK, 1, v), "close", 0x82, {}),
    ("SUBACK before CONNACK", BOTH, "connecting", pkt(0x90, u16(1) + b"\x00"), "close", 0x82, {}),
    ("PINGRESP before CONNACK", BOTH, "connecting", b"\xD0\x00", "close", 0x82, {}),
    ("PUBREL before CONNACK", BOTH, "connecting", lambda v, a, b: ack(PUBREL, 1, v), "close", 0x82, {}),
    ("AUTH without an Authentication Method", ONLY5, "connecting", b"\xF0\x00", "close", 0x82, {}),
    ("AUTH without an Authentication Method, after CONNACK", ONLY5, "connected",
     b"\xF0\x02\x18\x00", "close", 0x82, {}),
    # --- acks that do not fit the flow (a: our QoS 1 message, b: our QoS 2 message)
    ("PUBACK for a QoS 2 flow", BOTH, "connected", lambda v, a, b: ack(PUBACK, b, v), "close", 0x82, {}),
    ("PUBREC for a QoS 1 flow", BOTH, "connected", lambda v, a, b: ack(PUBREC, a, v), "close", 0x82, {}),
    ("PUBCOMP for a QoS 1 flow", BOTH, "connected", lambda v, a, b: ack(PUBCOMP, a, v), "close", 0x82, {}),
    ("PUBCOMP before PUBREC", BOTH, "connected", lambda v, a, b: ack(PUBCOMP, b, v), "close", 0x82, {}),
    ("SUBACK for an unknown packet id", BOTH, "connected",
     lambda v, a, b: pkt(0x90, u16(77) + (b"\x00\x00" if v == V5 else b"\x00")), "ignored", 0, {}),
    ("UNSUBACK for an unknown packet id", BOTH, "connected",
     lambda v, a, b: pkt(0xB0, u16(78) + (b"\x00\x00" if v == V5 else b"")), "ignored", 0, {}),
    ("SUBACK for our QoS 1 message's packet id", BOTH, "connected",
     lambda v, a, b: pkt(0x90, u16(a) + (b"\x00\x00" if v == V5 else b"\x00")), "ignored", 0, {}),
    # --- topics and aliases
    ("PUBLISH with a wildcard topic", BOTH, "connected", lambda v, a, b: pub(v, topic=b"a/+"), "close", 0x90, {}),
    ("PUBLISH topic not UTF-8", BOTH, "connected", lambda v, a, b: pub(v, topic=b"a\xff"), "close", 0x81, {}),
    ("PUBLISH topic with U+0000", BOTH, "connected", lambda v, a, b: pub(v, topic=b"a\x00"), "close", 0x81, {}),
    ("PUBLISH QoS 1 with packet id 0", BOTH, "connected", lambda v, a, b: pub(v, qos=1, pid=0), "close", 0x81, {}),
    ("PUBLISH with an empty topic and no alias", BOTH, "connected", lambda v, a, b: pub(v, topic=b""), "close", 0x82,
     {}),
    ("Topic Alias 0", ONLY5, "connected", lambda v, a, b: pub(v, props=b"\x23\x00\x00"), "close", 0x94,
     dict(topic_alias_maximum=4)),
    ("Topic Alias when we allow none", ONLY5, "connected", lambda v, a, b: pub(v, props=b"\x23\x00\x01"), "close",
     0x94, {}),
    ("Topic Alias 65535 with an empty topic", ONLY5, "connected",
     lambda v, a, b: pub(v, topic=b"", props=b"\x23\xff\xff"), "close", 0x94, dict(topic_alias_maximum=4)),
    # --- cut short, then closed
    ("half a PUBLISH, then close", BOTH, "connected", lambda v, a, b: pub(v, payload=b"abcdefgh", qos=1)[:6], "lost",
     0x80, {}),
    ("a fixed header alone, then close", BOTH, "connected", b"\x30", "lost", 0x80, {}),
    ("half a PUBACK, then close", BOTH, "connected", lambda v, a, b: ack(PUBACK, a, v)[:3], "lost", 0x80, {}),
    ("half a CONNACK, then close", BOTH, "connecting", lambda v, a, b: connack(v, props=b"\x21\x00\x05")[:3], "lost",
     0x80, {}),
]


def case_params():
    out = []
    for name, versions, phase, raw, outcome, reason, opts in CASES:
        for v in versions:
            out.append(pytest.param(v, phase, raw, outcome, reason, opts,
                                    id="%s-%s" % (name, "v5" if v == V5 else "v3.1.1")))
    return out


def raw_of(raw, v, a, b):
    return raw(v, a, b) if callable(raw) else raw


def send_hostile(fb, data):
    if data.startswith(SPLIT):
        for i in range(len(SPLIT), len(data)):
            fb.send_raw(data[i:i + 1])
            time.sleep(0.002)
    else:
        fb.send_raw(data)


def finish_flows(fb, a, b, present):
    """The resumed (or new) connection: both messages arrive and complete."""
    p1 = fb.expect(PUBLISH, qos=1, payload=b"one", dup=present)
    p2 = fb.expect(PUBLISH, qos=2, payload=b"two", dup=present)
    if present:
        assert (p1.pid, p2.pid) == (a, b)
    fb.send(Packet(PUBACK, pid=p1.pid), Packet(PUBREC, pid=p2.pid))
    fb.expect(PUBREL, pid=p2.pid)
    fb.send(Packet(PUBCOMP, pid=p2.pid))


def hostile_script(v, phase, raw, outcome, reason, pids):
    def server(fb):
        if phase == "connecting":
            fb.wait_connection()
            fb.expect(CONNECT)
            a, b = pids
        else:
            fb.handshake()
            a = fb.expect(PUBLISH, qos=1).pid
            b = fb.expect(PUBLISH, qos=2).pid
        send_hostile(fb, raw_of(raw, v, a, b))
        if outcome == "close":
            if v == V5:
                fb.expect_disconnect(reason)
            else:
                fb.expect_closed()
        elif outcome == "lost":
            fb.close()
        else:
            fb.expect_nothing(0.05)
            fb.send(Packet(PUBACK, pid=a), Packet(PUBREC, pid=b))
            fb.expect(PUBREL, pid=b)
            fb.send(Packet(PUBCOMP, pid=b))
            return
        present = phase == "connected"
        fb.handshake(session_present=present)
        finish_flows(fb, a, b, present)
        fb.expect_nothing(0.02)
    return server


def expected_errors(outcome, reason):
    if outcome == "close":
        return [(RemoteProtocolError, reason)]
    if outcome == "lost":
        return [(ConnectionLost, reason)]
    return []


@pytest.mark.parametrize("version,phase,raw,outcome,reason,opts", case_params())
def test_hostile_server(version, phase, raw, outcome, reason, opts):
    fb = FakeBroker(version)
    kw = dict(PERSIST[version], client_id="h1", port_impl=tinymqtt_port, backoff_min_ms=5, backoff_max_ms=20,
              max_packet_size=4096)  # (fixed buffers, "our 4096": CPython's default ones grow)
    kw.update(opts)
    c = Client("127.0.0.1", fb.port, version=version, **kw)
    c.errors, c.done = [], []
    c.on_disconnect = c.errors.append
    c.on_event = lambda ev, value, reason: c.done.append((ev, value)) if ev in (PUBACK, PUBCOMP) else None
    try:
        # Queued before the first connection: they go out right after CONNACK, in this order (pids 1, 2).
        a, b = c.publish("a", b"one", 1), c.publish("b", b"two", 2)
        fb.start(hostile_script(version, phase, raw, outcome, reason, (a, b)))
        tracemalloc.start()
        try:
            fb.run(c, until=lambda: fb.done and len(c.done) == 2, timeout=8)  # c.loop() raising fails the test
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        fb.join()
        assert peak < 2 << 20, "%d bytes allocated: sized by an announced length?" % peak
        assert [(type(e), e.reason) for e in c.errors] == expected_errors(outcome, reason), c.errors
        s = c.session
        assert sorted(c.done) == [(PUBACK, a), (PUBCOMP, b)]
        assert s.flights.count == 0 and s.flights.unacked == 0 and c.is_connected()
        assert len(s.inbuf) == 4096 and s.inlen == 0
        assert s.unsolicited == (outcome == "ignored")
    finally:
        fb.stop(c)


def test_hostile_table_figures():
    n = sum(len(c[1]) for c in CASES)
    report.record("hostile-server cases", "%d kinds, %d runs with the blocking client (v5 and 3.1.1), %d with the "
                  "asyncio client (v5), + 11 session-consistency tests" % (len(CASES), n, len(ASYNC_CASES)))


# ---------------------------------------------------------------------------------------- the asyncio client

ASYNC_CASES = [c for c in case_params() if c.values[0] == V5]


@pytest.mark.parametrize("version,phase,raw,outcome,reason,opts", ASYNC_CASES)
async def test_hostile_server_asyncio(version, phase, raw, outcome, reason, opts):
    fb = FakeBroker(version)
    kw = dict(PERSIST[version], client_id="h2", port_impl=tinymqtt_port, backoff_min_ms=5, backoff_max_ms=20,
              max_packet_size=4096)
    kw.update(opts)
    c = AsyncClient("127.0.0.1", fb.port, version=version, **kw)
    errors, done = [], []
    c.on_disconnect = errors.append
    c.on_event = lambda ev, value, reason: done.append((ev, value)) if ev in (PUBACK, PUBCOMP) else None
    a, b = c.publish_nowait("a", b"one", 1), c.publish_nowait("b", b"two", 2)
    fb.start(hostile_script(version, phase, raw, outcome, reason, (a, b)))
    try:
        # connect() raises what ends the first connection (before CONNACK, or in the same turn as it) and
        # closes the client; start it again to see the rest of the conversation.
        try:
            await c.connect(timeout=3)
        except MQTTError:
            c._closed, c.reconnect = False, True
            c._tasks = [asyncio.create_task(c._reader()), asyncio.create_task(c._ticker())]
        end = time.monotonic() + 8
        while not (fb.done and len(done) == 2):
            assert not fb.error, fb.error
            assert time.monotonic() < end, "timed out; errors %r" % errors
            await asyncio.sleep(0.01)
        await asyncio.get_running_loop().run_in_executor(None, fb.join)
        assert [(type(e), e.reason) for e in errors] == expected_errors(outcome, reason), errors
        assert sorted(done) == [(PUBACK, a), (PUBCOMP, b)]
        assert c.session.flights.count == 0 and c.is_connected()
    finally:
        await c.close()
        fb.stop()


# ---------------------------------------------------------------------------------------- session consistency

def rig(version, script, **opts):
    fb = FakeBroker(version)
    kw = dict(client_id="h3", port_impl=tinymqtt_port, backoff_min_ms=5, backoff_max_ms=20)
    kw.update(opts)
    c = Client("127.0.0.1", fb.port, version=version, **kw)
    c.errors = []
    c.on_disconnect = c.errors.append
    fb.start(script)
    return fb, c


@pytest.mark.parametrize("version", BOTH, ids=["v5", "v3.1.1"])
def test_resubscribe_waits_for_a_packet_id_when_every_slot_holds_a_message(version):
    # Regression: a new session found every in-flight slot taken by queued messages, and loop() raised
    # LocalProtocolError("no packet identifier free") to the application, again on every reconnect.
    def server(fb):
        fb.handshake()
        s = fb.expect(SUBSCRIBE)
        fb.send(Packet(SUBACK, pid=s.pid, codes=[1]))
        fb.close()
        fb.handshake(session_present=False)
        p1, p2 = fb.expect(PUBLISH, qos=1), fb.expect(PUBLISH, qos=1)
        fb.expect_nothing(0.05)  # no packet id for the SUBSCRIBE yet
        fb.send(Packet(PUBACK, pid=p1.pid))
        s = fb.expect(SUBSCRIBE)  # the first free slot goes to the subscription, before anything else
        assert s.topics == [("cmd/#", 1)]
        fb.send(Packet(SUBACK, pid=s.pid, codes=[1]), Packet(PUBACK, pid=p2.pid))
        fb.send(Packet(PUBLISH, topic="cmd/x", payload=b"hi", qos=1, pid=9))
        fb.expect(PUBACK, pid=9)

    fb, c = rig(version, server, max_inflight=2)
    got = []
    try:
        c.connect()
        assert c.subscribe("cmd/#", 1, handler=lambda m: got.append(bytes(m.payload))) == [1]
        fb.run(c, until=lambda: not c.is_connected())
        c.publish("d", b"1", 1), c.publish("d", b"2", 1)
        fb.run(c)
        fb.run(c, until=lambda: got == [b"hi"] and not c.session.flights.count)
        assert [type(e) for e in c.errors] == [ConnectionLost]
    finally:
        fb.stop()


def test_resubscribe_splits_what_does_not_fit_one_packet():
    # Regression: 300 filters subscribed in three calls went back as one 9 KB SUBSCRIBE that could never fit
    # the 4 KB buffer, and loop() raised LocalProtocolError to the application on every reconnect.
    filters = ["some/long/topic/filter/%04d" % i for i in range(300)]

    def server(fb):
        fb.handshake()
        for _ in range(3):
            s = fb.expect(SUBSCRIBE)
            fb.send(Packet(SUBACK, pid=s.pid, codes=[0] * len(s.topics)))
        fb.close()
        fb.handshake(session_present=False)
        again = []
        while len(again) < 300:
            s = fb.expect(SUBSCRIBE)
            assert len(s.raw) <= 4096
            again += [t for t, o in s.topics]
            fb.send(Packet(SUBACK, pid=s.pid, codes=[0] * len(s.topics)))
        assert again == filters
        fb.expect_nothing(0.05)

    fb, c = rig(V5, server)
    try:
        c.connect()
        for k in range(0, 300, 100):
            c.subscribe([(f, 0) for f in filters[k:k + 100]])
        fb.run(c)
        assert [type(e) for e in c.errors] == [ConnectionLost]
    finally:
        fb.stop()


def test_a_subscribe_that_could_never_be_sent_is_refused_at_once():
    fb, c = rig(V5, lambda fb: None, max_packet_size=4096)
    try:
        with pytest.raises(LocalProtocolError) as e:  # offline: it would fail on every connect
            c.subscribe("x" * 5000, 0)
        assert e.value.reason == 0x95 and not c.session.subs
    finally:
        fb.stop()


@pytest.mark.parametrize("version", BOTH, ids=["v5", "v3.1.1"])
@pytest.mark.parametrize("bad", ["wrong count", "UNSUBACK for SUBSCRIBE"])
def test_a_suback_that_does_not_fit_leaves_the_subscription_to_ask_again(version, bad):
    def server(fb):
        fb.handshake()
        s = fb.expect(SUBSCRIBE)
        if bad == "wrong count":
            fb.send(Packet(SUBACK, pid=s.pid, codes=[1, 1]))
        else:
            fb.send(Packet(UNSUBACK, pid=s.pid, codes=[0] if version == V5 else None))
        if version == V5:
            fb.expect_disconnect(0x82)
        else:
            fb.expect_closed()
        fb.handshake(session_present=True)
        s = fb.expect(SUBSCRIBE)  # never acknowledged: asked again, even though the session was kept
        assert s.topics == [("t/#", 1)]
        fb.send(Packet(SUBACK, pid=s.pid, codes=[1]))

    fb, c = rig(version, server, **PERSIST[version])
    try:
        c.connect()
        c.session.subscribe([("t/#", 1)])
        c.flush()
        fb.run(c)
        fb.run(c, until=lambda: not c.session.flights.count)
        assert [(type(e), e.reason) for e in c.errors] == [(RemoteProtocolError, 0x82)]
    finally:
        fb.stop()


@pytest.mark.parametrize("version", BOTH, ids=["v5", "v3.1.1"])
def test_a_suback_answering_an_unsubscribe_is_a_protocol_error(version):
    def server(fb):
        fb.handshake()
        s = fb.expect(SUBSCRIBE)
        fb.send(Packet(SUBACK, pid=s.pid, codes=[0, 0]))
        u = fb.expect(UNSUBSCRIBE)
        fb.send(Packet(SUBACK, pid=u.pid, codes=[0]))
        if version == V5:
            fb.expect_disconnect(0x82)
        else:
            fb.expect_closed()
        fb.handshake(session_present=True)
        u = fb.expect(UNSUBSCRIBE)  # asked again: the kept session still has it
        assert u.topics == ["abc/#"]
        fb.send(Packet(UNSUBACK, pid=u.pid, codes=[0] if version == V5 else None))
        s = fb.expect(SUBSCRIBE)  # and what stays subscribed is confirmed
        assert s.topics == [("keep", 0)]
        fb.send(Packet(SUBACK, pid=s.pid, codes=[0]))
        fb.expect_nothing(0.05)

    fb, c = rig(version, server, **PERSIST[version])
    try:
        c.connect()
        assert c.subscribe([("abc/#", 0), ("keep", 0)]) == [0, 0]
        c.session.unsubscribe(["abc/#"])
        c.flush()
        fb.run(c)
        assert list(c.session.subs) == ["keep"]
        assert [(type(e), e.reason) for e in c.errors] == [(RemoteProtocolError, 0x82)]
    finally:
        fb.stop()


def test_an_unanswered_unsubscribe_is_sent_again_to_a_kept_session():
    def server(fb):
        fb.handshake()
        s = fb.expect(SUBSCRIBE)
        fb.send(Packet(SUBACK, pid=s.pid, codes=[1]))
        fb.expect(UNSUBSCRIBE)
        fb.close()  # the UNSUBACK never comes
        fb.handshake(session_present=True)
        u = fb.expect(UNSUBSCRIBE)
        assert u.topics == ["a/#"] and u.props == {P.USER_PROPERTY: [("why", "done")]}
        fb.send(Packet(UNSUBACK, pid=u.pid, codes=[0]))
        fb.expect_nothing(0.05)

    fb, c = rig(V5, server, **PERSIST[V5])
    try:
        c.connect()
        c.subscribe("a/#", 1)
        c.session.unsubscribe(["a/#"], props={P.USER_PROPERTY: [("why", "done")]})
        c.flush()
        fb.run(c)
        assert not c.session.subs and not c.session.flights.count
    finally:
        fb.stop()
