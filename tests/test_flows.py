# The outbound flow transitions (inflight.py: one table, every move through Inflight.step()) and the one PUBLISH
# reader (packets.read_publish) that decode() and the session's receive path share: pure, no broker.
# (The states, events and actions are inflight.py's private const() names: CPython keeps them as module globals.)
import pytest

import tinymqtt.inflight as fl
from tinymqtt.inflight import Inflight, LOST
from tinymqtt.packets import Packet, encode_publish, read_publish, PUBLISH
from tinymqtt_cli.server_codec import decode  # the server half: any packet into a new Packet
from tinymqtt.retry import resend_late

FREE, QUEUED, CONTROL = fl._FREE, fl._QUEUED, fl._CONTROL
WAIT_PUBACK, WAIT_PUBREC, WAIT_PUBCOMP = fl._WAIT_PUBACK, fl._WAIT_PUBREC, fl._WAIT_PUBCOMP
RESEND_QOS1, RESEND_QOS2, RESEND_PUBREL = fl._RESEND_QOS1, fl._RESEND_QOS2, fl._RESEND_PUBREL
PUBACK, PUBREC, REFUSAL, PUBCOMP = fl._GOT_PUBACK, fl._GOT_PUBREC, fl._GOT_REFUSAL, fl._GOT_PUBCOMP


def next_queued(f):
    # The slot Session.pump() sends next: the oldest entry of the send queue still in a queue state, or -1.
    for k in range(f.queued):
        i = f.ring[(f.head + k) % f.size]
        if f.state[i] in (QUEUED, RESEND_QOS1, RESEND_QOS2, RESEND_PUBREL):
            return i
    return -1


def _flight(qos, resend=False):
    # A message written to the wire (pump's event), then, with resend, queued again by the 3.x timer.
    f = Inflight(4, 1)
    i = f.add(b"t", b"x", qos, 0, None)
    f.step(i, fl._WRITE_QOS0 + qos, 100)
    if resend:
        f.step(i, fl._SEND_AGAIN, 0)
    return f, i, f.pid[i]


def test_acks_move_a_flow_as_the_table_says():
    f, i, pid = _flight(2)
    assert f.state[i] == WAIT_PUBREC and f.unacked == 1
    assert f.ack(PUBREC, pid, 7) == fl._SEND_PUBREL and f.state[i] == WAIT_PUBCOMP and f.unacked == 1
    assert f.ack(PUBREC, pid, 7) == fl._SEND_PUBREL  # a PUBREC again: PUBREL again
    assert f.ack(PUBACK, pid, 7) == fl._NOT_EXPECTED  # PUBACK on a QoS 2 flow: a protocol error for the session
    assert f.ack(PUBCOMP, pid, 7) == fl._ENDED and f.state[i] == FREE and f.count == 0 and f.unacked == 0
    assert f.ack(PUBCOMP, pid, 7) == fl._NOT_IN_FLIGHT  # gone: unsolicited
    f, i, pid = _flight(2)
    assert f.ack(REFUSAL, pid, 7) == fl._ENDED and f.state[i] == FREE  # refused: the flow ends
    f, i, pid = _flight(1)
    assert f.ack(PUBREC, pid, 7) == fl._NOT_EXPECTED and f.ack(PUBACK, pid, 7) == fl._ENDED and f.count == 0
    f = Inflight(4, 1)
    i = f.add(None, None, 3, 0, None)
    assert f.state[i] == CONTROL and next_queued(f) < 0 and f.ack(PUBACK, f.pid[i], 0) == fl._NOT_IN_FLIGHT


def test_every_row_of_the_table_is_a_legal_move_and_a_missing_one_is_refused():
    names = fl._STATE_NAMES.split(), fl._EVENT_NAMES.split()
    for key, row in fl._FLOWS.items():
        assert key >> 4 < len(names[0]) and key & 15 < len(names[1]) and row >> 4 < len(names[0])
        assert row & 15 <= fl._ASK_AGAIN
    f = Inflight(4, 1)
    i = f.add(b"t", b"x", 1, 0, None)
    with pytest.raises(AssertionError, match="from QUEUED on GOT_PUBCOMP"):
        f.step(i, PUBCOMP, 0)
    assert f.state[i] == QUEUED


def test_a_new_connection_resends_or_ends_each_flow():
    f = Inflight(8, 1)
    slots = [f.add(b"t", b"%d" % k, 1 + k % 2, 0, None) for k in range(4)]
    f.step(slots[0], fl._WRITE_QOS1, 0)
    f.step(slots[1], fl._WRITE_QOS2, 0)
    f.step(slots[3], fl._WRITE_QOS2, 0)
    f.ack(PUBREC, f.pid[slots[3]], 0)  # past PUBREC
    ctl = f.add([("a/#", 1)], None, 3, 8, {38: [("k", "v")]})  # a SUBSCRIBE's packet id, keeping the request
    events = []
    assert f._renew(True, False, lambda *e: events.append(e)) == [(8, [("a/#", 1)], {38: [("k", "v")]})]
    assert not events
    assert [f.state[i] for i in slots] == [RESEND_QOS1, RESEND_QOS2, QUEUED, RESEND_PUBREL] and f.state[ctl] == FREE
    assert f.unacked == 1  # the PUBREL: the server still counts that flow
    assert next_queued(f) == slots[3]  # a PUBREL resend goes first, then the PUBLISHes in publish order
    assert f._renew(False, False, lambda *e: events.append(e)) == []
    assert [(e[0], getattr(e[1], "payload", e[1])) for e in events] == [(LOST, b"0"), (LOST, b"1"),
                                                                       (7, f.pid[slots[3]])]
    assert f.count == 1 and f.state[slots[2]] == QUEUED and f.unacked == 0  # never sent: it goes to the new session


