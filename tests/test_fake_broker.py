# The real blocking Client (over the Linux port) against a scripted fake server: exact bytes on the wire,
# resends across reconnects, keep-alive, flow control, topic aliases, exactly-once delivery, and servers that
# break the rules. Each test is one conversation: `server(fb)` runs in a thread and reads top to bottom
# (see tests/support/fakebroker.py); the test's own thread drives the client.
import os
import sys
import threading
import time
import tracemalloc
import types

_HERE = os.path.dirname(os.path.abspath(__file__))
for _d in (os.path.join(_HERE, ".."), os.path.join(_HERE, "..", "lib"), os.path.join(_HERE, "..", "ports", "linux")):
    _d = os.path.normpath(_d)
    if _d not in sys.path:
        sys.path.append(_d)

import pytest  # noqa: E402

import tinymqtt_port  # noqa: E402
from tests.support.fakebroker import FakeBroker  # noqa: E402
from tinymqtt import props as P  # noqa: E402
from tinymqtt.client import Client  # noqa: E402
from tinymqtt.errors import (ConnectError, ConnectionLost, LocalProtocolError, RemoteProtocolError,  # noqa: E402
                             NotDelivered)
from tinymqtt.packets import (Packet, CONNECT, CONNACK, PUBLISH, PUBACK, PUBREC, PUBREL, PUBCOMP,  # noqa: E402
                              SUBSCRIBE, SUBACK, PINGREQ, PINGRESP, DISCONNECT)
from tinymqtt.session import LOST  # noqa: E402

V31, V311, V5 = 3, 4, 5
RESUME = {V5: dict(session_expiry=60), V311: dict(clean=False), V31: dict(clean=False)}


@pytest.fixture
def rig():
    """rig(version, script, **client_options) -> (fake broker running script, Client pointed at it)."""
    made = []

    def make(version=V5, script=None, **opts):
        fb = FakeBroker(version)
        for k, v in dict(client_id="t1", port_impl=tinymqtt_port, backoff_min_ms=10, backoff_max_ms=40).items():
            opts.setdefault(k, v)
        c = Client("127.0.0.1", fb.port, version=version, **opts)
        c.events, c.messages, c.errors = [], [], []
        c.on_event = lambda ev, value, reason: c.events.append((ev, value, reason))
        c.on_message = lambda m: c.messages.append((m.topic, bytes(m.payload), m.qos))
        c.on_disconnect = c.errors.append
        made.append((fb, c))
        if script:
            fb.start(script)
        return fb, c

    yield make
    for fb, c in made:
        fb.stop(c)


def events(c, kind):
    return [(value, reason) for ev, value, reason in c.events if ev == kind]


def alias_of(p):
    return (p.props or {}).get(P.TOPIC_ALIAS)


# ---------------------------------------------------------------- resend after reconnect

@pytest.mark.parametrize("version", [V5, V311, V31])
def test_session_present_resends_publish_with_dup_and_pubrel_past_pubrec(rig, version):
    def server(fb):
        first = fb.handshake()
        assert first.clean == (version == V5)  # v5 starts clean and resumes later; 3.x asked for a kept session
        p1 = fb.expect(PUBLISH, qos=1, dup=False, topic="a/1")
        p2 = fb.expect(PUBLISH, qos=2, dup=False, topic="a/2")
        p3 = fb.expect(PUBLISH, qos=2, dup=False, topic="a/3")
        fb.send(Packet(PUBREC, pid=p3.pid))
        fb.expect(PUBREL, pid=p3.pid)
        fb.close()

        again = fb.handshake(session_present=True)
        assert not again.clean
        fb.expect(PUBREL, pid=p3.pid)  # past PUBREC: PUBREL again, never the PUBLISH, and first
        fb.expect(PUBLISH, pid=p1.pid, dup=True, qos=1, topic="a/1", payload=b"one")
        fb.expect(PUBLISH, pid=p2.pid, dup=True, qos=2, topic="a/2", payload=b"two")
        fb.send(Packet(PUBACK, pid=p1.pid), Packet(PUBREC, pid=p2.pid), Packet(PUBCOMP, pid=p3.pid))
        fb.expect(PUBREL, pid=p2.pid)
        fb.send(Packet(PUBCOMP, pid=p2.pid))
        fb.expect_nothing(0.1)

    fb, c = rig(version, server, **RESUME[version])
    c.connect()
    pids = [c.publish("a/1", b"one", 1), c.publish("a/2", b"two", 2), c.publish("a/3", b"three", 2)]
    fb.run(c)
    assert c.session.flights.count == 0 and c.session.flights.unacked == 0
    assert [v for v, r in events(c, PUBACK)] == pids[:1]
    assert sorted(v for v, r in events(c, PUBCOMP)) == sorted(pids[1:])
    assert len(fb.received(PUBLISH)) == 5  # 3 + the 2 resends: a/3 never went out again
    assert not events(c, LOST)


def test_pubcomp_packet_id_not_found_after_a_resumed_pubrel_is_still_delivered(rig):
    # Once the server has answered our PUBLISH with PUBREC it owns the message: a PUBCOMP saying 0x92 (it no
    # longer knows the id, e.g. its PUBCOMP was lost with the link) ends the flow as delivered, not as a refusal.
    def server(fb):
        fb.handshake()
        p = fb.expect(PUBLISH, qos=2)
        fb.send(Packet(PUBREC, pid=p.pid))
        fb.expect(PUBREL, pid=p.pid)
        fb.close()
        fb.handshake(session_present=True)
        fb.expect(PUBREL, pid=p.pid)
        fb.send(Packet(PUBCOMP, pid=p.pid, reason=0x92))

    fb, c = rig(V5, server, **RESUME[V5])
    c.connect()
    pid = c.publish("a", b"x", 2)
    assert c.wait_for(pid, 5) is True
    assert events(c, PUBCOMP) == [(pid, 0x92)]  # on_event still hears the code


@pytest.mark.parametrize("version,opts", [(V5, dict(session_expiry=60)), (V311, dict(clean=False)),
                                          (V31, dict(clean=True))])  # 3.1 has no flag: only a clean session is new
