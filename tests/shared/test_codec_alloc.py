# The hot path allocates nothing: encode_publish into a preallocated bytearray with a bytes topic and a bytes
# payload, at QoS 0, 1 and 2, in 3.1.1 and 5 (and 5 with a Topic Alias, alone or with a topic), plus the
# acknowledgements a receiver sends for every QoS 1/2 message. On MicroPython each call runs under
# micropython.heap_lock() (any allocation raises MemoryError); on CPython the same calls run plainly, so the
# file still checks that the bytes written are right.
try:
    from tests.shared.alloc import no_alloc, bytes_per_call, micropython_only
except ImportError:
    from alloc import no_alloc, bytes_per_call, micropython_only

from tinymqtt import packets as K
from tinymqtt.packets import encode, encode_publish, frame  # the client half: what a client sends
from tinymqtt_cli.server_codec import Packet, decode, MAX_PACKET  # the server half, to read back what it wrote

K.v5()  # MQTT 5's codec (props.py), which packets loads at its first v5 packet (Session5 at once): here, before any heap_lock

V31, V311, V5 = 3, 4, 5

BUF = bytearray(512)
PAYLOAD = bytes(range(64))
TOPIC = b"sensors/t1"


def h(s):
    s = s.replace(" ", "")
    return bytes(int(s[i:i + 2], 16) for i in range(0, len(s), 2))


def written(n):
    return bytes(BUF[:n])


def expect_publish(n, version, topic, qos, pid, alias=0, retain=False, dup=False):
    d = decode(memoryview(BUF)[:n], version)
    want = Packet(K.PUBLISH, topic=str(topic, "utf-8"), payload=PAYLOAD, qos=qos, pid=pid, retain=retain, dup=dup,
                  props={0x23: alias} if alias else None)
    assert d == want, "%r != %r" % (d, want)


def _publish(version, topic, qos, pid, alias=0, retain=False, dup=False, off=0):
    # positional arguments only: the call itself must not build anything
    return encode_publish(BUF, version, topic, PAYLOAD, qos, retain, dup, pid, None, alias, off)


def test_publish_qos0_no_alloc():
    for v in (V31, V311, V5):
        no_alloc(_publish, v, TOPIC, 0, 0)
        n = _publish(v, TOPIC, 0, 0)
        assert n == 2 + 2 + len(TOPIC) + len(PAYLOAD) + (1 if v == V5 else 0)
        expect_publish(n, v, TOPIC, 0, 0)


def test_publish_qos1_no_alloc():
    for v in (V31, V311, V5):
        no_alloc(_publish, v, TOPIC, 1, 1)
        no_alloc(_publish, v, TOPIC, 1, 65535, 0, True, True)
        n = _publish(v, TOPIC, 1, 300)
        expect_publish(n, v, TOPIC, 1, 300)


def test_publish_qos2_no_alloc():
    for v in (V31, V311, V5):
        no_alloc(_publish, v, TOPIC, 2, 42)
        n = _publish(v, TOPIC, 2, 42, 0, True)
        expect_publish(n, v, TOPIC, 2, 42, 0, True)


def test_publish_v5_alias_no_alloc():
    for qos, pid in ((0, 0), (1, 7), (2, 8)):
        no_alloc(_publish, V5, TOPIC, qos, pid, 5)  # topic and alias: establishes the alias
        n = _publish(V5, TOPIC, qos, pid, 5)
        expect_publish(n, V5, TOPIC, qos, pid, 5)
        no_alloc(_publish, V5, b"", qos, pid, 5)  # alias only
        n = _publish(V5, b"", qos, pid, 65535)
        expect_publish(n, V5, b"", qos, pid, 65535)
    n = _publish(V5, b"", 0, 0, 3)
    assert written(n)[:8] == h("30 46 00 00 03 23 00 03")


def test_publish_large_payload_and_offset_no_alloc():
    # a multi-byte Remaining Length, and several packets back to back in one buffer
    big = bytes(300)
    no_alloc(encode_publish, BUF, V5, TOPIC, big, 1, False, False, 9, None, 0, 0)
    n1 = encode_publish(BUF, V5, TOPIC, big, 1, False, False, 9, None, 0, 0)
    assert BUF[1] == (n1 - 3) & 0x7F | 0x80 and BUF[2] == (n1 - 3) >> 7
    no_alloc(_publish, V311, TOPIC, 1, 10, 0, False, False, n1)
    n2 = _publish(V311, TOPIC, 1, 10, 0, False, False, n1)
    assert frame(BUF, len(BUF) - n1, MAX_PACKET, n1) == n2
    assert decode(memoryview(BUF)[n1:n1 + n2], V311).pid == 10


def test_publish_memoryview_payload_no_alloc():
    # a payload that is a view into a larger buffer (e.g. a received message being forwarded)
    mv = memoryview(PAYLOAD)[8:40]
    no_alloc(encode_publish, BUF, V311, TOPIC, mv, 1, False, False, 3)
    n = encode_publish(BUF, V311, TOPIC, mv, 1, False, False, 3)
    assert written(n)[-32:] == PAYLOAD[8:40]


ACKS = (Packet(K.PUBACK, pid=7), Packet(K.PUBREC, pid=7), Packet(K.PUBREL, pid=7), Packet(K.PUBCOMP, pid=7),
        Packet(K.PUBACK, pid=7, reason=0x10), Packet(K.PUBREL, pid=7, reason=0x92), Packet(K.PINGREQ),
        Packet(K.DISCONNECT))


def test_acks_no_alloc():
    # what a receiver answers to each QoS 1 / 2 message, and the keep-alive
    for p in ACKS:
        for v in (V311, V5):
            no_alloc(encode, BUF, p, v)
            n = encode(BUF, p, v)
            d = decode(memoryview(BUF)[:n], v)
            assert d.type == p.type and d.pid == p.pid and d.reason == (p.reason if v == V5 else 0)


def test_frame_no_alloc():
    hdr = bytearray(h("30 FF FF 7F"))
    mv = memoryview(hdr)
    no_alloc(frame, hdr, 4)
    no_alloc(frame, mv, 4, MAX_PACKET, 0)
    no_alloc(frame, mv, 2)
    assert frame(hdr, 4) == 4 + 2097151


def test_bytes_per_call_publish():
    micropython_only("gc.mem_alloc() counts heap bytes")

    def qos1():
        encode_publish(BUF, V5, TOPIC, PAYLOAD, 1, False, False, 1)
    qos1()  # the first v5 packet imports tinymqtt.props, once
    n = bytes_per_call(qos1, 50)
    assert n == 0, "encode_publish allocates %r bytes per call" % (n,)
