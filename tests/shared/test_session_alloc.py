# The session's timer under micropython.heap_lock() (CPython: the same calls, unchecked): tick() with the 3.x
# retry timer on and messages in flight allocates nothing until a resend is due.
from tests.shared.alloc import no_alloc
from tinymqtt.session import Session


def test_tick_with_the_retry_timer_allocates_nothing_until_a_resend():
    s = Session(client_id="t", version=4, keepalive=0, retry_ms=5000, max_inflight=4, max_packet_size=256)
    s.connect(0)
    s.outlen = 0
    s.inbuf[0:4] = b"\x20\x02\x00\x00"  # CONNACK
    s.received(4, 0)
    for i in range(3):
        assert s.publish(b"t", b"x", 1) > 0
    s.outlen = 0
    for now in (10, 1000, 4999):
        assert no_alloc(s.tick, now) > 0
    assert s.outlen == 0
    s.tick(5001)  # due: the three go again, with DUP
    assert s.outlen == 3 * 8 and s.out[0] == 0x3A


def test_a_v5_ack_with_a_reason_code_and_empty_properties_is_read_in_place():
    # A v5 PUBACK / PUBREC / PUBCOMP may carry its reason code and a property length of 0 (6 bytes): Session5
    # reads it in place, as it reads a bare one and one with a reason code alone, allocating nothing.
    from tinymqtt.session5 import Session5
    log, n = [0] * 12, [0]  # (ev, value, reason) of each event, kept without allocating

    def on_event(ev, value, reason):
        i = n[0]
        if i < 12:
            log[i], log[i + 1], log[i + 2] = ev, value, reason
            n[0] = i + 3
    s = Session5(client_id="t", keepalive=0, max_inflight=4, max_packet_size=256, on_event=on_event)
    s.connect(0)
    s.outlen = 0
    s.inbuf[0:5] = b"\x20\x03\x00\x00\x00"  # CONNACK: accepted, no properties
    s.received(5, 0)
    pids = [s.publish(b"t", b"x", 1), s.publish(b"t", b"x", 1), s.publish(b"t", b"x", 2)]
    s.outlen = 0
    n[0] = 0
    acks = (bytes([0x40, 4, 0, pids[0], 0, 0]), bytes([0x40, 4, 0, pids[1], 0x10, 0]),  # 0x10: no subscribers
            bytes([0x50, 4, 0, pids[2], 0, 0]), bytes([0x70, 4, 0, pids[2], 0, 0]))
    for ack in acks:
        s.inbuf[0:6] = ack
        assert no_alloc(s.received, 6, 0) is False
        if ack[0] == 0x50:
            assert bytes(s.out[:s.outlen]) == bytes([0x62, 2, 0, pids[2]])  # our PUBREL, written in place
            s.outlen = 0
    assert log[:n[0]] == [4, pids[0], 0, 4, pids[1], 0x10, 7, pids[2], 0] and s.flights.count == 0
    s.inbuf[0:6] = b"\x40\x04\x00\x07\x00\x01"  # a property length of 1 and no property: decoded, refused
    try:
        s.received(6, 0)
        assert False, "a property block that runs past the packet was taken"
    except Exception as e:
        assert e.reason == 0x81, e


def test_a_pingresp_is_read_in_place():
    # Keep-alive, both ways: ping() writes PINGREQ in place and the PINGRESP that answers it is read in place (no
    # Packet), in 3.1.1 and 5, so an idle connected client allocates nothing per keep-alive round trip.
    from tinymqtt.session5 import Session5
    for s, connack in ((Session(client_id="t", version=4, keepalive=1, max_packet_size=256), b"\x20\x02\x00\x00"),
                       (Session5(client_id="t", keepalive=1, max_packet_size=256), b"\x20\x03\x00\x00\x00")):
        s.connect(0)
        s.inbuf[0:len(connack)] = connack
        s.received(len(connack), 0)
        s.outlen = 0
        for now in (1000, 2000):
            assert no_alloc(s.ping, now) is True and not s.ping(now) and bytes(s.out[:2]) == b"\xc0\x00"
            s.outlen = 0
            s.inbuf[0:2] = b"\xd0\x00"
            assert no_alloc(s.received, 2, now) is False and not s.pinging and s.inlen == 0
