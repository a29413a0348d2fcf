# Byte-exact codec vectors for MQTT 3.1 (level 3), 3.1.1 (level 4) and 5.0 (level 5).
# Portable: runs under pytest on CPython and under the mini runner on MicroPython (no pytest, no fixtures,
# nothing CPython-only). Every vector is checked both ways: encode(packet) == bytes, decode(bytes) == packet.
# Expected bytes are written out by hand from the spec, never produced by the codec under test.
from tinymqtt import packets as K
from tinymqtt import wire
from tinymqtt import props as P
from tinymqtt.packets import encode_publish, frame, sub_options
from tinymqtt_cli.server_codec import Packet, encode, decode, MAX_PACKET  # the server half too: any packet, both ways
from tinymqtt.errors import MQTTError, RemoteProtocolError, LocalProtocolError
try:
    from tests.shared.checks import raises
except ImportError:  # MicroPython, run from tests/shared
    from checks import raises

V31, V311, V5 = 3, 4, 5


# ---------------------------------------------------------------- helpers (duplicated per file on purpose)

def h(s):
    """Hex text with optional spaces -> bytes."""
    s = s.replace(" ", "").replace("\n", "")
    return bytes(int(s[i:i + 2], 16) for i in range(0, len(s), 2))


def hx(b):
    return " ".join("%02X" % c for c in bytes(b))


def _consume(mid, chunks):
    # True when mid is exactly the chunks in some order (each used once).
    left = list(chunks)
    while mid:
        for i in range(len(left)):
            c = left[i]
            if mid[:len(c)] == c:
                mid = mid[len(c):]
                left.pop(i)
                break
        else:
            return False
    return not left


def same(out, expected, groups=None):
    """out == expected, allowing the properties listed in each group (a list of per-property byte chunks,
    contiguous in expected) in any order: the spec does not order properties and MicroPython's dict
    iteration order is not insertion order."""
    out = bytes(out)
    if out == expected:
        return True
    if not groups or len(out) != len(expected):
        return False
    pos = 0
    for g in groups:
        joined = b"".join(g)
        i = expected.find(joined, pos)
        assert i >= 0, "property group not found in the expected bytes"
        if out[pos:i] != expected[pos:i] or not _consume(out[i:i + len(joined)], g):
            return False
        pos = i + len(joined)
    return out[pos:] == expected[pos:]


def check(pkt, version, expected, groups=None, roundtrip=True):
    """encode(pkt) == expected (into an exactly sized buffer; one byte less is refused with 0x95),
    frame(expected) is its length, decode(expected) == pkt, and re-encoding the decoded packet is stable."""
    n = len(expected)
    buf = bytearray(n)
    m = encode(buf, pkt, version)
    assert m == n, "encoded %d bytes, expected %d: %s" % (m, n, hx(buf[:m]))
    assert same(buf, expected, groups), "encoded\n  %s\nexpected\n  %s" % (hx(buf), hx(expected))
    raises(LocalProtocolError, 0x95, encode, bytearray(n - 1), pkt, version)
    check_decode(pkt, version, expected)
    if roundtrip:
        d = decode(memoryview(expected), version)
        buf2 = bytearray(n)
        assert encode(buf2, d, version) == n and same(buf2, expected, groups)
    return buf


def check_decode(pkt, version, expected):
    n = len(expected)
    assert frame(expected, n) == n, "frame() says %d for %d bytes" % (frame(expected, n), n)
    for form in (memoryview(expected), expected, memoryview(bytearray(expected))):
        d = decode(form, version)
        assert d == pkt, "decoded %r, expected %r" % (d, pkt)


def pub_bytes(version, topic, payload, qos=0, retain=False, dup=False, pid=0, props=None, alias=0, size=256):
    buf = bytearray(size)
    n = encode_publish(buf, version, topic, payload, qos, retain, dup, pid, props, alias)
    return bytes(buf[:n])


# ---------------------------------------------------------------- PUBLISH