def test_session_not_present_reports_lost_messages(rig, version, opts):
    def server(fb):
        fb.handshake()
        fb.expect(PUBLISH, qos=1)
        fb.expect(PUBLISH, qos=2)
        p3 = fb.expect(PUBLISH, qos=2)
        fb.send(Packet(PUBREC, pid=p3.pid))
        fb.expect(PUBREL, pid=p3.pid)
        fb.close()
        fb.handshake(session_present=False)
        fb.expect_nothing(0.2)  # nothing is resent to a session that does not know it

    fb, c = rig(version, server, **opts)
    c.connect()
    p1, p2, p3 = c.publish("a/1", b"one", 1), c.publish("a/2", b"two", 2), c.publish("a/3", b"three", 2)
    fb.run(c)
    lost = events(c, LOST)
    assert [(m.pid, m.topic, bytes(m.payload), m.qos) for m, r in lost] == [(p1, "a/1", b"one", 1),
                                                                           (p2, "a/2", b"two", 2)]
    assert [v for v, r in events(c, PUBCOMP)] == [p3]  # past PUBREC the server owned it: complete, not lost
    assert c.session.flights.count == 0 and c.session.flights.unacked == 0


@pytest.mark.parametrize("version", [V5, V311])
def test_republish_lost_sends_them_again_as_new(rig, version):
    def server(fb):
        fb.handshake()
        p1 = fb.expect(PUBLISH, qos=1)
        fb.expect(PUBLISH, qos=2)
        p3 = fb.expect(PUBLISH, qos=2)
        fb.send(Packet(PUBREC, pid=p3.pid))
        fb.expect(PUBREL, pid=p3.pid)
        fb.close()
        fb.handshake(session_present=True)  # one resend with DUP=1 ...
        fb.expect(PUBREL, pid=p3.pid)
        fb.expect(PUBLISH, pid=p1.pid, dup=True)
        fb.expect(PUBLISH, dup=True)
        fb.close()
        fb.handshake(session_present=False)  # ... then the session is gone: a new message has DUP=0
        n1 = fb.expect(PUBLISH, qos=1, dup=False, topic="a/1", payload=b"one")
        n2 = fb.expect(PUBLISH, qos=2, dup=False, topic="a/2", payload=b"two")
        fb.send(Packet(PUBACK, pid=n1.pid), Packet(PUBREC, pid=n2.pid))
        fb.expect(PUBREL, pid=n2.pid)
        fb.send(Packet(PUBCOMP, pid=n2.pid))
        fb.expect_nothing(0.1)  # and a/3, which the old session took over, is not published again

    fb, c = rig(version, server, republish_lost=True, **RESUME[version])
    c.connect()
    c.publish("a/1", b"one", 1), c.publish("a/2", b"two", 2), c.publish("a/3", b"three", 2)
    fb.run(c)
    assert not events(c, LOST) and len(events(c, PUBCOMP)) == 2  # a/2 acked anew; a/3 done with the old session
    assert c.session.flights.count == 0


@pytest.mark.parametrize("republish", [False, True])
def test_a_resend_still_queued_when_the_session_is_lost_is_lost_too(rig, republish):
    # A message sent once, queued for its DUP resend (the server's window was full), then the session ends:
    # it was sent before, so it is LOST like any unacknowledged message (or, republished, goes out as new).
    def server(fb):
        fb.handshake()
        a, b = fb.expect(PUBLISH, topic="a"), fb.expect(PUBLISH, topic="b")
        fb.close()
        fb.handshake(session_present=True, props={P.RECEIVE_MAXIMUM: 1})
        fb.expect(PUBLISH, pid=a.pid, dup=True)  # b waits for the window
        fb.expect_nothing(0.1)
        fb.close()
        fb.handshake(session_present=False)
        if republish:
            n1, n2 = fb.expect(PUBLISH, topic="a", dup=False), fb.expect(PUBLISH, topic="b", dup=False)
            fb.send(Packet(PUBACK, pid=n1.pid), Packet(PUBACK, pid=n2.pid))
        fb.expect_nothing(0.2)

    fb, c = rig(V5, server, republish_lost=republish, session_expiry=60)
    c.connect()
    c.publish("a", b"1", 1), c.publish("b", b"2", 1)
    fb.run(c)
    assert [m.topic for m, r in events(c, LOST)] == ([] if republish else ["a", "b"])
    assert c.session.flights.count == 0


# ---------------------------------------------------------------- retries

def test_v5_never_resends_inside_a_live_connection(rig):
    def server(fb):
        fb.handshake()
        p = fb.expect(PUBLISH, qos=1)
        fb.expect_nothing(0.5)  # retry_ms is a 3.x feature: v5 resends only after a reconnect
        fb.send(Packet(PUBACK, pid=p.pid))

    fb, c = rig(V5, server, retry_ms=100)
    c.connect()
    pid = c.publish("a", b"x", 1)
    fb.run(c)
    fb.run(c, until=lambda: c.session.flights.find(pid) < 0)


@pytest.mark.parametrize("version", [V311, V31])
def test_v3_timer_retry_resends_with_dup(rig, version):
    def server(fb):
        fb.handshake()
        p = fb.expect(PUBLISH, qos=1, dup=False)
        t = time.monotonic()
        fb.expect(PUBLISH, pid=p.pid, dup=True, topic="a", payload=b"x", timeout=1)
        assert time.monotonic() - t > 0.1  # not before retry_ms
        fb.send(Packet(PUBACK, pid=p.pid))
        q = fb.expect(PUBLISH, qos=2, dup=False)
        fb.send(Packet(PUBREC, pid=q.pid))
        fb.expect(PUBREL, pid=q.pid)
        fb.expect(PUBREL, pid=q.pid, timeout=1)  # past PUBREC the retry is a PUBREL, never the PUBLISH
        fb.send(Packet(PUBCOMP, pid=q.pid))
        fb.expect_nothing(0.4)

    fb, c = rig(version, server, retry_ms=150)
    c.connect()
    pid = c.publish("a", b"x", 1)
    fb.run(c, until=lambda: c.session.flights.find(pid) < 0)
    c.publish("b", b"y", 2)
    fb.run(c)
    assert c.session.flights.count == 0


# ---------------------------------------------------------------- keep-alive

class Clock:
    """A port whose clock the test moves: keep-alive is checked against events at exact ticks, never against
    wall-clock windows that two busy cores can stretch. The transport is the real one."""

    def __init__(self):
        self.now = 1000

    def network_up(self, *args):
        return True

    def ticks_ms(self):
        return self.now

    def open(self, host, port, tls=None):
        return tinymqtt_port.open(host, port, tls)


def at(c, clock, ms):
    """Moves the clock to ms and lets the client act on it; returns whether it sent a PINGREQ at that tick."""
    clock.now = ms
    c.loop(0.01)
    return c.session._ping_at == ms


