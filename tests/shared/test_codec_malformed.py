# A corpus of malformed and forbidden inputs: decode() must raise RemoteProtocolError with the exact reason
# code (0x81 Malformed Packet, 0x82 Protocol Error, 0x84 Unsupported Protocol Version, 0x90 Topic Name invalid,
# 0x95 Packet too large) and nothing else, ever. Then the encode side: LocalProtocolError for what our own
# caller may not ask for. Portable: runs under pytest on CPython and under the mini runner on MicroPython.
from tinymqtt import packets as K
from tinymqtt.packets import encode_publish, frame
from tinymqtt_cli.server_codec import Packet, encode, decode  # the server half too: any packet, both ways
from tinymqtt.errors import MQTTError, RemoteProtocolError, LocalProtocolError
try:
    from tests.shared.checks import raises
except ImportError:  # MicroPython, run from tests/shared
    from checks import raises

V31, V311, V5 = 3, 4, 5
ALL = (V31, V311, V5)
V3X = (V31, V311)


# ---------------------------------------------------------------- helpers (duplicated per file on purpose)

def h(s):
    s = s.replace(" ", "")
    return bytes(int(s[i:i + 2], 16) for i in range(0, len(s), 2))


def hx(b):
    return " ".join("%02X" % c for c in bytes(b))


def u16(n):
    return bytes([n >> 8, n & 0xFF])


def s16(b):
    return u16(len(b)) + b


def vbi(n):
    out = []
    while True:
        d = n & 0x7F
        n >>= 7
        out.append(d | 0x80 if n else d)
        if not n:
            return bytes(out)


def pkt(first, body):
    return bytes([first]) + vbi(len(body)) + body


def props(*items):
    b = b"".join(items)
    return vbi(len(b)) + b


def refused(cases):
    """cases: (label, versions, bytes, reason). Each must make decode() raise RemoteProtocolError(reason),
    as bytes and as a memoryview; frame() must never raise anything but RemoteProtocolError either."""
    bad = []
    for label, versions, data, reason in cases:
        for v in versions:
            for form in (data, memoryview(data)):
                try:
                    raises(RemoteProtocolError, reason, decode, form, v)
                except AssertionError as e:
                    bad.append("%s [v%d] %s: %s" % (label, v, hx(data), e))
                    break
        try:
            frame(data, len(data))
        except RemoteProtocolError:
            pass
        except Exception as e:
            bad.append("%s: frame() raised %s %r" % (label, type(e).__name__, e))
    assert not bad, "\n".join(bad)


def accepted(cases):
    for label, versions, data in cases:
        for v in versions:
            try:
                decode(data, v)
            except Exception as e:
                raise AssertionError("%s [v%d] %s refused: %r" % (label, v, hx(data), e))


def connect(name, level, flags, rest, keepalive=b"\x00\x3C"):
    return pkt(0x10, s16(name) + bytes([level, flags]) + keepalive + rest)


# a valid body per version, used to test fixed header flags and tails
CONNECT4 = connect(b"MQTT", 4, 0x02, s16(b"c"))
CONNECT5 = connect(b"MQTT", 5, 0x02, b"\x00" + s16(b"c"))
PUB0 = pkt(0x30, s16(b"t") + b"x")


def test_reserved_flag_bits():
    refused([
        ("PUBREL flags 0000", (V311, V5), h("60 02 00 01"), 0x81),
        ("PUBREL flags 0011", (V311, V5), h("63 02 00 01"), 0x81),
        ("PUBREL flags 1010", (V311, V5), h("6A 02 00 01"), 0x81),
        ("PUBREL flags 0110", (V311, V5), h("66 02 00 01"), 0x81),
        ("PUBREL QoS 0 in 3.1", (V31,), h("60 02 00 01"), 0x81),
        ("CONNECT flags 0001 (3.1.1)", (V311,), b"\x11" + CONNECT4[1:], 0x81),
        ("CONNECT flags 1000 (3.1.1)", (V311,), b"\x18" + CONNECT4[1:], 0x81),
        ("CONNECT flags 0010 (5)", (V5,), b"\x12" + CONNECT5[1:], 0x81),
        ("CONNACK flags", (V311, V5), h("21 02 00 00"), 0x81),
        ("PUBACK flags", (V311, V5), h("42 02 00 01"), 0x81),
        ("PUBREC flags", (V311, V5), h("58 02 00 01"), 0x81),
        ("PUBCOMP flags", (V311, V5), h("72 02 00 01"), 0x81),
        ("SUBSCRIBE flags 0000", (V311, V5), b"\x80" + pkt(0x82, h("00 01") + s16(b"t") + b"\x00")[1:], 0x81),
        ("SUBSCRIBE flags 0011", (V311,), b"\x83" + pkt(0x82, h("00 01") + s16(b"t") + b"\x00")[1:], 0x81),
        ("SUBACK flags", (V311, V5), h("92 03 00 01 00"), 0x81),
        ("UNSUBSCRIBE flags 0000", (V311,), b"\xA0" + pkt(0xA2, h("00 01") + s16(b"t"))[1:], 0x81),
        ("UNSUBACK flags", (V311,), h("B1 02 00 01"), 0x81),
        ("PINGREQ flags", (V311, V5), h("C1 00"), 0x81),
        ("PINGRESP flags", (V311, V5), h("D8 00"), 0x81),
        ("DISCONNECT flags", (V311, V5), h("E2 00"), 0x81),
        ("AUTH flags", (V5,), h("F1 00"), 0x81),
    ])
    # MQTT 3.1 leaves these bits unused: ignored on receipt
    accepted([("PINGREQ flags (3.1)", (V31,), h("C1 00")), ("CONNECT flags (3.1)", (V31,),
              b"\x1F" + connect(b"MQIsdp", 3, 0x02, s16(b"c"))[1:])])