def test_publish_v5_spec_example():
    # MQTT 5.0 Figure 3-9: topic "a/b", packet id 10, no properties (QoS 1 so the packet id is present).
    expected = h("32 08  00 03 61 2F 62  00 0A  00")
    p = Packet(K.PUBLISH, topic="a/b", pid=10, qos=1)
    out = check(p, V5, expected)
    assert out[2:10] == h("00 03 61 2F 62 00 0A 00")  # the figure's eight variable header bytes
    assert pub_bytes(V5, b"a/b", b"", qos=1, pid=10) == expected
    assert pub_bytes(V5, "a/b", b"", qos=1, pid=10) == expected
    # the same with a payload, and at QoS 2
    check(Packet(K.PUBLISH, topic="a/b", pid=10, qos=1, payload=b"hi"), V5, h("32 0A 00 03 61 2F 62 00 0A 00 68 69"))
    check(Packet(K.PUBLISH, topic="a/b", pid=10, qos=2), V5, h("34 08 00 03 61 2F 62 00 0A 00"))


def test_publish_v3_v4():
    for v in (V31, V311):
        check(Packet(K.PUBLISH, topic="a/b", pid=10, qos=1), v, h("32 07 00 03 61 2F 62 00 0A"))
        check(Packet(K.PUBLISH, topic="a/b", payload=b"\x00\xff"), v, h("30 07 00 03 61 2F 62 00 FF"))
        check(Packet(K.PUBLISH, topic="a/b", qos=2, pid=65535, dup=True, retain=True, payload=b"x"), v,
              h("3D 08 00 03 61 2F 62 FF FF 78"))
        assert pub_bytes(v, b"a/b", b"x", 2, True, True, 65535) == h("3D 08 00 03 61 2F 62 FF FF 78")


def test_publish_payload_is_a_view():
    d = decode(memoryview(h("30 07 00 03 61 2F 62 68 69")), V311)
    assert bytes(d.payload) == b"hi"


def test_publish_v5_properties():
    # Message Expiry 60, two User Properties (kept in order), two Subscription Identifiers (repeatable in PUBLISH)
    e = h("02 00 00 00 3C")
    u1 = h("26 00 01 6B 00 01 76")
    u2 = h("26 00 01 6B 00 01 77")
    s1, s2 = h("0B 01"), h("0B 80 01")
    props = e + u1 + u2 + s1 + s2
    expected = h("30") + bytes([3 + 1 + len(props) + 2]) + h("00 01 74") + bytes([len(props)]) + props + b"hi"
    p = Packet(K.PUBLISH, topic="t", payload=b"hi",
               props={0x02: 60, 0x26: [("k", "v"), ("k", "w")], 0x0B: [1, 128]})
    check(p, V5, expected, [[e, u1 + u2, s1 + s2]])


def test_publish_v5_topic_alias():
    # alias only: empty topic + Topic Alias property
    expected = h("30 07 00 00 03 23 00 03 78")
    assert pub_bytes(V5, b"", b"x", alias=3) == expected
    check(Packet(K.PUBLISH, topic="", payload=b"x", props={0x23: 3}), V5, expected)
    # topic and alias, QoS 1
    expected = h("32 0B 00 03 61 2F 62 00 0A 03 23 00 01")
    assert pub_bytes(V5, b"a/b", b"", qos=1, pid=10, alias=1) == expected
    assert decode(expected, V5) == Packet(K.PUBLISH, topic="a/b", qos=1, pid=10, props={0x23: 1})
    # alias after other properties, in one property block
    expected = h("30 0D 00 01 74 08 02 00 00 00 3C 23 00 02 7A")
    assert pub_bytes(V5, b"t", b"z", props={0x02: 60}, alias=2) == expected
    assert decode(expected, V5) == Packet(K.PUBLISH, topic="t", payload=b"z", props={0x02: 60, 0x23: 2})


def test_publish_utf8_topics():
    # e-acute, euro sign, U+1F600, U+FFFF and U+10FFFF are all well-formed and allowed
    raw = h("C3 A9 2F E2 82 AC 2F F0 9F 98 80 2F EF BF BF 2F F4 8F BF BF")
    topic = str(raw, "utf-8")
    assert len(topic) == 9
    expected = h("30") + bytes([2 + len(raw)]) + h("00") + bytes([len(raw)]) + raw
    for v in (V31, V311):
        check(Packet(K.PUBLISH, topic=topic), v, expected)
    assert pub_bytes(V311, topic, b"") == expected
    assert pub_bytes(V311, raw, b"") == expected


# ---------------------------------------------------------------- CONNECT