def test_server_keepalive_overrides_ours(rig):
    def server(fb):
        c = fb.handshake(props={P.SERVER_KEEP_ALIVE: 1})
        assert c.keepalive == 60
        for _ in range(2):
            fb.expect(PINGREQ, timeout=10)
            fb.send(Packet(PINGRESP))

    clock = Clock()
    fb, c = rig(V5, server, keepalive=60, port_impl=clock)
    c.connect()  # at 1000
    assert not at(c, clock, 1999) and at(c, clock, 2000)  # 1 s, the server's keep-alive, not our 60
    fb.run(c, until=lambda: not c.session.pinging, timeout=10)
    assert not at(c, clock, 2999) and at(c, clock, 3000)
    fb.run(c)
    assert c.is_connected() and not c.errors


def test_pingreq_on_schedule_counts_from_the_last_traffic(rig):
    def server(fb):
        fb.handshake()
        fb.expect(PUBLISH, topic="go", timeout=10)  # sent at 1500, so the answer is traffic at 1500
        fb.send(Packet(PUBLISH, topic="x", payload=b"1", qos=1, pid=1))
        fb.expect(PUBACK, pid=1)
        for _ in range(2):
            fb.expect(PINGREQ, timeout=10)
            fb.send(Packet(PINGRESP))

    clock = Clock()
    fb, c = rig(V311, server, keepalive=1, port_impl=clock)
    c.connect()  # at 1000
    clock.now = 1500
    c.publish("go", b"")
    fb.run(c, until=lambda: c.messages, timeout=10)  # traffic at 1500 both ways
    assert not at(c, clock, 2000) and not at(c, clock, 2499)  # 1 s after the last traffic, not after CONNACK
    assert at(c, clock, 2500)
    fb.run(c, until=lambda: not c.session.pinging, timeout=10)
    assert not at(c, clock, 3499) and at(c, clock, 3500)
    fb.run(c)
    assert c.messages == [("x", b"1", 1)] and not c.errors


def test_silent_server_is_dead_within_one_and_a_half_keepalives(rig):
    def server(fb):
        fb.handshake()
        fb.expect(PINGREQ, timeout=10)  # and no PINGRESP
        fb.expect_closed(timeout=10)
        fb.handshake(timeout=10)  # it reconnects

    clock = Clock()
    fb, c = rig(V5, server, keepalive=1, port_impl=clock)
    c.connect()  # at 1000
    assert at(c, clock, 2000)
    at(c, clock, 2499)
    assert c.transport and not c.errors  # half a keep-alive for the PINGRESP: not over yet
    at(c, clock, 2500)
    assert len(c.errors) == 1 and isinstance(c.errors[0], ConnectionLost) and c.errors[0].reason == 0x8D
    clock.now = 3000  # past the reconnect backoff
    fb.run(c, until=lambda: c.is_connected() and fb.done, timeout=10)
    assert len(c.errors) == 1


# ---------------------------------------------------------------- the server's limits

def test_receive_maximum_window(rig):
    def server(fb):
        fb.handshake(props={P.RECEIVE_MAXIMUM: 2})
        pubs = [fb.expect(PUBLISH), fb.expect(PUBLISH)]
        fb.expect_nothing(0.3)  # exactly 2 on the wire until acks come
        for k in range(3):
            fb.send(Packet(PUBACK, pid=pubs[k].pid))
            pubs.append(fb.expect(PUBLISH))  # one ack lets exactly one more out
            fb.expect_nothing(0.05)
        fb.send(Packet(PUBACK, pid=pubs[3].pid), Packet(PUBACK, pid=pubs[4].pid))
        assert [p.payload for p in pubs] == [b"0", b"1", b"2", b"3", b"4"]
        assert not any(p.dup for p in pubs)

    fb, c = rig(V5, server)
    c.connect()
    for k in range(5):
        c.publish("rm", str(k).encode(), 1)
    fb.run(c)
    fb.run(c, until=lambda: not c.session.flights.count)
    assert len(events(c, PUBACK)) == 5 and c.session.flights.count == 0


def test_pubrel_is_never_held_back_by_receive_maximum(rig):
    def server(fb):
        fb.handshake(props={P.RECEIVE_MAXIMUM: 1})
        a = fb.expect(PUBLISH, qos=2, topic="a")
        fb.expect_nothing(0.1)  # b waits for the window
        fb.send(Packet(PUBREC, pid=a.pid))
        fb.expect(PUBREL, pid=a.pid)  # the window is still full (a awaits PUBCOMP) and PUBREL goes anyway
        fb.expect_nothing(0.1)
        fb.send(Packet(PUBCOMP, pid=a.pid))
        b = fb.expect(PUBLISH, qos=1, topic="b")
        fb.send(Packet(PUBACK, pid=b.pid))

    fb, c = rig(V5, server)
    c.connect()
    c.publish("a", b"1", 2), c.publish("b", b"2", 1)
    fb.run(c)
    fb.run(c, until=lambda: not c.session.flights.count)


def test_pubrel_resend_after_reconnect_goes_first_with_a_full_window(rig):
    def server(fb):
        fb.handshake(props={P.RECEIVE_MAXIMUM: 2})
        a, b = fb.expect(PUBLISH, topic="a"), fb.expect(PUBLISH, topic="b")
        fb.send(Packet(PUBREC, pid=a.pid))
        fb.expect(PUBREL, pid=a.pid)
        fb.expect_nothing(0.1)  # c waits: a and b fill the window
        fb.close()
        fb.handshake(session_present=True, props={P.RECEIVE_MAXIMUM: 1})
        fb.expect(PUBREL, pid=a.pid)
        fb.expect_nothing(0.1)  # a still counts until PUBCOMP: b waits
        fb.send(Packet(PUBCOMP, pid=a.pid))
        fb.expect(PUBLISH, pid=b.pid, dup=True)
        fb.send(Packet(PUBACK, pid=b.pid))
        cc = fb.expect(PUBLISH, topic="c", dup=False)
        fb.send(Packet(PUBACK, pid=cc.pid))

    fb, c = rig(V5, server, session_expiry=60)
    c.connect()
    c.publish("a", b"1", 2), c.publish("b", b"2", 1), c.publish("c", b"3", 1)
    fb.run(c)
    fb.run(c, until=lambda: not c.session.flights.count)
    assert c.session.flights.unacked == 0