def test_publish_fixed_header():
    refused([
        ("QoS 3", ALL, pkt(0x36, s16(b"t") + h("00 01") + b"x"), 0x81),
        ("QoS 3 + DUP + RETAIN", ALL, pkt(0x3F, s16(b"t") + h("00 01")), 0x81),
        ("DUP on QoS 0", ALL, pkt(0x38, s16(b"t") + b"x"), 0x81),
        ("DUP on QoS 0, retained", ALL, pkt(0x39, s16(b"t")), 0x81),
    ])


def test_packet_identifier_zero():
    refused([
        ("PUBLISH QoS 1 pid 0", V3X, pkt(0x32, s16(b"t") + h("00 00") + b"x"), 0x81),
        ("PUBLISH QoS 2 pid 0", (V5,), pkt(0x34, s16(b"t") + h("00 00 00")), 0x81),
        ("PUBACK pid 0", ALL, h("40 02 00 00"), 0x81),
        ("PUBREC pid 0", ALL, h("50 02 00 00"), 0x81),
        ("PUBREL pid 0", ALL, h("62 02 00 00"), 0x81),
        ("PUBCOMP pid 0", ALL, h("70 02 00 00"), 0x81),
        ("SUBSCRIBE pid 0", V3X, pkt(0x82, h("00 00") + s16(b"t") + b"\x01"), 0x81),
        ("SUBSCRIBE pid 0 (5)", (V5,), pkt(0x82, h("00 00 00") + s16(b"t") + b"\x01"), 0x81),
        ("UNSUBSCRIBE pid 0", V3X, pkt(0xA2, h("00 00") + s16(b"t")), 0x81),
        ("SUBACK pid 0", V3X, h("90 03 00 00 00"), 0x81),
        ("UNSUBACK pid 0", V3X, h("B0 02 00 00"), 0x81),
    ])


def test_remaining_length():
    refused([
        ("5-byte RL", ALL, h("30 80 80 80 80 01"), 0x81),
        ("5-byte RL of ones", ALL, h("30 FF FF FF FF 7F"), 0x81),
        ("RL ends inside its own bytes", ALL, h("30 80"), 0x81),
        ("no RL at all", ALL, h("C0"), 0x81),
        ("empty input", ALL, b"", 0x81),
        ("RL larger than the bytes", ALL, h("40 03 00 01"), 0x81),
        ("RL larger than the bytes (PUBLISH)", ALL, h("30 0A 00 01 74 78"), 0x81),
        ("RL smaller than the bytes", ALL, h("40 01 00 01"), 0x81),
        ("RL 0 with a trailing byte", ALL, h("C0 00 00"), 0x81),
        ("RL in non-minimal form with extra bytes", ALL, h("C0 80 00 00"), 0x81),
        # RL agrees with the bytes present but not with what the packet needs
        ("PUBACK body too short", ALL, h("40 01 00"), 0x81),
        ("PUBACK body too long (3.x)", V3X, h("40 03 00 01 00"), 0x81),
        ("PUBLISH without a full topic length", ALL, h("30 01 00"), 0x81),
        ("CONNACK too short", ALL, h("20 01 00"), 0x81),
        ("CONNACK too long (3.x)", V3X, h("20 03 00 00 00"), 0x81),
        ("PINGREQ with a body", ALL, h("C0 01 00"), 0x81),
        ("PINGRESP with a body", ALL, h("D0 02 00 00"), 0x81),
        ("DISCONNECT with a body in 3.x", V3X, h("E0 01 00"), 0x81),
        ("UNSUBACK with a code in 3.x", V3X, h("B0 03 00 01 00"), 0x81),
        ("v5 ack with bytes after its properties", (V5,), h("40 05 00 01 00 00 00"), 0x81),
        ("v5 DISCONNECT with bytes after its properties", (V5,), h("E0 03 00 00 00"), 0x81),
    ])