def test_connect_v31_spec_example():
    # MQTT 3.1 CONNECT example: protocol MQIsdp, version 3, Will QoS 1, Will flag, Clean Start, keep alive 10.
    header = h("00 06 4D 51 49 73 64 70  03  0E  00 0A")
    payload = h("00 03 63 69 64  00 03 77 2F 74  00 04 67 6F 6E 65")  # "cid", will topic "w/t", message "gone"
    expected = h("10 1C") + header + payload
    assert len(header) == 12 and len(header) + len(payload) == 0x1C
    p = Packet(K.CONNECT, client_id="cid", clean=True, keepalive=10,
               will=Packet(K.PUBLISH, topic="w/t", payload=b"gone", qos=1, retain=False))
    out = check(p, V31, expected)
    # every byte of the variable header, as in the spec's table
    want = (0x00, 0x06, ord("M"), ord("Q"), ord("I"), ord("s"), ord("d"), ord("p"), 0x03, 0x0E, 0x00, 0x0A)
    for i in range(12):
        assert out[2 + i] == want[i], "variable header byte %d: 0x%02X != 0x%02X" % (i + 1, out[2 + i], want[i])
    flags = out[11]
    assert flags & 0x02 and flags & 0x04 and (flags >> 3) & 3 == 1 and not flags & 0x20 and not flags & 0xC1
    d = decode(expected, V5)  # the CONNECT's own level decides, whatever the caller assumed
    assert d == p and d.version == 3
    assert d.will.qos == 1 and d.will.retain is False and d.will.topic == "w/t" and d.will.payload == b"gone"


def test_connect_v311_credentials():
    expected = h("10 14  00 04 4D 51 54 54 04 C2 00 3C  00 02 63 31  00 01 75  00 01 70")
    p = Packet(K.CONNECT, client_id="c1", clean=True, keepalive=60, username="u", password=b"p")
    check(p, V311, expected)
    assert decode(expected, V311).version == 4
    # user name only, no clean session, empty client id allowed in 3.1.1
    check(Packet(K.CONNECT, client_id="", clean=False, keepalive=0, username="u"), V311,
          h("10 0F 00 04 4D 51 54 54 04 80 00 00 00 00 00 01 75"))


def test_connect_v5_properties_and_will():
    sp = [h("11 00 00 0E 10"), h("21 00 14")]  # Session Expiry 3600, Receive Maximum 20
    wp = [h("18 00 00 00 05"), h("01 01")]  # Will Delay 5, Payload Format Indicator 1
    expected = (h("10 24  00 04 4D 51 54 54 05 36 00 00  08") + b"".join(sp) + h("00 00  07") + b"".join(wp)
                + h("00 01 77  00 02 62 79"))
    assert len(expected) == 2 + 0x24
    p = Packet(K.CONNECT, client_id="", clean=True, keepalive=0, props={0x11: 3600, 0x21: 20},
               will=Packet(K.PUBLISH, topic="w", payload=b"by", qos=2, retain=True, props={0x18: 5, 0x01: 1}))
    check(p, V5, expected, [sp, wp])
    assert decode(expected, V5).version == 5


def test_connect_v5_password_without_user_name():
    # allowed from MQTT 5 on (3.1.2.9); flags 0x40
    expected = h("10 13 00 04 4D 51 54 54 05 40 00 1E 00 00 01 78 00 03 01 02 03")
    check(Packet(K.CONNECT, client_id="x", clean=False, keepalive=30, password=b"\x01\x02\x03"), V5, expected)


# ---------------------------------------------------------------- CONNACK

def test_connack_v31():
    check(Packet(K.CONNACK), V31, h("20 02 00 00"))
    check(Packet(K.CONNACK, reason=5), V31, h("20 02 00 05"))
    # 3.1 does not use the first byte: whatever is in it is ignored
    assert decode(h("20 02 01 00"), V31) == Packet(K.CONNACK)


def test_connack_v311():
    check(Packet(K.CONNACK), V311, h("20 02 00 00"))
    check(Packet(K.CONNACK, session_present=True), V311, h("20 02 01 00"))
    for rc in (1, 2, 3, 4, 5):
        check(Packet(K.CONNACK, reason=rc), V311, h("20 02 00") + bytes([rc]))


def test_connack_v5():
    check(Packet(K.CONNACK), V5, h("20 03 00 00 00"))
    check(Packet(K.CONNACK, session_present=True), V5, h("20 03 01 00 00"))
    check(Packet(K.CONNACK, reason=0x87), V5, h("20 03 00 87 00"))
    g = [h("21 00 0A"), h("22 00 05"), h("12 00 06 61 75 74 6F 2D 31"), h("24 01"), h("26 00 01 6B 00 01 76")]
    expected = h("20 1B 00 00 18") + b"".join(g)
    p = Packet(K.CONNACK, props={0x21: 10, 0x22: 5, 0x12: "auto-1", 0x24: 1, 0x26: [("k", "v")]})
    check(p, V5, expected, [g])