def test_server_limits_refuse_before_anything_is_sent(rig):
    def server(fb):
        fb.handshake(props={P.MAXIMUM_QOS: 1, P.RETAIN_AVAILABLE: 0, P.MAXIMUM_PACKET_SIZE: 100})
        p = fb.expect(PUBLISH, qos=1, topic="t")  # the first thing after CONNECT is the one allowed publish
        assert len(p.raw) == 100
        fb.send(Packet(PUBACK, pid=p.pid))
        fb.expect_nothing(0.1)

    fb, c = rig(V5, server)
    c.connect()
    for kwargs, code in ((dict(qos=2), 0x9B), (dict(qos=1, retain=True), 0x9A), (dict(payload=b"x" * 93), 0x95)):
        args = dict(topic="t", payload=b"x", qos=1)
        args.update(kwargs)
        with pytest.raises(LocalProtocolError) as e:
            c.publish(**args)
        assert e.value.reason == code
        assert c.session.flights.count == 0
    c.publish("t", b"x" * 92, 1)  # exactly 100 bytes: allowed
    fb.run(c)
    assert len(fb.received(PUBLISH)) == 1 and c.session.flights.count == 0


# ---------------------------------------------------------------- topic aliases

def test_outbound_topic_aliases_and_lru_reassignment(rig):
    sent = ["t/1", "t/1", "t/2", "t/1", "t/3", "t/2"]

    def server(fb):
        fb.handshake(props={P.TOPIC_ALIAS_MAXIMUM: 2})
        pubs = [fb.expect(PUBLISH) for _ in sent]
        assert [(p.topic, alias_of(p)) for p in pubs] == [
            ("t/1", 1), ("", 1),  # first: topic + alias; then the alias alone
            ("t/2", 2), ("", 1),
            ("t/3", 2),  # out of aliases: the least recently used one (t/2's) is reassigned
            ("t/2", 1)]  # and t/1's now, since t/3 was used later
        known = {}
        for p in pubs:  # what the server makes of it
            if p.topic:
                known[alias_of(p)] = p.topic
            p.topic = known[alias_of(p)]
        assert [(p.topic, p.payload) for p in pubs] == [(t, str(k).encode()) for k, t in enumerate(sent)]

    fb, c = rig(V5, server)
    c.connect()
    for k, t in enumerate(sent):
        c.publish(t, str(k).encode())
    fb.run(c)


def test_topic_aliases_reset_on_reconnect_and_never_on_a_resend(rig):
    def server(fb):
        fb.handshake(props={P.TOPIC_ALIAS_MAXIMUM: 2})
        a = fb.expect(PUBLISH, topic="t/1", qos=1)
        b = fb.expect(PUBLISH, topic="", qos=1)
        assert alias_of(a) == alias_of(b) == 1
        fb.close()
        fb.handshake(session_present=True, props={P.TOPIC_ALIAS_MAXIMUM: 2})
        for p in (a, b):  # a resend carries its full topic and no alias
            r = fb.expect(PUBLISH, pid=p.pid, dup=True, topic="t/1")
            assert alias_of(r) is None
            fb.send(Packet(PUBACK, pid=p.pid))
        n = fb.expect(PUBLISH, topic="t/1", qos=0)  # the new connection starts with no aliases
        assert alias_of(n) == 1
        n = fb.expect(PUBLISH, topic="", qos=0)
        assert alias_of(n) == 1

    fb, c = rig(V5, server, session_expiry=60)
    c.connect()
    c.publish("t/1", b"a", 1), c.publish("t/1", b"b", 1)
    fb.run(c, until=lambda: fb.connections == 2 and c.session.flights.count == 0)
    c.publish("t/1", b"c"), c.publish("t/1", b"d")
    fb.run(c)


def test_inbound_aliases(rig):
    def server(fb):
        c = fb.handshake()
        assert c.props[P.TOPIC_ALIAS_MAXIMUM] == 2
        fb.send(Packet(PUBLISH, topic="s/1", payload=b"a", props={P.TOPIC_ALIAS: 1}),
                Packet(PUBLISH, topic="", payload=b"b", props={P.TOPIC_ALIAS: 1}),
                Packet(PUBLISH, topic="x", payload=b"c", props={P.TOPIC_ALIAS: 3}))  # > our maximum
        fb.expect_disconnect(0x94)
        fb.handshake()
        fb.send(Packet(PUBLISH, topic="", payload=b"d", props={P.TOPIC_ALIAS: 1}))  # forgotten: unknown now
        fb.expect_disconnect(0x82)
        fb.handshake()

    fb, c = rig(V5, server, topic_alias_maximum=2)
    fb.run(c)  # connects from loop(): connect() would raise what arrives in the same read as CONNACK
    assert c.messages == [("s/1", b"a", 0), ("s/1", b"b", 0)]
    assert [(type(e), e.reason) for e in c.errors] == [(RemoteProtocolError, 0x94), (RemoteProtocolError, 0x82)]


# ---------------------------------------------------------------- inbound QoS 2, unsolicited acks

@pytest.mark.parametrize("version", [V5, V311, V31])
def test_inbound_qos2_exactly_once(rig, version):
    def server(fb):
        fb.handshake()
        fb.send(Packet(PUBLISH, topic="q", payload=b"1", qos=2, pid=7))
        fb.expect(PUBREC, pid=7)
        fb.send(Packet(PUBLISH, topic="q", payload=b"1", qos=2, pid=7, dup=True))  # our PUBREC got lost
        fb.expect(PUBREC, pid=7)
        fb.send(Packet(PUBREL, pid=7))
        fb.expect(PUBCOMP, pid=7, reason=0)
        fb.send(Packet(PUBLISH, topic="q", payload=b"2", qos=2, pid=7))  # id 7 is free again: a new message
        fb.expect(PUBREC, pid=7)
        fb.send(Packet(PUBREL, pid=7))
        fb.expect(PUBCOMP, pid=7)
        fb.send(Packet(PUBREL, pid=9))  # unknown: still completed
        fb.expect(PUBCOMP, pid=9, reason=0x92 if version == V5 else 0)

    fb, c = rig(version, server)
    c.connect()
    fb.run(c)
    assert c.messages == [("q", b"1", 2), ("q", b"2", 2)]


def test_inbound_receive_maximum_exceeded(rig):
    def server(fb):
        c = fb.handshake()
        assert c.props[P.RECEIVE_MAXIMUM] == 2
        # Flows past our PUBREC get a memory bound of max(64x, 1024) (mosquitto 2.0 overshoots); one more is too many.
        fb.send(*[Packet(PUBLISH, topic="q", payload=b"%d" % k, qos=2, pid=k) for k in range(1, 1026)])
        for k in range(1, 1025):
            fb.expect(PUBREC, pid=k)
        fb.expect_disconnect(0x93)
        fb.handshake(session_present=True)
        fb.send(Packet(PUBREL, pid=1), Packet(PUBREL, pid=2))  # the kept session still knows 1 and 2
        fb.expect(PUBCOMP, pid=1, reason=0)
        fb.expect(PUBCOMP, pid=2, reason=0)

    fb, c = rig(V5, server, receive_maximum=2, session_expiry=60)
    fb.run(c)  # connects from loop(): connect() would raise what arrives in the same read as CONNACK
    assert c.messages == [("q", b"%d" % k, 2) for k in range(1, 1025)]
    assert c.errors[0].reason == 0x93


