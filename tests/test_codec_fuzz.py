# Fuzzing frame() + decode() (CPython): random and mutated byte strings, with a fixed seed. Nothing but an
# MQTTError subclass may ever escape; an IndexError, UnicodeError, ValueError, TypeError, RecursionError or
# MemoryError is a codec bug. Whatever decodes must re-encode (or be refused with LocalProtocolError) to bytes
# that decode to the same packet.
# TINYMQTT_FUZZ_CASES (default 100000) sets the number of byte strings; each is tried at levels 3, 4 and 5.
import os
import random

from tinymqtt import packets as K
from tinymqtt.packets import encode_publish, frame, sub_options
from tinymqtt_cli.server_codec import Packet, encode, decode, MAX_PACKET  # the server half too: any packet, both ways
from tinymqtt.errors import MQTTError, LocalProtocolError

V31, V311, V5 = 3, 4, 5
SEED = 0x7E57C0DEC
BUF = bytearray(1 << 17)


def _seeds():
    """Valid encoded packets of every type for every level: the material the mutations start from."""
    up = [("k", "v"), ("\u00e9", "\U0001F600")]
    out = []
    for v in (V31, V311, V5):
        five = v == V5
        w = Packet(K.PUBLISH, topic="w/t", payload=b"gone", qos=1, retain=True,
                   props={0x18: 5, 0x01: 1, 0x03: "text/plain", 0x08: "r/t", 0x09: b"\x01", 0x02: 9} if five else None)
        ps = [
            Packet(K.CONNECT, client_id="cid", keepalive=10, will=w, username="u", password=b"p",
                   props={0x11: 3600, 0x21: 20, 0x22: 5, 0x27: 1 << 20, 0x17: 1, 0x19: 0, 0x15: "SCRAM",
                          0x16: b"xy", 0x26: up} if five else None),
            Packet(K.CONNECT, client_id="c2", clean=False),
            Packet(K.CONNACK, session_present=True,
                   props={0x11: 5, 0x12: "id", 0x13: 30, 0x1A: "ri", 0x1C: "srv", 0x1F: "why", 0x21: 9, 0x22: 3,
                          0x24: 1, 0x25: 0, 0x27: 999, 0x28: 1, 0x29: 1, 0x2A: 0, 0x26: up} if five else None),
            Packet(K.CONNACK, reason=0x87 if five else 5),
            Packet(K.PUBLISH, topic="a/b", pid=10, qos=1, payload=b"hello",
                   props={0x01: 1, 0x02: 60, 0x03: "c/t", 0x08: "resp", 0x09: b"corr", 0x0B: [1, 300],
                          0x23: 4, 0x26: up} if five else None),
            Packet(K.PUBLISH, topic="\u00e9/\u20ac", qos=2, pid=65535, dup=True, retain=True, payload=bytes(200)),
            Packet(K.PUBLISH, topic="t", payload=b""),
            Packet(K.PUBACK, pid=1, reason=0x10 if five else 0, props={0x1F: "r", 0x26: up} if five else None),
            Packet(K.PUBREC, pid=2, reason=0x80 if five else 0),
            Packet(K.PUBREL, pid=3, reason=0x92 if five else 0),
            Packet(K.PUBCOMP, pid=4),
            Packet(K.SUBSCRIBE, pid=5, topics=[("a/+", sub_options(1, five, five, 2 if five else 0)), ("#", 2)],
                   props={0x0B: 7, 0x26: up} if five else None),
            Packet(K.SUBACK, pid=5, codes=[1, 2, 0x80] if v > V31 else [0, 1, 2], props={0x1F: "s"} if five else None),
            Packet(K.UNSUBSCRIBE, pid=6, topics=["a/+", "b"], props={0x26: up} if five else None),
            Packet(K.UNSUBACK, pid=6, codes=[0, 0x11] if five else None),
            Packet(K.PINGREQ),
            Packet(K.PINGRESP),
            Packet(K.DISCONNECT, reason=0x04 if five else 0, props={0x11: 0, 0x1F: "bye", 0x1C: "x"} if five else None),
        ]
        if five:
            ps.append(Packet(K.AUTH, reason=0x18, props={0x15: "SCRAM", 0x16: b"\x00\xff", 0x1F: "a"}))
            ps.append(Packet(K.PUBLISH, topic="", payload=b"x", props={0x23: 1}))
        for p in ps:
            n = encode(BUF, p, v)
            out.append((v, bytes(BUF[:n])))
        n = encode_publish(BUF, v, b"big", bytes(20000), 1, False, False, 9)  # a 3-byte Remaining Length
        out.append((v, bytes(BUF[:n])))
    return out


SEEDS = _seeds()
INTERESTING = (0x00, 0x01, 0x02, 0x03, 0x7F, 0x80, 0x81, 0xBF, 0xC0, 0xC3, 0xE0, 0xED, 0xEF, 0xF0, 0xF4, 0xF5,
               0xFE, 0xFF, 0x23, 0x2B, 0x26, 0x0B, 0x23, 0x21, 0x27)


def _vbi(n):
    out = bytearray()
    while True:
        d = n & 0x7F
        n >>= 7
        out.append(d | 0x80 if n else d)
        if not n:
            return bytes(out)