# ---------------------------------------------------------------- SUBSCRIBE / UNSUBSCRIBE and their acks

def test_subscribe():
    body = h("00 03 61 2F 62 01  00 03 63 2F 64 02")
    p = Packet(K.SUBSCRIBE, pid=1, topics=[("a/b", 1), ("c/d", 2)])
    for v in (V31, V311):
        check(p, v, h("82 0E 00 01") + body)
    check(p, V5, h("82 0F 00 01 00") + body)
    # v5 with a Subscription Identifier and every option set
    o = sub_options(qos=1, no_local=True, retain_as_published=True, retain_handling=2)
    assert o == 0x2D
    assert sub_options() == 0 and sub_options(2) == 2 and sub_options(retain_handling=1) == 0x10
    p = Packet(K.SUBSCRIBE, pid=0x1234, topics=[("a/#", o)], props={0x0B: 268435455})
    check(p, V5, h("82 0E 12 34 05 0B FF FF FF 7F 00 03 61 2F 23 2D"))


def test_unsubscribe():
    body = h("00 03 61 2F 62  00 03 63 2F 64")
    p = Packet(K.UNSUBSCRIBE, pid=2, topics=["a/b", "c/d"])
    for v in (V31, V311):
        check(p, v, h("A2 0C 00 02") + body)
    check(p, V5, h("A2 0D 00 02 00") + body)


def test_suback():
    p = Packet(K.SUBACK, pid=1, codes=[1, 2])
    check(p, V31, h("90 04 00 01 01 02"))
    check(p, V311, h("90 04 00 01 01 02"))
    check(Packet(K.SUBACK, pid=1, codes=[1, 2, 0x80]), V311, h("90 05 00 01 01 02 80"))
    check(Packet(K.SUBACK, pid=1, codes=[0, 0x8F, 0xA2]), V5, h("90 06 00 01 00 00 8F A2"))
    check(Packet(K.SUBACK, pid=1, codes=[1, 2, 0x80], props={0x1F: "x"}), V5,
          h("90 0A 00 01 04 1F 00 01 78 01 02 80"))


def test_unsuback():
    for v in (V31, V311):
        check(Packet(K.UNSUBACK, pid=1), v, h("B0 02 00 01"))
    check(Packet(K.UNSUBACK, pid=1, codes=[0]), V5, h("B0 04 00 01 00 00"))
    check(Packet(K.UNSUBACK, pid=7, codes=[0x11, 0x80]), V5, h("B0 05 00 07 00 11 80"))


# ---------------------------------------------------------------- PUBACK / PUBREC / PUBREL / PUBCOMP

def test_pub_acks_all_versions():
    for t, first in ((K.PUBACK, 0x40), (K.PUBREC, 0x50), (K.PUBREL, 0x62), (K.PUBCOMP, 0x70)):
        for v in (V31, V311, V5):
            check(Packet(t, pid=10), v, bytes([first]) + h("02 00 0A"))


def test_pubrel_v5_forms():
    # reason code 0x92 (Packet Identifier not found): RL 3, reason only
    check(Packet(K.PUBREL, pid=1, reason=0x92), V5, h("62 03 00 01 92"))
    # RL 2: success, no properties
    check(Packet(K.PUBREL, pid=1), V5, h("62 02 00 01"))
    # RL 4+: reason and a property block; an empty block decodes to the same packet as the short form
    check_decode(Packet(K.PUBREL, pid=1, reason=0x92), V5, h("62 04 00 01 92 00"))
    check_decode(Packet(K.PUBREL, pid=1), V5, h("62 04 00 01 00 00"))
    check_decode(Packet(K.PUBREL, pid=1), V5, h("62 03 00 01 00"))
    check(Packet(K.PUBREL, pid=1, reason=0x92, props={0x1F: "no"}), V5, h("62 09 00 01 92 05 1F 00 02 6E 6F"))
    # success with properties needs the reason byte written out
    check(Packet(K.PUBREL, pid=1, props={0x26: [("a", "b")]}), V5, h("62 0B 00 01 00 07 26 00 01 61 00 01 62"))