def test_receive_maximum_strict_for_unacked_messages(rig):
    # Manual ack: messages the application has not acknowledged are held to Receive Maximum exactly.
    def server(fb):
        fb.handshake()
        fb.send(*[Packet(PUBLISH, topic="q", payload=b"%d" % k, qos=1, pid=k) for k in (1, 2, 3)])
        fb.expect_disconnect(0x93)

    fb, c = rig(V5, server, receive_maximum=2, manual_ack=True)
    fb.run(c)
    assert [m[1] for m in c.messages] == [b"1", b"2"]
    assert c.errors[0].reason == 0x93


@pytest.mark.parametrize("version", [V5, V311])
def test_unsolicited_acks(rig, version):
    def server(fb):
        fb.handshake()
        fb.send(Packet(PUBACK, pid=77), Packet(PUBCOMP, pid=78))
        fb.send(Packet(PUBREC, pid=79))
        fb.expect(PUBREL, pid=79, reason=0x92 if version == V5 else 0)  # let the server finish its flow
        p = fb.expect(PUBLISH, qos=1)  # and the connection carries on
        fb.send(Packet(PUBACK, pid=p.pid))

    fb, c = rig(version, server)
    c.connect()
    fb.run(c, until=lambda: fb.received(PUBREL))
    pid = c.publish("a", b"x", 1)
    fb.run(c)
    fb.run(c, until=lambda: not c.session.flights.count)
    assert c.session.unsolicited == 3
    assert [v for v, r in events(c, PUBACK)] == [pid] and not c.errors


@pytest.mark.parametrize("version", [V5, V311])
def test_publish_before_suback_is_delivered(rig, version):
    got = []

    def server(fb):
        fb.handshake()
        s = fb.expect(SUBSCRIBE)
        fb.send(Packet(PUBLISH, topic="a/x", payload=b"early", qos=1, pid=5))
        fb.expect(PUBACK, pid=5)
        fb.send(Packet(SUBACK, pid=s.pid, codes=[1]))
        s = fb.expect(SUBSCRIBE)
        fb.send(Packet(PUBLISH, topic="b/x", payload=b"early too", qos=0), Packet(SUBACK, pid=s.pid, codes=[0]))

    fb, c = rig(version, server)
    c.connect()
    assert c.subscribe("a/#", 1) == [1]
    assert c.messages == [("a/x", b"early", 1)]
    assert c.subscribe("b/#", 0, handler=lambda m: got.append(bytes(m.payload))) == [0]
    assert got == [b"early too"]
    fb.run(c)


@pytest.mark.parametrize("version", [V5, V311])
def test_subscribe_cut_before_its_suback_returns_none_and_the_new_connection_subscribes(rig, version):
    # The link drops between SUBSCRIBE and SUBACK: the request's slot goes with the old connection and the new
    # session subscribes again under a new packet id, so subscribe() returns None (as offline), not a timeout.
    def server(fb):
        fb.handshake()
        fb.expect(SUBSCRIBE, topics=[("a/#", 1)])
        fb.close()
        fb.handshake()
        s = fb.expect(SUBSCRIBE, topics=[("a/#", 1)])
        fb.send(Packet(SUBACK, pid=s.pid, codes=[1]))

    fb, c = rig(version, server)
    c.connect()
    assert c.subscribe("a/#", 1, timeout=20) is None
    fb.run(c, until=lambda: not c.session.flights.count)
    assert [type(e) for e in c.errors] == [ConnectionLost] and not c._done


async def test_asyncio_subscribe_cut_before_its_suback_returns_none_and_the_new_connection_subscribes():
    # As the blocking client: the request's slot goes with the old connection without an event, so an awaited
    # subscribe() must not wait for an ack of a packet id nobody will answer any more.
    import asyncio
    from tinymqtt.aio import AsyncClient

    def server(fb):
        fb.handshake()
        fb.expect(SUBSCRIBE, topics=[("a/#", 1)], timeout=10)
        fb.close()
        fb.handshake()
        s = fb.expect(SUBSCRIBE, topics=[("a/#", 1)], timeout=10)
        fb.send(Packet(SUBACK, pid=s.pid, codes=[1]))

    fb = FakeBroker(V311)
    c = AsyncClient("127.0.0.1", fb.port, version=V311, client_id="t1", port_impl=tinymqtt_port,
                    backoff_min_ms=10, backoff_max_ms=40)
    fb.start(server)
    try:
        await c.connect()
        assert await asyncio.wait_for(c.subscribe("a/#", 1), 20) is None
        await asyncio.get_running_loop().run_in_executor(None, fb.join)
        for _ in range(1000):  # bounded: the new SUBACK frees the resubscription's slot
            if not c.session.flights.count:
                break
            await asyncio.sleep(0.01)
        assert not c.session.flights.count and not c._done
    finally:
        await c.close()
        fb.stop()


def test_failure_table_keeps_at_most_64_unasked_refusals(rig):
    def server(fb):
        fb.handshake()
        for _ in range(70):
            fb.send(Packet(PUBACK, pid=fb.expect(PUBLISH, qos=1).pid, reason=0x87))

    fb, c = rig(V5, server, max_inflight=80)
    c.connect()
    pids = [c.publish("a", b"x", 1) for _ in range(70)]
    fb.run(c, until=lambda: not c.session.flights.count)
    assert len(c._done) == 64 and len(events(c, PUBACK)) == 70  # on_event had every refusal
    with pytest.raises(NotDelivered) as e:
        c.wait_for(pids[0], 5)
    assert e.value.reason == 0x87 and len(c._done) == 63


# ---------------------------------------------------------------- servers that break the rules

MALFORMED = [
    ("bad flags", b"\x42\x02\x00\x01", 0x81),  # PUBACK with fixed header flags 0010
    ("PUBLISH QoS 3", b"\x36\x07\x00\x01t\x00\x01\x00x", 0x81),
    ("5-byte remaining length", b"\x30\xff\xff\xff\xff\x01", 0x81),
    ("256 MB remaining length", b"\x90\xff\xff\xff\x7f", 0x95),  # (a SUBACK: a PUBLISH that large is skipped unread,
]                                                                  # tests/test_bad_input.py)