def _fix_rl(b):
    """Rewrite the Remaining Length to agree with the bytes present, so mutations reach past that check."""
    if len(b) < 2:
        return b
    i = 1
    while i < len(b) and i < 5 and b[i] & 0x80:
        i += 1
    body = b[i + 1:]
    return bytearray(b[:1]) + _vbi(len(body)) + body


def mutate(rng, data):
    b = bytearray(data)
    for _ in range(rng.choice((1, 1, 1, 2, 2, 3, 5))):
        op = rng.randrange(9)
        n = len(b)
        if op == 0 and n:  # bit flip
            b[rng.randrange(n)] ^= 1 << rng.randrange(8)
        elif op == 1 and n:  # byte set
            b[rng.randrange(n)] = rng.choice(INTERESTING) if rng.random() < 0.5 else rng.randrange(256)
        elif op == 2:  # insert
            b[rng.randrange(n + 1):0] = bytes([rng.randrange(256) for _ in range(rng.choice((1, 1, 2, 4)))])
        elif op == 3 and n:  # delete
            i = rng.randrange(n)
            del b[i:i + rng.choice((1, 1, 2, 3))]
        elif op == 4:  # truncate
            del b[rng.randrange(n + 1):]
        elif op == 5 and n > 2:  # bump a length field: the Remaining Length or a two-byte length/pid
            i = 1 if rng.random() < 0.3 else rng.randrange(1, n)
            b[i] = (b[i] + rng.choice((-2, -1, 1, 2, 0x40, 0x80))) & 0xFF
        elif op == 6 and n > 2:  # duplicate a chunk (repeated properties, filters)
            i = rng.randrange(2, n)
            j = min(n, i + rng.randrange(1, 12))
            b[i:i] = b[i:j]
        elif op == 7 and n:  # change the packet type / flags
            b[0] = rng.randrange(256) if rng.random() < 0.3 else (b[0] & 0xF0) | rng.randrange(16)
        elif op == 8 and n > 3:  # splice in part of another seed
            other = rng.choice(SEEDS)[1]
            i, j = rng.randrange(n), rng.randrange(len(other))
            b[i:] = other[j:j + rng.randrange(1, 24)]
    if rng.random() < 0.6:
        b = _fix_rl(b)
    return bytes(b)


def random_bytes(rng):
    n = rng.choice((0, 1, 2, 3, 5, 8, 16, 32, 64))
    b = bytearray(rng.randrange(256) for _ in range(n))
    if n and rng.random() < 0.7:
        b = _fix_rl(b)
    return bytes(b)


def _check(data, v, stats, failures):
    n = len(data)
    try:
        total = frame(data, n, rng_max(n))
        if total and total <= n:
            decode(memoryview(data)[:total], v)
    except MQTTError:
        pass
    except Exception as e:  # a bug: anything else escaped
        failures.append((v, data, "frame/decode slice", e))
    try:
        p = decode(data, v)
    except MQTTError:
        stats["refused"] += 1
        return
    except Exception as e:
        failures.append((v, data, "decode", e))
        return
    stats["decoded"] += 1
    stats[K.NAMES.split()[p.type]] = stats.get(K.NAMES.split()[p.type], 0) + 1
    vv = p.version if p.type == K.CONNECT else v
    try:
        m = encode(BUF, p, vv)
    except LocalProtocolError:
        stats["re-encode refused"] += 1
        return
    except Exception as e:
        failures.append((v, data, "re-encode of %r" % (p,), e))
        return
    try:
        d = decode(memoryview(BUF)[:m], vv)
    except Exception as e:
        failures.append((v, data, "decode of re-encoded %s" % bytes(BUF[:m]).hex(), e))
        return
    if d != p:
        failures.append((v, data, "re-encoded %s decodes to %r, not %r" % (bytes(BUF[:m]).hex(), d, p), None))


def rng_max(n):
    # a receive limit sometimes smaller than the packet, to exercise the 0x95 path
    return n if n % 7 == 0 else MAX_PACKET


def test_fuzz_frame_and_decode():
    cases = int(os.environ.get("TINYMQTT_FUZZ_CASES", "100000"))
    rng = random.Random(SEED)
    stats = {"decoded": 0, "refused": 0, "re-encode refused": 0}
    failures = []
    for i in range(cases):
        if i < len(SEEDS):
            data = SEEDS[i][1]  # every seed once, as is
        elif rng.random() < 0.1:
            data = random_bytes(rng)
        else:
            data = mutate(rng, rng.choice(SEEDS)[1])
        for v in (V31, V311, V5):
            _check(data, v, stats, failures)
        if len(failures) > 20:
            break
    try:
        from tests.support.report import record
    except ImportError:
        record = None
    if record is not None:
        record("fuzz cases", cases)
    assert not failures, "\n".join("v%d %s: %s: %r" % (v, data.hex(), what, e) for v, data, what, e in failures[:20])
    # the mutations must reach past the framing checks, into every packet type
    assert stats["decoded"] > cases // 20, stats
    for name in K.NAMES.split()[1:]:
        assert stats.get(name, 0) > 0 or cases < 10000, (name, stats)


def test_seeds_are_valid():
    for v, data in SEEDS:
        assert frame(data, len(data)) == len(data)
        p = decode(data, v)
        n = encode(BUF, p, p.version if p.type == K.CONNECT else v)
        assert len(data) == n
