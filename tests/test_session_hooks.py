# Session hooks for applications that persist their own exactly-once state (the Spark link): a PUBREL the
# application holds until it has made the end of the flow durable, and ping() as a barrier. Sans-IO: bytes in,
# bytes out, no broker.
from tinymqtt.session import Session
from tinymqtt.session5 import Session5
from tinymqtt.app_acks import extended


def feed(s, data, now=0):
    s.inbuf[s.inlen:s.inlen + len(data)] = data
    s.received(len(data), now)


def take(s):
    out = bytes(s.out[:s.outlen])
    s.outlen = 0
    return out


def connected(version=5, **options):
    cls = Session5 if version == 5 else Session
    if options.get("manual_ack", 0) != 0:  # True, or None: the asyncio client's (what driver.new_session builds)
        cls = extended(cls)
    s = cls(client_id="hooks", version=version, **options)
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


def test_a_new_session_forgets_held_messages_before_on_connect_hears_of_it():
    # An ack() of a message held from the old session, made in on_connect, sends nothing and leaves no id in the
    # QoS 2 table: the new session's own QoS 2 message with that id is delivered, not taken for a resend.
    for v in (3, 4, 5):
        got, in_connack = [], []
        prop = b"\x00" if v == 5 else b""

        def on_event(ev, value, reason):
            if ev == 3:
                got.append(value)
            elif ev == 2 and got:
                in_connack.append((s.ack(got[0]), take(s)))

        s = extended(Session5 if v == 5 else Session)(client_id="hooks", version=v, clean=False, manual_ack=True,
                                                      on_event=on_event)
        connack = b"\x20\x03\x00\x00\x00" if v == 5 else b"\x20\x02\x00\x00"
        s.connect(0)
        take(s)
        feed(s, connack)
        feed(s, bytes([0x34, 6 + len(prop)]) + b"\x00\x01t\x00\x07" + prop + b"x")  # QoS 2, id 7, held
        assert take(s) == b"" and got[0].pid == 7
        s.connection_lost()
        s.clean = v == 3  # (3.1 has no session-present flag: a clean start is how it begins a new session)
        s.connect(1)
        take(s)
        feed(s, connack)  # session present: 0
        assert in_connack == [(True, b"")]
        feed(s, bytes([0x34, 6 + len(prop)]) + b"\x00\x01t\x00\x07" + prop + b"y")  # the new session's id 7
        assert len(got) == 2 and bytes(got[1].payload) == b"y"


def test_the_qos2_table_stays_fast_with_thousands_of_flows_open():
    # Every QoS 2 PUBLISH and PUBREL looks its id up in a set: a desktop window (Receive Maximum 65000), and a
    # board's window that an overshooting server went past.
    for rm, flows in ((65000, 3000), (16, 1000)):
        s = connected(4, receive_maximum=rm)
        for pid in range(1, flows + 1):
            body = b"\x00\x01t" + bytes([pid >> 8, pid & 0xFF]) + b"x"
            feed(s, bytes([0x34, len(body)]) + body)
            take(s)
        assert len(s._rx_pid) == flows
        for pid in range(1, flows + 1):
            feed(s, bytes([0x62, 2, pid >> 8, pid & 0xFF]))
            assert take(s) == bytes([0x70, 2, pid >> 8, pid & 0xFF])  # PUBCOMP
        assert not s._rx_pid
        body = b"\x00\x01t\x00\x05x"
        feed(s, bytes([0x34, len(body)]) + body)  # id 5 again, a new flow: delivered and PUBREC'd once more
        assert take(s) == b"\x50\x02\x00\x05"


def test_an_ack_a_handler_left_no_room_for_goes_out_after_the_write():
    # A handler that publishes may fill `out` to its last bytes; the message's own ack must then wait for the
    # driver's write (received() asks for it by returning True), never fail or be forgotten.
    for v, opts in ((4, {}), (5, {}), (4, {"manual_ack": None}), (5, {"manual_ack": None})):
        s = connected(v, out_size=128, **opts)
        s.subscribe([("t", 2)], None, lambda m: s.publish("e", b"x" * (121 - (v == 5)), 0))
        take(s)
        feed(s, b"\x90\x03\x00\x01\x02" if v == 4 else b"\x90\x04\x00\x01\x00\x02")  # SUBACK
        for q, pid in ((1, 7), (2, 8)):
            body = b"\x00\x01t" + bytes([0, pid]) + (b"\x00" if v == 5 else b"") + b"m"
            s.inbuf[:2 + len(body)] = bytes([0x30 | q << 1, len(body)]) + body
            assert s.received(2 + len(body), 0)  # write `out`, then call again
            assert take(s)[0] == 0x30 and s.outlen == 0  # the handler's message: `out` had 2 bytes left
            assert not s.received(0, 0)
            assert take(s) == bytes([0x40 if q == 1 else 0x50, 2, 0, pid]), (v, opts, q)