def test_pubrel_v31_dup_tolerated():
    # 3.1 sends PUBREL at QoS 1 and may set DUP on a resend
    assert decode(h("6A 02 00 01"), V31) == Packet(K.PUBREL, pid=1)


def test_puback_pubrec_pubcomp_v5_reasons():
    check(Packet(K.PUBACK, pid=10, reason=0x10), V5, h("40 03 00 0A 10"))
    check(Packet(K.PUBREC, pid=10, reason=0x97), V5, h("50 03 00 0A 97"))
    check(Packet(K.PUBCOMP, pid=10, reason=0x92), V5, h("70 03 00 0A 92"))
    check(Packet(K.PUBACK, pid=10, reason=0x99, props={0x1F: "bad"}), V5, h("40 0A 00 0A 99 06 1F 00 03 62 61 64"))


# ---------------------------------------------------------------- PINGREQ / PINGRESP / DISCONNECT / AUTH

def test_ping():
    for v in (V31, V311, V5):
        check(Packet(K.PINGREQ), v, h("C0 00"))
        check(Packet(K.PINGRESP), v, h("D0 00"))


def test_disconnect():
    for v in (V31, V311, V5):
        check(Packet(K.DISCONNECT), v, h("E0 00"))
    check(Packet(K.DISCONNECT, reason=0x04), V5, h("E0 01 04"))
    check_decode(Packet(K.DISCONNECT), V5, h("E0 01 00"))
    check_decode(Packet(K.DISCONNECT), V5, h("E0 02 00 00"))
    check(Packet(K.DISCONNECT, reason=0x9C, props={0x1C: "h2"}), V5, h("E0 07 9C 05 1C 00 02 68 32"))
    g = [h("11 00 00 00 00"), h("1F 00 03 62 79 65")]
    check(Packet(K.DISCONNECT, props={0x11: 0, 0x1F: "bye"}), V5, h("E0 0D 00 0B") + b"".join(g), [g])


def test_auth():
    check(Packet(K.AUTH), V5, h("F0 00"))
    check(Packet(K.AUTH, reason=0x19), V5, h("F0 01 19"))
    g = [h("15 00 0B 53 43 52 41 4D 2D 53 48 41 2D 31"), h("16 00 02 01 02")]
    expected = h("F0 15 18 13") + b"".join(g)
    check(Packet(K.AUTH, reason=0x18, props={0x15: "SCRAM-SHA-1", 0x16: b"\x01\x02"}), V5, expected, [g])


# ---------------------------------------------------------------- Remaining Length and frame()

VBI = ((0, "00"), (127, "7F"), (128, "80 01"), (16383, "FF 7F"), (16384, "80 80 01"), (2097151, "FF FF 7F"),
       (2097152, "80 80 80 01"), (268435455, "FF FF FF 7F"))


def test_vbi_bytes():
    for v, x in VBI:
        want = h(x)
        b = bytearray(6)
        end = P.put_vbi(b, 1, v)
        assert end == 1 + len(want) and bytes(b[1:end]) == want, "VBI %d -> %s" % (v, hx(b[1:end]))
        assert P.put_vbi(None, 0, v) == len(want) == wire._vbi_len(v)
        r = P.Reader(memoryview(want), 0, len(want))
        assert P.vbi(r, "x") == v and r.pos == len(want)
    raises(LocalProtocolError, 0x95, P.put_vbi, bytearray(5), 0, 268435456)
    raises(LocalProtocolError, 0x95, P.put_vbi, bytearray(5), 0, -1)
    raises(RemoteProtocolError, 0x81, P.vbi, P.Reader(memoryview(h("80 80 80 80 01")), 0, 5), "x")


def test_frame_boundaries():
    for v, x in VBI:
        hdr = h("30") + h(x)
        total = len(hdr) + v
        assert frame(hdr, len(hdr)) == total, "RL %d" % v
        assert frame(hdr + b"\x00\x00", len(hdr)) == total  # bytes beyond n are not looked at
        for n in range(len(hdr)):
            assert frame(hdr, n) == 0, "RL %d, %d bytes so far" % (v, n)
    assert frame(h("30 FF FF FF 7F"), 5) == MAX_PACKET == 268435460