def test_truncated_fields():
    refused([
        ("topic runs past the end", ALL, h("30 03 00 05 74"), 0x81),
        ("topic length 1 byte", ALL, h("30 01 00"), 0x81),
        ("QoS 1 PUBLISH without its pid", V3X, pkt(0x32, s16(b"t")), 0x81),
        ("QoS 1 PUBLISH with half a pid", V3X, pkt(0x32, s16(b"t") + b"\x00"), 0x81),
        ("v5 PUBLISH without a property length", (V5,), pkt(0x30, s16(b"t")), 0x81),
        ("filter runs past the end", V3X, h("82 05 00 01 00 03 61"), 0x81),
        ("filter without options", V3X, pkt(0x82, h("00 01") + s16(b"t")), 0x81),
        ("second filter without options", V3X, pkt(0x82, h("00 01") + s16(b"t") + b"\x01" + s16(b"u")), 0x81),
        ("UNSUBSCRIBE filter truncated", V3X, pkt(0xA2, h("00 01 00 05 61")), 0x81),
        ("protocol name truncated", ALL, h("10 03 00 04 4D"), 0x81),
        ("CONNECT without keep alive", ALL, pkt(0x10, s16(b"MQTT") + h("04 02 00")), 0x81),
        ("CONNECT without client id", V3X, pkt(0x10, s16(b"MQTT") + h("04 02 00 3C")), 0x81),
        ("CONNECT without will topic", V3X, connect(b"MQTT", 4, 0x06, s16(b"c")), 0x81),
        ("CONNECT without will message", V3X, connect(b"MQTT", 4, 0x06, s16(b"c") + s16(b"w")), 0x81),
        ("CONNECT will message truncated", V3X, connect(b"MQTT", 4, 0x06, s16(b"c") + s16(b"w") + h("00 05 61")),
         0x81),
        ("CONNECT without user name", V3X, connect(b"MQTT", 4, 0x82, s16(b"c")), 0x81),
        ("CONNECT without password", V3X, connect(b"MQTT", 4, 0xC2, s16(b"c") + s16(b"u")), 0x81),
        ("v5 CONNECT without properties", (V5,), connect(b"MQTT", 5, 0x02, b""), 0x81),
        ("v5 CONNECT without will properties", (V5,), connect(b"MQTT", 5, 0x06, b"\x00" + s16(b"c")), 0x81),
        ("property length past the end", (V5,), h("20 04 00 00 05 1F"), 0x81),
        ("property length VBI truncated", (V5,), h("20 03 00 00 80"), 0x81),
        ("property string runs past the property length", (V5,), h("20 08 00 00 02 1F 00 02 61 62"), 0x81),
        ("property value truncated", (V5,), h("20 05 00 00 02 21 00"), 0x81),
        ("u32 property truncated", (V5,), h("20 06 00 00 03 11 00 00"), 0x81),
        ("user property without its value", (V5,), pkt(0x20, h("00 00 04 26 00 01 6B")), 0x81),
        ("property id VBI truncated", (V5,), h("20 04 00 00 01 80"), 0x81),
        ("reason string length past the end", (V5,), h("40 07 00 01 80 03 1F 00 05"), 0x81),
        ("binary property truncated", (V5,), h("F0 06 18 04 16 00 05 01"), 0x81),
    ])


def test_duplicate_properties():
    refused([
        ("PUBLISH Message Expiry twice", (V5,),
         pkt(0x30, s16(b"t") + props(h("02 00 00 00 01"), h("02 00 00 00 02"))), 0x82),
        ("PUBLISH Topic Alias twice", (V5,), pkt(0x30, s16(b"t") + props(h("23 00 01"), h("23 00 02"))), 0x82),
        ("PUBLISH Payload Format twice", (V5,), pkt(0x30, s16(b"t") + props(h("01 00"), h("01 00"))), 0x82),
        ("CONNACK Receive Maximum twice", (V5,), pkt(0x20, h("00 00") + props(h("21 00 01"), h("21 00 02"))), 0x82),
        ("CONNACK Maximum QoS twice", (V5,), pkt(0x20, h("00 00") + props(h("24 00"), h("24 00"))), 0x82),
        ("CONNACK Assigned Client Id twice", (V5,),
         pkt(0x20, h("00 00") + props(h("12 00 01 61"), h("12 00 01 62"))), 0x82),
        ("SUBSCRIBE Subscription Identifier twice", (V5,),
         pkt(0x82, h("00 01") + props(h("0B 01"), h("0B 02")) + s16(b"t") + b"\x00"), 0x82),
        ("PUBACK Reason String twice", (V5,),
         pkt(0x40, h("00 01 00") + props(h("1F 00 01 61"), h("1F 00 01 62"))), 0x82),
        ("DISCONNECT Session Expiry twice", (V5,),
         pkt(0xE0, h("00") + props(h("11 00 00 00 00"), h("11 00 00 00 00"))), 0x82),
        ("AUTH Authentication Method twice", (V5,),
         pkt(0xF0, h("18") + props(h("15 00 01 61"), h("15 00 01 61"))), 0x82),
        ("CONNECT Session Expiry twice", (V5,),
         connect(b"MQTT", 5, 0x02, props(h("11 00 00 00 01"), h("11 00 00 00 01")) + s16(b"c")), 0x82),
        ("Will Delay Interval twice", (V5,),
         connect(b"MQTT", 5, 0x06, b"\x00" + s16(b"c") + props(h("18 00 00 00 01"), h("18 00 00 00 01"))
                 + s16(b"w") + s16(b"m")), 0x82),
    ])
    # User Property may repeat anywhere, Subscription Identifier in PUBLISH
    accepted([
        ("User Property twice", (V5,), pkt(0x40, h("00 01 00") + props(h("26 00 00 00 00"), h("26 00 00 00 00")))),
        ("Subscription Identifier twice in PUBLISH", (V5,), pkt(0x30, s16(b"t") + props(h("0B 01"), h("0B 01")))),
    ])


def test_properties_not_allowed_in_packet():
    refused([
        ("Session Expiry in PUBLISH", (V5,), pkt(0x30, s16(b"t") + props(h("11 00 00 00 01"))), 0x81),
        ("Topic Alias in CONNACK", (V5,), pkt(0x20, h("00 00") + props(h("23 00 01"))), 0x81),
        ("Message Expiry in PUBACK", (V5,), pkt(0x40, h("00 01 00") + props(h("02 00 00 00 01"))), 0x81),
        ("Subscription Identifier in UNSUBSCRIBE", (V5,), pkt(0xA2, h("00 01") + props(h("0B 01")) + s16(b"t")),
         0x81),
        ("Session Expiry in AUTH", (V5,), pkt(0xF0, h("18") + props(h("11 00 00 00 01"))), 0x81),
        ("Will Delay Interval in CONNECT properties", (V5,),
         connect(b"MQTT", 5, 0x02, props(h("18 00 00 00 01")) + s16(b"c")), 0x81),
        ("Session Expiry in will properties", (V5,),
         connect(b"MQTT", 5, 0x06, b"\x00" + s16(b"c") + props(h("11 00 00 00 01")) + s16(b"w") + s16(b"m")), 0x81),
        ("Topic Alias in will properties", (V5,),
         connect(b"MQTT", 5, 0x06, b"\x00" + s16(b"c") + props(h("23 00 01")) + s16(b"w") + s16(b"m")), 0x81),
        ("Server Reference in PUBREL", (V5,), pkt(0x62, h("00 01 00") + props(h("1C 00 01 61"))), 0x81),
        ("Authentication Method in DISCONNECT", (V5,), pkt(0xE0, h("00") + props(h("15 00 01 61"))), 0x81),
        ("Receive Maximum in SUBACK", (V5,), pkt(0x90, h("00 01") + props(h("21 00 01")) + b"\x00"), 0x81),
        ("Assigned Client Id in CONNECT", (V5,), connect(b"MQTT", 5, 0x02, props(h("12 00 01 61")) + s16(b"c")),
         0x81),
        ("Maximum QoS in PUBLISH", (V5,), pkt(0x30, s16(b"t") + props(h("24 01"))), 0x81),
    ])