@pytest.mark.parametrize("version", [V5, V311])
@pytest.mark.parametrize("name,raw,reason", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_server_packet_closes_cleanly_and_session_continues(rig, version, name, raw, reason):
    def server(fb):
        fb.handshake()
        p = fb.expect(PUBLISH, qos=1)
        fb.send_raw(raw)
        if version == V5:
            fb.expect_disconnect(reason)
        else:
            fb.expect_closed()  # 3.x has no way to say why
        fb.handshake(session_present=True)
        fb.expect(PUBLISH, pid=p.pid, dup=True, payload=b"1")
        fb.send(Packet(PUBACK, pid=p.pid))
        q = fb.expect(PUBLISH, qos=1, dup=False, payload=b"2")
        fb.send(Packet(PUBACK, pid=q.pid))

    fb, c = rig(version, server, max_packet_size=4096, **RESUME[version])
    c.connect()
    tracemalloc.start()
    try:
        pid = c.publish("a", b"1", 1)
        fb.run(c, until=lambda: c.session.flights.find(pid) < 0)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 << 20  # never sized anything by the announced length
    c.publish("a", b"2", 1)
    fb.run(c)
    fb.run(c, until=lambda: not c.session.flights.count)
    assert [(type(e), e.reason) for e in c.errors] == [(RemoteProtocolError, reason)]
    assert len(c.session.inbuf) == 4096 and c.session.flights.count == 0 and c.session.flights.unacked == 0


def test_publish_before_connack_is_a_protocol_error(rig):
    def server(fb):
        fb.wait_connection()
        fb.expect(CONNECT)
        fb.send(Packet(PUBLISH, topic="a", payload=b"x"))
        fb.expect_disconnect(0x82)

    fb, c = rig(V5, server, reconnect=False)
    with pytest.raises(RemoteProtocolError) as e:
        c.connect()
    assert e.value.reason == 0x82
    fb.join()
    assert c.messages == []


@pytest.mark.parametrize("version", [V5, V311])
def test_subscribe_from_the_server_is_a_protocol_error(rig, version):
    def server(fb):
        fb.handshake()
        fb.send(Packet(SUBSCRIBE, pid=1, topics=[("a", 0)]))
        if version == V5:
            fb.expect_disconnect(0x82)
        else:
            fb.expect_closed()
        fb.handshake()

    fb, c = rig(version, server)
    fb.run(c)  # connects from loop(): connect() would raise what arrives in the same read as CONNACK
    assert [(type(e), e.reason) for e in c.errors] == [(RemoteProtocolError, 0x82)]


@pytest.mark.parametrize("version,code,reason", [(V311, 4, 0x86), (V31, 2, 0x85), (V5, 0x87, 0x87)])
def test_connack_refusal_raises_connect_error(rig, version, code, reason):
    def server(fb):
        fb.wait_connection()
        fb.expect(CONNECT)
        fb.send(Packet(CONNACK, reason=code))
        fb.expect_closed()

    fb, c = rig(version, server)
    with pytest.raises(ConnectError) as e:
        c.connect()
    assert e.value.reason == reason
    fb.join()
    assert not c.is_connected() and c.transport is None


# ---------------------------------------------------------------- exact bytes

def test_v5_connect_bytes_with_will_and_user_properties(rig):
    expected = bytes.fromhex(
        "10 3D"                                # CONNECT, remaining length 61
        "00 04 4D 51 54 54 05"                 # "MQTT", level 5
        "EE"                                   # user name, password, will retain, will QoS 1, will, clean start
        "00 1E"                                # keep alive 30
        "0F"                                   # properties, 15 bytes:
        "26 00 01 61 00 01 62"                 # user property ("a", "b")
        "21 00 10"                             # receive maximum 16
        "27 10 00 00 04"                       # maximum packet size 268435460 (CPython's default: MQTT's largest)
        "00 04 64 65 76 31"                    # client id "dev1"
        "0C"                                   # will properties, 12 bytes:
        "18 00 00 00 0A"                       # will delay interval 10
        "26 00 01 6B 00 01 76"                 # user property ("k", "v")
        "00 03 77 2F 74"                       # will topic "w/t"
        "00 03 62 79 65"                       # will payload "bye"
        "00 01 75"                             # user name "u"
        "00 01 70")                            # password "p"
    will = Packet(PUBLISH, topic="w/t", payload=b"bye", qos=1, retain=True,
                  props={P.WILL_DELAY_INTERVAL: 10, P.USER_PROPERTY: [("k", "v")]})

    def server(fb):
        fb.wait_connection()
        assert fb.recv_raw() == expected
        fb.send(Packet(CONNACK))

    fb, c = rig(V5, server, client_id="dev1", keepalive=30, will=will, username="u", password=b"p",
                props={P.USER_PROPERTY: [("a", "b")]})
    c.connect()
    fb.join()


def test_v31_connect_bytes(rig):
    expected = bytes.fromhex(
        "10 1A"                                # CONNECT, remaining length 26
        "00 06 4D 51 49 73 64 70 03"           # "MQIsdp", level 3
        "C0"                                   # user name, password; clean session off
        "00 0A"                                # keep alive 10
        "00 04 64 65 76 31"                    # client id "dev1"
        "00 01 75"                             # user name "u"
        "00 03 70 77 64")                      # password "pwd"

    def server(fb):
        fb.wait_connection()
        assert fb.recv_raw() == expected
        fb.send(Packet(CONNACK))

    fb, c = rig(V31, server, client_id="dev1", keepalive=10, clean=False, username="u", password=b"pwd")
    c.connect()
    fb.join()


# ---------------------------------------------------------------- regressions found while writing these

@pytest.mark.parametrize("version", [V5, V311])
def test_manual_ack_of_messages_the_application_held(rig, version):
    # The application keeps each message and acks it later: every one must keep its own packet id.
    ready = threading.Event()

    def server(fb):
        fb.handshake()
        fb.send(Packet(PUBLISH, topic="m", payload=b"1", qos=1, pid=1),
                Packet(PUBLISH, topic="m", payload=b"2", qos=2, pid=2))
        fb.expect_nothing(0.2)  # nothing is acknowledged before the application says so
        ready.set()
        fb.expect(PUBACK, pid=1)
        fb.expect(PUBREC, pid=2)
        fb.send(Packet(PUBREL, pid=2))
        fb.expect(PUBCOMP, pid=2)

    fb, c = rig(version, server, manual_ack=True)
    held = []
    c.on_message = held.append
    c.connect()
    fb.run(c, until=ready.is_set)
    assert [(m.pid, m.qos, m.topic) for m in held] == [(1, 1, "m"), (2, 2, "m")]
    for m in held:
        c.ack(m)
    fb.run(c)


@pytest.mark.parametrize("version", [V5, V311])
def test_ack_without_manual_ack_does_nothing(rig, version):
    # Without manual_ack the session acknowledged the message after its handler (and has no ack() of its own):
    # an application that calls ack() anyway sends nothing more.
    def server(fb):
        fb.handshake()
        fb.send(Packet(PUBLISH, topic="m", payload=b"1", qos=1, pid=1))
        fb.expect(PUBACK, pid=1)
        fb.expect_nothing(0.2)

    fb, c = rig(version, server)
    got = []
    c.on_message = got.append
    c.connect()
    fb.run(c, until=lambda: got)
    c.ack(got[0])
    fb.run(c)


def test_first_loop_connects_at_once_whatever_the_clock_reads(rig):
    # ticks_ms() wraps at 2**30; read past 2**29 it made the first loop() (without connect()) wait ~6 days.
    late = types.SimpleNamespace(network_up=tinymqtt_port.network_up, open=tinymqtt_port.open,
                                 ticks_ms=lambda: (tinymqtt_port.ticks_ms() + (1 << 29) + 5000) & 0x3FFFFFFF)
    fb, c = rig(V5, lambda fb: fb.handshake(), port_impl=late)
    fb.run(c, until=c.is_connected, timeout=2)


@pytest.mark.parametrize("offline", [False, True], ids=["online", "queued offline, aliases on"])
def test_a_publish_exactly_our_buffer_size_is_sent(rig, offline):
    # 4096 bytes (our `out`) passes publish(); it used to wait for 3 bytes of alias room that never came,
    # and block every message behind it. Queued while aliases were off, it goes out without one.
    def server(fb):
        fb.handshake(props={P.TOPIC_ALIAS_MAXIMUM: 2} if offline else None)
        p = fb.expect(PUBLISH, topic="t", qos=1)
        assert len(p.raw) == 4096 and alias_of(p) is None
        q = fb.expect(PUBLISH, payload=b"next")
        fb.send(Packet(PUBACK, pid=p.pid), Packet(PUBACK, pid=q.pid))

    fb, c = rig(V5, server, max_packet_size=4096)  # (fixed buffers: CPython's default ones grow)
    if not offline:
        c.connect()
    c.publish("t", b"x" * 4087, 1)
    c.publish("t", b"next", 1)
    fb.run(c)
    fb.run(c, until=lambda: not c.session.flights.count)


def test_batched_publish_waits_for_room_instead_of_overflowing_out(rig):
    # A 3-byte Remaining Length made pump() underestimate the packet by a byte: encoding it raised out of
    # publish() and left the message queued but unsendable.
    def server(fb):
        fb.handshake()
        fb.expect(PUBLISH, topic="small")
        big = fb.expect(PUBLISH, topic="big", qos=1)
        fb.send(Packet(PUBACK, pid=big.pid))

    fb, c = rig(V311, server, batch=True, max_packet_size=40000)
    c.connect()
    c.publish("small", b"x")  # stays in `out`: batch mode
    free = len(c.session.out) - c.session.outlen
    c.publish("big", b"y" * (free - 10), 1)  # 11 + payload bytes: one more than the room left
    fb.run(c)
    fb.run(c, until=lambda: not c.session.flights.count)
    assert len(fb.received(PUBLISH)[-1]) == free + 1


# ---------------------------------------------------------------- issue 13: never silent (client API, point 9)

def test_wait_for_tells_delivered_from_refused_and_lost(rig):
    def server(fb):
        fb.handshake()
        ok, no, rec = fb.expect(PUBLISH, qos=1), fb.expect(PUBLISH, qos=1), fb.expect(PUBLISH, qos=2)
        fb.send(Packet(PUBACK, pid=ok.pid), Packet(PUBACK, pid=no.pid, reason=0x87),
                Packet(PUBREC, pid=rec.pid, reason=0x97))
        fb.expect(PUBLISH, qos=1, payload=b"lost")
        fb.close()
        fb.handshake(session_present=False)  # the session that had it is gone

    fb, c = rig(V5, server, session_expiry=60)
    c.connect()
    ok, no, rec = c.publish("a", b"1", 1), c.publish("a", b"2", 1), c.publish("a", b"3", 2)
    assert c.wait_for(ok, 10) is True
    for pid, reason in ((no, 0x87), (rec, 0x97)):
        with pytest.raises(NotDelivered) as e:
            c.wait_for(pid, 10)
        assert (e.value.pid, e.value.reason) == (pid, reason) and "refused" in str(e.value)
    lost = c.publish("a", b"lost", 1)
    with pytest.raises(NotDelivered) as e:
        c.wait_for(lost, 10)
    assert (e.value.pid, e.value.reason) == (lost, 0x80) and "lost" in str(e.value)
    fb.join()


async def test_asyncio_publish_tells_delivered_from_refused_and_lost():
    # The same conversation through AsyncClient: `await publish()` returns the reason code of a delivered
    # message and raises NotDelivered for a refused one and one lost with the session (the shared driver table).
    import asyncio
    from tinymqtt.aio import AsyncClient

    def server(fb):
        fb.handshake()
        fb.send(Packet(PUBACK, pid=fb.expect(PUBLISH, qos=1, timeout=10).pid, reason=0x10))
        fb.send(Packet(PUBACK, pid=fb.expect(PUBLISH, qos=1, timeout=10).pid, reason=0x87))
        fb.expect(PUBLISH, qos=1, payload=b"lost", timeout=10)
        fb.close()
        fb.handshake(session_present=False)

    fb = FakeBroker(V5)
    c = AsyncClient("127.0.0.1", fb.port, version=V5, client_id="t1", port_impl=tinymqtt_port, session_expiry=60,
                    backoff_min_ms=10, backoff_max_ms=40)
    fb.start(server)
    try:
        await c.connect()
        assert await asyncio.wait_for(c.publish("a", b"1", 1), 10) == 0x10
        with pytest.raises(NotDelivered) as e:
            await asyncio.wait_for(c.publish("a", b"2", 1), 10)
        assert e.value.reason == 0x87 and e.value.pid and "refused" in str(e.value)
        with pytest.raises(NotDelivered) as e:
            await asyncio.wait_for(c.publish("a", b"lost", 1), 10)
        assert e.value.reason == 0x80 and "lost" in str(e.value)
        assert not c._done  # nothing left behind in the finished-flow table
        await asyncio.get_running_loop().run_in_executor(None, fb.join)
    finally:
        await c.close()
        fb.stop()


async def test_asyncio_manual_ack_acknowledges_only_when_the_application_acks():
    # AsyncClient(manual_ack=True): messages() hands out QoS 1 and 2 messages unacknowledged; ack() sends the
    # PUBACK / PUBREC (the "mark" PUBLISH, sent first, shows nothing went out before).
    import asyncio
    from tinymqtt.aio import AsyncClient

    def server(fb):
        fb.handshake()
        fb.send(Packet(PUBLISH, topic="m", payload=b"1", qos=1, pid=5),
                Packet(PUBLISH, topic="m", payload=b"2", qos=2, pid=6))
        fb.expect(PUBLISH, topic="mark", timeout=10)
        fb.expect(PUBACK, pid=5, timeout=10)
        fb.expect(PUBREC, pid=6, timeout=10)
        fb.send(Packet(PUBREL, pid=6))
        fb.expect(PUBCOMP, pid=6, timeout=10)

    fb = FakeBroker(V5)
    c = AsyncClient("127.0.0.1", fb.port, version=V5, client_id="t1", port_impl=tinymqtt_port, manual_ack=True)
    fb.start(server)
    try:
        await c.connect()
        it = c.messages()
        m1 = await asyncio.wait_for(it.__anext__(), 10)
        m2 = await asyncio.wait_for(it.__anext__(), 10)
        assert (m1.payload, m1.qos, m1.pid, m2.payload, m2.qos, m2.pid) == (b"1", 1, 5, b"2", 2, 6)
        await c.publish("mark", b"", 0)
        await c.ack(m1)
        await c.ack(m2)
        await c.ack(m2)  # a second ack() sends nothing
        await asyncio.get_running_loop().run_in_executor(None, fb.join)
    finally:
        await c.close()
        fb.stop()


def test_publish_and_wait_for_raise_at_once_offline_without_reconnect(rig):
    def server(fb):
        fb.handshake()
        fb.expect(PUBLISH, qos=1)
        fb.close()  # no PUBACK: the only in-flight slot stays taken

    fb, c = rig(V311, server, reconnect=False, max_inflight=1)
    c.connect()
    first = c.publish("a", b"1", 1)
    fb.join()
    with pytest.raises(ConnectionLost):  # waits for a slot only while a connection may free one
        c.publish("a", b"2", 1, timeout=60)
    with pytest.raises(ConnectionLost):
        c.wait_for(first, 60)
    with pytest.raises(ConnectionLost):
        c.publish("a", b"3", 0)
    assert c.errors and c.errors[0] is c.last_error


KILLERS = [
    ("server closes", lambda fb: fb.close(), ConnectionLost, 0x80),
    ("server DISCONNECT", lambda fb: fb.send(Packet(DISCONNECT, reason=0x8B)), ConnectionLost, 0x8B),
    ("protocol error", lambda fb: fb.send_raw(b"\x62\x02\x00\x00"), RemoteProtocolError, 0x81),  # PUBREL id 0
    ("silent server", lambda fb: (fb.expect(PINGREQ, timeout=5), fb.expect_closed(5)), ConnectionLost, 0x8D),
]


@pytest.mark.parametrize("name,kill,kind,reason", KILLERS, ids=[k[0] for k in KILLERS])
def test_every_end_of_a_connection_reaches_the_application(rig, name, kill, kind, reason):
    def server(fb):
        fb.handshake()
        kill(fb)
        fb.handshake()

    fb, c = rig(V5, server, keepalive=1)
    fb.run(c, until=lambda: c.errors and c.is_connected(), timeout=10)  # loop() connects, and reconnects
    assert [(type(e), e.reason) for e in c.errors] == [(kind, reason)] and c.last_error is c.errors[0]
    c.disconnect()
    assert c.errors[-1] is None and c.last_error is None  # our own disconnect(): an event too, no error


def test_refused_unsolicited_pubrec_is_not_answered(rig):
    def server(fb):
        fb.handshake()
        fb.send(Packet(PUBREC, pid=79, reason=0x80), Packet(PUBREC, pid=80))
        fb.expect(PUBREL, pid=80, reason=0x92)  # the refusal ended flow 79: nothing follows it

    fb, c = rig(V5, server)
    c.connect()
    fb.run(c)
    assert c.session.unsolicited == 2


def test_acks_and_subscribes_respect_the_server_maximum_packet_size(rig):
    def server(fb):
        fb.handshake(props={P.MAXIMUM_PACKET_SIZE: 4})
        fb.send(Packet(PUBREL, pid=5))
        p = fb.expect(PUBCOMP, pid=5)
        assert len(p.raw) == 4  # 0x92 would make it 5 bytes: the reason code is left out

    fb, c = rig(V5, server)
    c.connect()
    with pytest.raises(LocalProtocolError) as e:
        c.subscribe("a/b", 1)
    assert e.value.reason == 0x95
    fb.run(c)


@pytest.mark.parametrize("why", ["session expiry", "reason 0x04"])
def test_server_disconnect_breaking_the_rules_is_a_protocol_error(rig, why):
    def server(fb):
        fb.handshake()
        fb.expect(PUBLISH)  # connected: what follows comes after CONNACK, not in the same read
        if why == "reason 0x04":
            fb.send(Packet(DISCONNECT, reason=0x04))
        else:
            fb.send(Packet(DISCONNECT, reason=0x8B, props={P.SESSION_EXPIRY_INTERVAL: 5}))
        fb.expect_disconnect(0x82)

    fb, c = rig(V5, server, reconnect=False)
    c.connect()
    c.publish("go", b"")
    fb.run(c, until=lambda: c.errors)
    fb.join()
    assert [(type(e), e.reason) for e in c.errors] == [(RemoteProtocolError, 0x82)]
    assert not events(c, DISCONNECT)


@pytest.mark.parametrize("ours,granted,clean_again", [(60, 0, True), (0, 60, False)])
def test_connack_session_expiry_overrides_ours(rig, ours, granted, clean_again):
    def server(fb):
        fb.handshake(props={P.SESSION_EXPIRY_INTERVAL: granted})
        fb.close()
        again = fb.handshake()
        assert again.clean == clean_again  # resume only a session the server said it keeps

    fb, c = rig(V5, server, session_expiry=ours)
    c.connect()
    fb.run(c)