def test_the_retry_timer_resends_what_waited_too_long():
    f, i, pid = _flight(1)
    assert resend_late(f, 150, 100, 1000) == 50 and f.state[i] == WAIT_PUBACK
    assert resend_late(f, 200, 100, 1000) == 1000 and f.state[i] == RESEND_QOS1 and next_queued(f) == i


def test_a_late_ack_of_the_first_send_ends_a_flow_queued_for_its_resend():
    # The 3.x timer queued the resend, then the ack of the first send came: the flow ends (or goes on to PUBREL),
    # it is no protocol error, and the stale queue entry never sends a freed or reused slot.
    f, i, pid = _flight(1, True)
    assert f.ack(PUBACK, pid, 7) == fl._ENDED and f.state[i] == FREE and next_queued(f) < 0
    f, i, pid = _flight(2, True)
    assert f.ack(PUBREC, pid, 7) == fl._SEND_PUBREL and f.state[i] == WAIT_PUBCOMP and next_queued(f) < 0


def test_one_publish_reader_for_decode_and_the_session():
    buf = bytearray(64)
    m = Packet(PUBLISH)
    for v, kw in ((4, {}), (4, dict(qos=2, pid=9, retain=True)), (5, dict(qos=1, pid=3, props={0x02: 60})),
                  (5, dict(alias=4)), (5, dict(topic=b"", alias=4, qos=1, pid=2))):
        kw = dict(kw)
        topic = kw.pop("topic", b"a/b")
        n = encode_publish(buf, v, topic, b"hi", kw.get("qos", 0), kw.get("retain", False), False, kw.get("pid", 0),
                           kw.get("props"), kw.get("alias", 0))
        mv = memoryview(bytes(8) + bytes(buf[:n]) + bytes(8))  # in place, between other bytes
        assert read_publish(mv, 8, 8 + n, m, v) is m
        d = decode(bytes(buf[:n]), v)
        assert (m.topic, bytes(m.payload), m.qos, m.pid, m.retain, m.alias) == \
               (d.topic, bytes(d.payload), d.qos, d.pid, d.retain, kw.get("alias", -1))
        # a Topic Alias alone is read without a dict; decode() gives the property block as it was sent
        assert m.props == (None if "alias" in kw else d.props)
        assert d.props == ({0x23: 4} if "alias" in kw else kw.get("props"))


def test_a_new_session_subscribes_again_in_order_each_filter_alone_with_its_properties():
    from tinymqtt.packets import frame, SUBSCRIBE
    from tinymqtt.session5 import Session5
    s = Session5(client_id="resub")
    s.subscribe([("a", 1)]), s.subscribe([("b", 1)], props={0x0B: 7}), s.subscribe([("c", 0), ("d", 2)])  # offline
    s.connect(0)
    s.outlen = 0
    s.inbuf[0:5] = b"\x20\x03\x00\x00\x00"  # CONNACK: no session
    s.received(5, 0)
    out, sent = bytes(s.out[:s.outlen]), []
    while out:
        n = frame(out, len(out))
        p = decode(out[:n], 5)
        sent.append((p.type, p.topics, p.props))
        out = out[n:]
    assert sent == [(SUBSCRIBE, [("a", 1)], None), (SUBSCRIBE, [("b", 1)], {0x0B: 7}),
                    (SUBSCRIBE, [("c", 0)], None), (SUBSCRIBE, [("d", 2)], None)]


def test_the_inbound_table_has_a_row_for_every_publish_and_app_acks_only_changes_new_messages():
    import tinymqtt.session as S
    from tinymqtt.app_acks import extended
    held = extended(S.Session)._inbound
    for st in (S._IN_NONE, S._IN_RECEIVED, S._IN_HELD):
        for q in (1, 2):
            assert (st << 4 | S._IN_QOS0 + q) in held
    assert (S._IN_HELD << 4 | S._IN_PUBREL) not in held  # a PUBREL before our PUBREC: a protocol error
    changed = {k for k in held if held[k] != S._INBOUND.get(k)}
    assert changed == {S._IN_NONE << 4 | S._IN_QOS1, S._IN_NONE << 4 | S._IN_QOS2, S._IN_RECEIVED << 4 | S._IN_QOS1}
    assert all(held[k] >> 4 == S._IN_HELD for k in changed)
