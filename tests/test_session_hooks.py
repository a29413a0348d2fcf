# Session hooks for applications that persist their own exactly-once state (the Spark link): a PUBREL the
# application holds until it has made the end of the flow durable, and ping() as a barrier. Sans-IO: bytes in,
# bytes out, no broker.
from tinymqtt.session import Session
from tinymqtt.session5 import Session5


def feed(s, data, now=0):
    s.inbuf[s.inlen:s.inlen + len(data)] = data
    s.received(len(data), now)


def take(s):
    out = bytes(s.out[:s.outlen])
    s.outlen = 0
    return out


def connected(version=5, **options):
    s = (Session5 if version == 5 else Session)(client_id="hooks", version=version, **options)
    s.connect(0)
    take(s)
    feed(s, b"\x20\x03\x00\x00\x00" if version == 5 else b"\x20\x02\x00\x00")
    take(s)
    return s


def test_a_held_pubrel_gets_its_pubcomp_only_from_complete():
    for v in (4, 5):  # (hold_pubrel is app_acks.py's: a session with manual_ack)
        got = []
        s = connected(v, manual_ack=True, on_event=lambda ev, value, reason: got.append(value))
        held = []
        s.hold_pubrel = lambda pid: held.append(pid) or pid == 7
        body = b"\x00\x01t\x00\x07" + (b"\x00" if v == 5 else b"") + b"x"  # topic "t", id 7, payload "x"
        feed(s, bytes([0x34, len(body)]) + body)  # QoS 2 PUBLISH
        assert take(s) == b"" and got[-1].pid == 7 and s.ack(got[-1])
        assert take(s) == b"\x50\x02\x00\x07"  # PUBREC
        feed(s, b"\x62\x02\x00\x07")
        assert held == [7] and take(s) == b""  # held: nothing goes out yet
        assert s.complete(7) and take(s) == b"\x70\x02\x00\x07"  # PUBCOMP
        feed(s, b"\x62\x02\x00\x09")  # a PUBREL the hook declines is answered at once (unknown id: 0x92 in v5)
        assert take(s) == (b"\x70\x03\x00\x09\x92" if v == 5 else b"\x70\x02\x00\x09")


def test_ping_is_one_pingreq_until_its_pingresp():
    s = connected()
    assert s.ping(10) and take(s) == b"\xc0\x00" and s.pinging
    assert not s.ping(11) and take(s) == b""  # one unanswered at a time
    feed(s, b"\xd0\x00", 12)
    assert not s.pinging and s.ping(13) and take(s) == b"\xc0\x00"