def test_unknown_property_identifiers():
    cases = []
    for pid in (0x00, 0x04, 0x05, 0x0A, 0x0C, 0x10, 0x14, 0x1B, 0x1D, 0x1E, 0x20, 0x2B, 0x7F):
        cases.append(("property 0x%02X in PUBLISH" % pid, (V5,), pkt(0x30, s16(b"t") + props(bytes([pid, 0]))),
                      0x81))
        cases.append(("property 0x%02X in CONNACK" % pid, (V5,), pkt(0x20, h("00 00") + props(bytes([pid, 0]))),
                      0x81))
    cases.append(("property id as a two-byte VBI (128)", (V5,), pkt(0x30, s16(b"t") + props(h("80 01 00"))), 0x81))
    refused(cases)


def test_property_values_zero_and_bool():
    refused([
        ("CONNACK Receive Maximum 0", (V5,), pkt(0x20, h("00 00") + props(h("21 00 00"))), 0x82),
        ("CONNECT Receive Maximum 0", (V5,), connect(b"MQTT", 5, 0x02, props(h("21 00 00")) + s16(b"c")), 0x82),
        ("CONNACK Maximum Packet Size 0", (V5,), pkt(0x20, h("00 00") + props(h("27 00 00 00 00"))), 0x82),
        ("CONNECT Maximum Packet Size 0", (V5,),
         connect(b"MQTT", 5, 0x02, props(h("27 00 00 00 00")) + s16(b"c")), 0x82),
        ("SUBSCRIBE Subscription Identifier 0", (V5,),
         pkt(0x82, h("00 01") + props(h("0B 00")) + s16(b"t") + b"\x00"), 0x82),
        ("PUBLISH Subscription Identifier 0", (V5,), pkt(0x30, s16(b"t") + props(h("0B 00"))), 0x82),
        ("CONNACK Retain Available 2", (V5,), pkt(0x20, h("00 00") + props(h("25 02"))), 0x82),
        ("CONNACK Maximum QoS 2", (V5,), pkt(0x20, h("00 00") + props(h("24 02"))), 0x82),
        ("CONNACK Wildcard Subscription Available 2", (V5,), pkt(0x20, h("00 00") + props(h("28 02"))), 0x82),
        ("CONNACK Subscription Identifiers Available 255", (V5,), pkt(0x20, h("00 00") + props(h("29 FF"))), 0x82),
        ("CONNACK Shared Subscription Available 2", (V5,), pkt(0x20, h("00 00") + props(h("2A 02"))), 0x82),
        ("PUBLISH Payload Format Indicator 2", (V5,), pkt(0x30, s16(b"t") + props(h("01 02"))), 0x82),
        ("CONNECT Request Problem Information 2", (V5,), connect(b"MQTT", 5, 0x02, props(h("17 02")) + s16(b"c")),
         0x82),
        ("CONNECT Request Response Information 2", (V5,),
         connect(b"MQTT", 5, 0x02, props(h("19 02")) + s16(b"c")), 0x82),
    ])
    accepted([
        ("Receive Maximum 1", (V5,), pkt(0x20, h("00 00") + props(h("21 00 01")))),
        ("Maximum Packet Size 1", (V5,), pkt(0x20, h("00 00") + props(h("27 00 00 00 01")))),
        ("Session Expiry 0", (V5,), pkt(0x20, h("00 00") + props(h("11 00 00 00 00")))),
        ("Topic Alias Maximum 0", (V5,), pkt(0x20, h("00 00") + props(h("22 00 00")))),
        ("Maximum QoS 0", (V5,), pkt(0x20, h("00 00") + props(h("24 00")))),
        ("Subscription Identifier 268435455", (V5,), pkt(0x30, s16(b"t") + props(h("0B FF FF FF 7F")))),
    ])


BAD_UTF8 = (
    ("overlong NUL C0 80", "C0 80"),
    ("overlong C1 BF", "C1 BF"),
    ("overlong 3-byte E0 80 80", "E0 80 80"),
    ("overlong 3-byte E0 9F BF", "E0 9F BF"),
    ("overlong 4-byte F0 80 80 80", "F0 80 80 80"),
    ("overlong 4-byte F0 8F BF BF", "F0 8F BF BF"),
    ("surrogate U+D800 ED A0 80", "ED A0 80"),
    ("surrogate U+DFFF ED BF BF", "ED BF BF"),
    ("surrogate pair ED A0 BD ED B8 80", "ED A0 BD ED B8 80"),
    ("U+0000", "00"),
    ("U+0000 inside", "61 00 62"),
    ("truncated 2-byte", "C3"),
    ("truncated 3-byte", "E2 82"),
    ("truncated 4-byte", "F0 9F 98"),
    ("truncated before ASCII", "E2 82 61"),
    ("lead byte FF", "FF"),
    ("lead byte FE", "61 FE"),
    ("lone continuation 80", "80"),
    ("lone continuation BF", "61 BF 62"),
    ("bad continuation C3 28", "C3 28"),
    ("bad continuation E2 28 A1", "E2 28 A1"),
    ("bad continuation F0 9F 28 80", "F0 9F 28 80"),
    ("beyond U+10FFFF F4 90 80 80", "F4 90 80 80"),
    ("beyond U+10FFFF F5 80 80 80", "F5 80 80 80"),
    ("beyond U+10FFFF F7 BF BF BF", "F7 BF BF BF"),
    ("5-byte form F8 88 80 80 80", "F8 88 80 80 80"),
)