def test_frame_max_size():
    assert frame(h("30 7F"), 2, 129) == 129
    raises(RemoteProtocolError, 0x95, frame, h("30 7F"), 2, 128)
    # refused from the header alone: no body exists yet
    raises(RemoteProtocolError, 0x95, frame, h("30 80 80 80 01"), 5, 1 << 20)
    raises(RemoteProtocolError, 0x95, frame, h("30 FF FF FF 7F"), 5, MAX_PACKET - 1)
    raises(RemoteProtocolError, 0x95, frame, h("30 80 01"), 3, 130)
    assert frame(h("30 80 01"), 3, 131) == 131


def test_frame_five_byte_remaining_length():
    raises(RemoteProtocolError, 0x81, frame, h("30 80 80 80 80"), 5)
    raises(RemoteProtocolError, 0x81, frame, h("30 FF FF FF FF 01"), 6)
    raises(RemoteProtocolError, 0x81, decode, h("30 80 80 80 80 01"), V5)


def test_remaining_length_boundaries_encoded():
    # PUBLISH QoS 0 on topic "t" whose payload makes RL exactly 127, 128, 16383, 16384
    for rl, x in ((127, "7F"), (128, "80 01"), (16383, "FF 7F"), (16384, "80 80 01")):
        payload = bytes(rl - 3)
        expected = h("30") + h(x) + h("00 01 74") + payload
        check(Packet(K.PUBLISH, topic="t", payload=payload), V311, expected, roundtrip=False)
        check(Packet(K.PUBLISH, topic="t", payload=bytes(rl - 6), props={0x01: 0}), V5,
              h("30") + h(x) + h("00 01 74 02 01 00") + bytes(rl - 6), roundtrip=False)
    check(Packet(K.PINGREQ), V311, h("C0 00"))  # RL 0


def test_encode_buffer_larger_than_packet():
    buf = bytearray(64)
    for i in range(64):
        buf[i] = 0xAA
    n = encode(buf, Packet(K.PUBACK, pid=5), V311)
    assert n == 4 and buf[:4] == h("40 02 00 05") and buf[4] == 0xAA


def test_encode_and_frame_at_an_offset():
    # several packets back to back in one output buffer
    buf = bytearray(32)
    n1 = encode(buf, Packet(K.PUBACK, pid=5), V311)
    n2 = encode_publish(buf, V5, b"a/b", b"hi", 1, False, False, 10, None, 0, n1)
    n3 = encode(buf, Packet(K.PINGREQ), V5, n1 + n2)
    assert (n1, n2, n3) == (4, 12, 2)
    assert bytes(buf[:18]) == h("40 02 00 05  32 0A 00 03 61 2F 62 00 0A 00 68 69  C0 00")
    assert frame(buf, 18, MAX_PACKET, 0) == 4
    assert frame(buf, 14, MAX_PACKET, 4) == 12
    assert frame(buf, 1, MAX_PACKET, 4) == 0
    assert frame(buf, 2, MAX_PACKET, 16) == 2
    raises(RemoteProtocolError, 0x95, frame, buf, 14, 11, 4)
    mv = memoryview(buf)
    assert decode(mv[4:16], V5) == Packet(K.PUBLISH, topic="a/b", qos=1, pid=10, payload=b"hi")
    # the buffer check counts from the offset
    raises(LocalProtocolError, 0x95, encode, bytearray(7), Packet(K.PUBACK, pid=5), V311, 4)
    assert encode(bytearray(8), Packet(K.PUBACK, pid=5), V311, 4) == 4
    raises(LocalProtocolError, 0x95, encode_publish, bytearray(12), V311, b"t", b"x", 0, False, False, 0, None, 0, 7)


def test_read_publish_topics_through_the_recent_topic_cache():
    # MicroPython recognises the last 8 new topics by their bytes (packets._TOPICS): more topics than that, read in
    # changing orders with one reused Packet (as the session reads them), each still gives its own str; topics of
    # one length that differ in one byte too.
    topics = ["t/%02d" % i for i in range(12)] + ["t/0%s" % c for c in "abc"]
    order = list(range(len(topics))) + [3, 3, 14, 0, 11, 13, 1, 12, 2, 9, 8, 7, 6, 5, 4, 10, 14, 0]
    m = Packet(K.PUBLISH)
    buf = bytearray(64)
    for k in order:
        n = encode_publish(buf, V311, topics[k].encode(), b"x")
        assert K.read_publish(memoryview(buf), 0, n, m, V311).topic == topics[k], (k, m.topic)
        assert bytes(m.payload) == b"x"
