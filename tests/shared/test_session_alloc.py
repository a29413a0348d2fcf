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