def test_invalid_utf8():
    cases = []
    for label, x in BAD_UTF8:
        raw = h(x)
        cases.append(("topic: " + label, ALL, pkt(0x30, s16(raw)), 0x81))
        cases.append(("v5 topic: " + label, (V5,), pkt(0x30, s16(raw) + b"\x00"), 0x81))
        cases.append(("filter: " + label, V3X, pkt(0x82, h("00 01") + s16(raw) + b"\x00"), 0x81))
        cases.append(("unsubscribe filter: " + label, V3X, pkt(0xA2, h("00 01") + s16(raw)), 0x81))
        cases.append(("client id: " + label, (V311,), connect(b"MQTT", 4, 0x02, s16(raw)), 0x81))
        cases.append(("will topic: " + label, (V311,),
                      connect(b"MQTT", 4, 0x06, s16(b"c") + s16(raw) + s16(b"m")), 0x81))
        cases.append(("user name: " + label, (V311,), connect(b"MQTT", 4, 0x82, s16(b"c") + s16(raw)), 0x81))
        cases.append(("reason string: " + label, (V5,), pkt(0x40, h("00 01 80") + props(b"\x1F" + s16(raw))), 0x81))
        cases.append(("user property name: " + label, (V5,),
                      pkt(0x20, h("00 00") + props(b"\x26" + s16(raw) + s16(b"v"))), 0x81))
        cases.append(("user property value: " + label, (V5,),
                      pkt(0x20, h("00 00") + props(b"\x26" + s16(b"k") + s16(raw))), 0x81))
        cases.append(("content type: " + label, (V5,), pkt(0x30, s16(b"t") + props(b"\x03" + s16(raw))), 0x81))
    refused(cases)
    # but binary fields carry any bytes, and the payload is never checked
    accepted([
        ("correlation data", (V5,), pkt(0x30, s16(b"t") + props(b"\x09" + s16(h("FF 00 ED A0 80"))))),
        ("password", (V311,), connect(b"MQTT", 4, 0xC2, s16(b"c") + s16(b"u") + s16(h("FF 00 C0 80")))),
        ("will message", (V311,), connect(b"MQTT", 4, 0x06, s16(b"c") + s16(b"w") + s16(h("FF 00")))),
        ("payload", V3X, pkt(0x30, s16(b"t") + h("FF 00 ED A0 80"))),
        ("payload (5)", (V5,), pkt(0x30, s16(b"t") + h("00 FF 00 ED A0 80"))),
        ("U+10FFFF and U+FFFF", V3X, pkt(0x30, s16(h("F4 8F BF BF EF BF BF")))),
    ])


def test_topic_name_rules():
    refused([
        ("wildcard +", ALL, pkt(0x30, s16(b"a/+")), 0x90),
        ("wildcard #", ALL, pkt(0x30, s16(b"#")), 0x90),
        ("wildcard a/#", ALL, pkt(0x30, s16(b"a/#") + b"payload"), 0x90),
        ("wildcard + alone, QoS 1", V3X, pkt(0x32, s16(b"+") + h("00 01")), 0x90),
        ("wildcard in v5", (V5,), pkt(0x30, s16(b"a/+/b") + b"\x00"), 0x90),
        ("empty topic (3.x)", V3X, pkt(0x30, s16(b"") + b"x"), 0x82),
        ("empty topic without alias (5)", (V5,), pkt(0x30, s16(b"") + b"\x00x"), 0x82),
        ("empty topic, other properties (5)", (V5,), pkt(0x30, s16(b"") + props(h("02 00 00 00 01"))), 0x82),
    ])
    accepted([("empty topic with alias", (V5,), pkt(0x30, s16(b"") + props(h("23 00 01"))))])


def test_subscribe_rules():
    def sub(v, opts, p=b""):
        return pkt(0x82, h("00 01") + (props() if v == V5 and not p else p) + s16(b"a/b") + bytes([opts]))
    refused([
        ("SUBSCRIBE without filters", V3X, h("82 02 00 01"), 0x82),
        ("SUBSCRIBE without filters (5)", (V5,), h("82 03 00 01 00"), 0x82),
        ("SUBSCRIBE with properties only", (V5,), pkt(0x82, h("00 01") + props(h("0B 01"))), 0x82),
        ("UNSUBSCRIBE without filters", V3X, h("A2 02 00 01"), 0x82),
        ("UNSUBSCRIBE without filters (5)", (V5,), h("A2 03 00 01 00"), 0x82),
        ("QoS 3 (3.x)", V3X, sub(V311, 0x03), 0x81),
        ("reserved bit 2 (3.x)", V3X, sub(V311, 0x04), 0x81),
        ("reserved bit 7 (3.x)", V3X, sub(V311, 0x80), 0x81),
        ("v5 options in 3.1.1", V3X, sub(V311, 0x2D), 0x81),
        ("QoS 3 (5)", (V5,), sub(V5, 0x03), 0x82),
        ("reserved bit 6 (5)", (V5,), sub(V5, 0x40), 0x81),
        ("reserved bit 7 (5)", (V5,), sub(V5, 0x81), 0x81),
        ("retain handling 3 (5)", (V5,), sub(V5, 0x30), 0x82),
        ("retain handling 3 with QoS 1 (5)", (V5,), sub(V5, 0x31), 0x82),
    ])
    accepted([("every v5 option", (V5,), sub(V5, 0x2E)), ("QoS 2 (3.x)", V3X, sub(V311, 0x02))])


def test_reason_codes_not_allowed():
    cases = [
        ("PUBACK 0x92", (V5,), h("40 03 00 01 92"), 0x82),
        ("PUBACK 0x01", (V5,), h("40 03 00 01 01"), 0x82),
        ("PUBREC 0x92", (V5,), h("50 03 00 01 92"), 0x82),
        ("PUBREL 0x10", (V5,), h("62 03 00 01 10"), 0x82),
        ("PUBREL 0x80", (V5,), h("62 04 00 01 80 00"), 0x82),
        ("PUBCOMP 0x87", (V5,), h("70 03 00 01 87"), 0x82),
        ("SUBACK 0x03", (V5,), h("90 04 00 01 00 03"), 0x82),
        ("SUBACK 0x11 after a good one", (V5,), h("90 05 00 01 00 00 11"), 0x82),
        ("SUBACK 0x80 in 3.1", (V31,), h("90 03 00 01 80"), 0x82),
        ("SUBACK 0x03 in 3.1.1", (V311,), h("90 03 00 01 03"), 0x82),
        ("SUBACK 0x8F in 3.1.1", (V311,), h("90 03 00 01 8F"), 0x82),
        ("UNSUBACK 0x01", (V5,), h("B0 04 00 01 00 01"), 0x82),
        ("DISCONNECT 0x01", (V5,), h("E0 01 01"), 0x82),
        ("DISCONNECT 0x18", (V5,), h("E0 01 18"), 0x82),
        ("AUTH 0x01", (V5,), h("F0 01 01"), 0x82),
        ("AUTH 0x80", (V5,), h("F0 02 80 00"), 0x82),
        ("CONNACK 0x01", (V5,), h("20 03 00 01 00"), 0x82),
        ("CONNACK 0x10", (V5,), h("20 03 00 10 00"), 0x82),
        ("CONNACK return code 6 (3.1.1)", (V311,), h("20 02 00 06"), 0x81),
        ("CONNACK return code 0x80 (3.1)", (V31,), h("20 02 00 80"), 0x81),
        ("SUBACK without codes", V3X, h("90 02 00 01"), 0x82),
        ("SUBACK without codes (5)", (V5,), h("90 03 00 01 00"), 0x82),
        ("UNSUBACK without codes (5)", (V5,), h("B0 03 00 01 00"), 0x82),
    ]
    refused(cases)


def test_connack_rules():
    refused([
        ("CONNACK reserved flag bit 1", (V311, V5), pkt(0x20, h("02 00") + (b"")), 0x81),
        ("CONNACK reserved flag bit 7 (3.1.1)", (V311,), h("20 02 80 00"), 0x81),
        ("CONNACK reserved flag bits (5)", (V5,), h("20 03 FE 00 00"), 0x81),
        ("CONNACK refused with session present (3.1.1)", (V311,), h("20 02 01 05"), 0x82),
        ("CONNACK refused with session present (5)", (V5,), h("20 03 01 87 00"), 0x82),
        ("v5 CONNACK without properties", (V5,), h("20 02 00 00"), 0x81),
    ])


def test_packet_types():
    refused([
        ("AUTH in 3.1.1", V3X, h("F0 00"), 0x81),
        ("AUTH with a body in 3.1.1", V3X, h("F0 02 18 00"), 0x81),
        ("packet type 0", ALL, h("00 00"), 0x81),
        ("packet type 0 with flags and a body", ALL, h("0F 02 00 01"), 0x81),
    ])


def test_connect_rules():
    cases = []
    for name, level in ((b"MQTT", 6), (b"MQTT", 3), (b"MQTT", 0), (b"MQTT", 0x84), (b"MQIsdp", 4), (b"MQIsdp", 5),
                        (b"MQTX", 4), (b"mqtt", 4), (b"MQTT ", 4), (b"", 4)):
        body = s16(b"c") if level != 5 else b"\x00" + s16(b"c")
        cases.append(("protocol %r level %d" % (name, level), ALL, connect(name, level, 0x02, body), 0x84))
    cases += [
        ("protocol name with U+0000", ALL, connect(b"MQTT\x00", 4, 0x02, s16(b"c")), 0x81),
        ("password without user name (3.1.1)", (V311,), connect(b"MQTT", 4, 0x42, s16(b"c") + s16(b"p")), 0x81),
        ("password without user name (3.1)", (V31,), connect(b"MQIsdp", 3, 0x42, s16(b"c") + s16(b"p")), 0x81),
        ("will QoS 3 (3.1.1)", (V311,), connect(b"MQTT", 4, 0x1E, s16(b"c") + s16(b"w") + s16(b"m")), 0x81),
        ("will QoS 3 (5)", (V5,), connect(b"MQTT", 5, 0x1E, b"\x00" + s16(b"c") + b"\x00" + s16(b"w") + s16(b"m")),
         0x81),
        ("will QoS without will flag", (V311,), connect(b"MQTT", 4, 0x0A, s16(b"c")), 0x81),
        ("will retain without will flag", (V311,), connect(b"MQTT", 4, 0x22, s16(b"c")), 0x81),
        ("reserved connect flag bit 0 (3.1.1)", (V311,), connect(b"MQTT", 4, 0x03, s16(b"c")), 0x81),
        ("reserved connect flag bit 0 (5)", (V5,), connect(b"MQTT", 5, 0x01, b"\x00" + s16(b"c")), 0x81),
        ("trailing bytes after CONNECT payload", (V311,), connect(b"MQTT", 4, 0x02, s16(b"c") + b"\x00"), 0x81),
    ]
    refused(cases)
    accepted([("password without user name (5)", (V5,), connect(b"MQTT", 5, 0x42, b"\x00" + s16(b"c") + s16(b"p")))])


def test_only_remote_protocol_errors_escape():
    # whatever is thrown at decode() is either decoded or refused with a RemoteProtocolError
    seeds = [PUB0, CONNECT4, CONNECT5, h("20 03 00 00 00"), h("90 05 00 01 00 01 02"), h("E0 01 04")]
    for s in seeds:
        for cut in range(len(s) + 1):
            for v in ALL:
                try:
                    decode(s[:cut], v)
                except RemoteProtocolError:
                    pass
            for i in range(cut):
                for x in (0x00, 0x7F, 0x80, 0xFF):
                    b = bytearray(s[:cut])
                    b[i] = x
                    for v in ALL:
                        try:
                            decode(memoryview(b), v)
                        except RemoteProtocolError:
                            pass


# ---------------------------------------------------------------- the encode side: LocalProtocolError

def test_encode_buffer_too_small():
    raises(LocalProtocolError, 0x95, encode, bytearray(3), Packet(K.PUBACK, pid=1), V311)
    raises(LocalProtocolError, 0x95, encode, bytearray(0), Packet(K.PINGREQ), V311)
    raises(LocalProtocolError, 0x95, encode_publish, bytearray(6), V311, b"a/b", b"")
    raises(LocalProtocolError, 0x95, encode_publish, bytearray(100), V5, b"a/b", bytes(100))
    raises(LocalProtocolError, 0x95, encode, bytearray(10), Packet(K.CONNECT, client_id="c"), V311)


def test_encode_publish_arguments():
    buf = bytearray(64)
    raises(LocalProtocolError, 0x81, encode_publish, buf, V311, b"t", b"", 1)  # QoS 1 without a pid
    raises(LocalProtocolError, 0x81, encode_publish, buf, V5, b"t", b"", 2, False, False, 0)
    raises(LocalProtocolError, 0x81, encode_publish, buf, V5, b"t", b"", 1, False, False, 65536)
    raises(LocalProtocolError, 0x81, encode_publish, buf, V5, b"t", b"", 3, False, False, 1)
    raises(LocalProtocolError, 0x81, encode_publish, buf, V5, b"t", b"", -1)
    raises(LocalProtocolError, 0x81, encode_publish, buf, V5, b"t", b"", 0, False, True)  # DUP at QoS 0
    raises(LocalProtocolError, 0x81, encode, buf, Packet(K.PUBLISH, topic="t", qos=1), V311)
    raises(LocalProtocolError, 0x82, encode_publish, buf, V311, b"t", b"", 0, False, False, 0, None, 1)  # alias
    raises(LocalProtocolError, 0x82, encode_publish, buf, V31, b"", b"", 0, False, False, 0, None, 5)


def test_encode_strings():
    big = "x" * 65536
    raises(LocalProtocolError, 0x95, encode, bytearray(16), Packet(K.CONNECT, client_id=big), V311)
    raises(LocalProtocolError, 0x95, encode, bytearray(16), Packet(K.SUBSCRIBE, pid=1, topics=[(big, 0)]), V311)
    raises(LocalProtocolError, 0x95, encode, bytearray(16), Packet(K.PUBACK, pid=1, reason=0x80,
                                                                   props={0x1F: big}), V5)
    raises(LocalProtocolError, 0x95, encode, bytearray(16),
           Packet(K.CONNECT, client_id="c", username="u", password=bytes(65536)), V311)
    # a 65536-byte topic refused even when the buffer could hold it
    e = raises(LocalProtocolError, 0x95, encode_publish, bytearray(65600), V311, bytes(65536), b"")
    assert "65535" in e.msg, e.msg
    e = raises(LocalProtocolError, 0x95, encode_publish, bytearray(65600), V311, big, b"")
    assert "65535" in e.msg, e.msg
    # 65535 bytes is the largest string that fits
    assert encode_publish(bytearray(65600), V311, bytes(65535), b"") == 65541


def test_encode_nul_in_strings():
    buf = bytearray(64)
    raises(LocalProtocolError, 0x81, encode_publish, buf, V311, "a\x00b", b"")
    raises(LocalProtocolError, 0x81, encode_publish, buf, V5, "\x00", b"")
    raises(LocalProtocolError, 0x81, encode, buf, Packet(K.PUBLISH, topic="a/\x00"), V5)
    raises(LocalProtocolError, 0x81, encode, buf, Packet(K.CONNECT, client_id="c\x00"), V311)
    raises(LocalProtocolError, 0x81, encode, buf, Packet(K.SUBSCRIBE, pid=1, topics=[("a\x00", 0)]), V311)
    raises(LocalProtocolError, 0x81, encode, buf, Packet(K.UNSUBSCRIBE, pid=1, topics=["\x00"]), V5)
    raises(LocalProtocolError, 0x81, encode, buf, Packet(K.PUBACK, pid=1, props={0x26: [("k", "\x00")]}), V5)


def test_encode_packet_rules():
    buf = bytearray(256)
    raises(LocalProtocolError, 0x82, encode, buf, Packet(K.AUTH), V311)
    raises(LocalProtocolError, 0x82, encode, buf, Packet(K.AUTH, reason=0x18), V31)
    raises(LocalProtocolError, 0x82, encode, buf, Packet(0), V5)
    raises(LocalProtocolError, 0x82, encode, buf, Packet(16), V5)
    raises(LocalProtocolError, 0x85, encode, buf, Packet(K.CONNECT, client_id=""), V31)
    raises(LocalProtocolError, 0x85, encode, buf, Packet(K.CONNECT, client_id="x" * 24), V31)
    assert encode(buf, Packet(K.CONNECT, client_id="x" * 23), V31) == 2 + 12 + 25
    raises(LocalProtocolError, 0x81, encode, buf, Packet(K.CONNECT, client_id="c", password=b"p"), V311)
    raises(LocalProtocolError, 0x81, encode, buf, Packet(K.CONNECT, client_id="c", keepalive=65536), V311)
    raises(LocalProtocolError, 0x81, encode, buf, Packet(K.CONNECT, client_id="c", keepalive=-1), V5)
    raises(LocalProtocolError, 0x81, encode, buf,
           Packet(K.CONNECT, client_id="c", will=Packet(K.PUBLISH, topic="w", qos=3)), V311)
    for t in (K.PUBACK, K.PUBREC, K.PUBREL, K.PUBCOMP, K.SUBACK, K.UNSUBACK):
        raises(LocalProtocolError, 0x81, encode, buf, Packet(t, codes=[0]), V5)
        raises(LocalProtocolError, 0x81, encode, buf, Packet(t, pid=65536, codes=[0]), V311)
    raises(LocalProtocolError, 0x81, encode, buf, Packet(K.SUBSCRIBE, topics=[("t", 0)]), V311)
    raises(LocalProtocolError, 0x82, encode, buf, Packet(K.SUBSCRIBE, pid=1, topics=[]), V311)
    raises(LocalProtocolError, 0x82, encode, buf, Packet(K.UNSUBSCRIBE, pid=1), V5)
    # properties the packet may not carry, and values that do not fit their type
    raises(LocalProtocolError, 0x81, encode, buf, Packet(K.CONNACK, props={0x23: 1}), V5)
    raises(LocalProtocolError, 0x81, encode, buf, Packet(K.PUBLISH, topic="t", props={0x11: 1}), V5)
    raises(LocalProtocolError, 0x81, encode, buf, Packet(K.PUBACK, pid=1, props={0x99: 1}), V5)
    raises(LocalProtocolError, 0x95, encode, buf, Packet(K.SUBSCRIBE, pid=1, topics=[("t", 0)],
                                                         props={0x0B: 268435456}), V5)


def test_encode_error_is_local():
    # the encode side never raises RemoteProtocolError, and both are MQTTError
    try:
        encode(bytearray(1), Packet(K.PUBACK, pid=1), V311)
    except RemoteProtocolError:
        raise AssertionError("encode raised RemoteProtocolError")
    except LocalProtocolError as e:
        assert isinstance(e, MQTTError) and e.reason == 0x95 and "0x95" in str(e)


def test_encode_values_out_of_range():
    # refused with LocalProtocolError alike on CPython (whose bytearray would raise ValueError) and on
    # MicroPython (whose bytearray would silently keep the low byte)
    buf = bytearray(64)
    raises(LocalProtocolError, 0x81, encode, buf, Packet(K.PUBACK, pid=1, reason=0x100), V5)
    raises(LocalProtocolError, 0x81, encode, buf, Packet(K.DISCONNECT, reason=-1), V5)
    raises(LocalProtocolError, 0x81, encode, buf, Packet(K.CONNACK, reason=256), V311)
    raises(LocalProtocolError, 0x81, encode, buf, Packet(K.SUBACK, pid=1, codes=[1, 0x102]), V311)
    raises(LocalProtocolError, 0x81, encode, buf, Packet(K.SUBSCRIBE, pid=1, topics=[("t", 0x100)]), V5)
    raises(LocalProtocolError, 0x81, encode, buf, Packet(K.CONNACK, props={0x21: 65536}), V5)
    raises(LocalProtocolError, 0x81, encode, buf, Packet(K.CONNACK, props={0x13: -1}), V5)
    raises(LocalProtocolError, 0x81, encode, buf, Packet(K.CONNACK, props={0x11: 1 << 32}), V5)
    raises(LocalProtocolError, 0x81, encode, buf, Packet(K.PUBLISH, topic="t", props={0x23: 65536}), V5)
    raises(LocalProtocolError, 0x82, encode, buf, Packet(K.CONNACK, props={0x25: 2}), V5)
    raises(LocalProtocolError, 0x82, encode, buf, Packet(K.PUBLISH, topic="t", props={0x01: 2}), V5)
    raises(LocalProtocolError, 0x81, encode_publish, buf, V5, b"", b"", 0, False, False, 0, None, 65536)
    # (a negative alias is one the server has, sent alone: -65536 is out of range as 65536 is)
    raises(LocalProtocolError, 0x81, encode_publish, buf, V5, b"t", b"", 0, False, False, 0, None, -65536)
    assert encode_publish(buf, V5, b"t", b"", 0, False, False, 0, None, -7) == 8  # alias 7 alone, no topic
    assert buf[:8] == b"\x30\x06\x00\x00\x03\x23\x00\x07"
    # the largest values that fit are written
    assert encode(buf, Packet(K.CONNACK, props={0x11: 0xFFFFFFFF, 0x21: 65535}), V5) == 2 + 3 + 5 + 3
    assert encode_publish(buf, V5, b"", b"", 0, False, False, 0, None, 65535) == 8
