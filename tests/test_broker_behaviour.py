# The blocking Client against a real mosquitto, for MQTT 3.1 (level 3), 3.1.1 (4) and 5.0 (5): Last Will,
# retained messages and the online/offline status pattern, keep-alive, QoS 1/2 counts through the broker,
# v5 properties and topic aliases, session resume, (un)subscribe routing. Each test uses its own topic prefix
# and clears the retained messages it sets, so the session-scoped broker carries nothing between tests.
import time
import uuid

import pytest

from tinymqtt import props as P
from tinymqtt.client import Client
from tinymqtt.errors import LocalProtocolError
from tinymqtt.packets import Packet, PUBLISH, PINGREQ, frame, sub_options
from tinymqtt_cli.server_codec import decode  # the server half: any packet into a new Packet

from tests.support import report

VERSIONS = [pytest.param(3, id="v3.1"), pytest.param(4, id="v3.1.1"), pytest.param(5, id="v5")]
V5_ONLY = [pytest.param(5, id="v5")]


def uid():
    return uuid.uuid4().hex[:10]  # client ids stay within MQTT 3.1's 23 characters


class Msg:
    """A delivered message, copied: the Packet a handler gets may be reused and its payload is a view into the
    client's input buffer, both valid only during the call."""

    def __init__(self, p):
        self.topic, self.payload, self.qos, self.retain, self.dup = p.topic, bytes(p.payload), p.qos, p.retain, p.dup
        self.props = dict(p.props or {})

    def __repr__(self):
        return "<%s %r q%d r%d %r>" % (self.topic, self.payload, self.qos, self.retain, self.props)


class Inbox(list):
    """Collects messages; pass inbox.add as the handler (an empty list is falsy: never the handler itself)."""

    def add(self, p):
        self.append(Msg(p))

    def on(self, topic):
        return [m for m in self if m.topic == topic]

    def payloads(self, topic=None):
        return [m.payload for m in self if topic is None or m.topic == topic]


class Tap:
    """Wraps a connected client's transport.write: every packet the client writes, split and timestamped."""

    def __init__(self, client):
        self.packets = []  # (monotonic time, raw bytes of one packet)
        t = client.transport
        write = t.write

        def tapped(buf, n):
            data, pos, now = bytes(buf[:n]), 0, time.monotonic()
            while pos < n:
                total = frame(data, n - pos, n, pos)
                self.packets.append((now, data[pos:pos + total]))
                pos += total
            write(buf, n)

        t.write = tapped

    def of_type(self, t):
        return [(at, raw) for at, raw in self.packets if raw[0] >> 4 == t]


def run(clients, done, timeout=5.0):
    """Drives every client until done() or the timeout; returns done()."""
    end = time.monotonic() + timeout
    while not done():
        if time.monotonic() > end:
            return done()
        for c in clients:
            c.loop(0.005)
    return True


def idle(clients, seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for c in clients:
            c.loop(0.01)


@pytest.fixture
def mk(broker):
    """mk(version, **session_options) -> a connected Client (no auto-reconnect); all are closed afterwards."""
    made = []

    def make(version, connect=True, **kw):
        kw.setdefault("client_id", "t%d%s" % (version, uid()))
        c = Client(broker.host, broker.port, version=version, reconnect=False, **kw)
        made.append(c)
        if connect:
            c.connect()
        return c

    yield make
    for c in made:
        c.disconnect()


@pytest.fixture
def prefix():
    return "tb/%s/" % uid()


def cut(client):
    """Ends the connection without DISCONNECT, as a crash or a dead link would."""
    client.reconnect = False
    client.transport.sock.close()
    client.loop(0.01)  # the client notices (EBADF) and tidies up
    assert not client.is_connected() and client.transport is None


def set_retained(client, topic, payload, qos=1, props=None):
    """A retained publish the broker has stored once this returns (QoS 1/2: acknowledged)."""
    pid = client.publish(topic, payload, qos, retain=True, props=props)
    assert client.wait_for(pid, 5), "no ack for retained %r" % topic


def will(topic, payload, qos=1, retain=False, props=None):
    return Packet(PUBLISH, topic=topic, payload=payload, qos=qos, retain=retain, props=props)


# ------------------------------------------------------------------------------------------ Last Will

@pytest.mark.parametrize("version", VERSIONS)
def test_will_published_when_connection_is_cut(mk, prefix, version):
    inbox = Inbox()
    watcher = mk(version)
    watcher.subscribe(prefix + "will", 1, handler=inbox.add)
    dev = mk(version, will=will(prefix + "will", b"gone", qos=1))
    cut(dev)
    assert run([watcher], lambda: inbox, 5), "the broker never published the will"
    m, = inbox
    assert (m.topic, m.payload, m.qos, m.retain) == (prefix + "will", b"gone", 1, False)


@pytest.mark.parametrize("version", VERSIONS)
def test_will_not_published_after_clean_disconnect(mk, prefix, version):
    inbox = Inbox()
    watcher = mk(version)
    watcher.subscribe(prefix + "#", 1, handler=inbox.add)
    dev = mk(version, will=will(prefix + "will", b"gone"))
    dev.publish(prefix + "alive", b"1", 1)
    dev.disconnect()
    idle([watcher], 0.5)
    assert inbox.payloads() == [b"1"], "will published after a clean DISCONNECT: %r" % inbox


@pytest.mark.parametrize("version", V5_ONLY)
def test_v5_disconnect_with_will_message_reason(mk, prefix, version):
    inbox = Inbox()
    watcher = mk(version)
    watcher.subscribe(prefix + "will", 1, handler=inbox.add)
    dev = mk(version, will=will(prefix + "will", b"bye on purpose"))
    dev.disconnect(reason=0x04)  # Disconnect with Will Message
    assert run([watcher], lambda: inbox, 5)
    assert inbox.payloads() == [b"bye on purpose"]


@pytest.mark.parametrize("version", V5_ONLY)
def test_v5_will_properties_reach_a_v5_subscriber(mk, prefix, version):
    inbox = Inbox()
    watcher = mk(version)
    watcher.subscribe(prefix + "will", 1, handler=inbox.add)
    wp = {P.CONTENT_TYPE: "application/json", P.USER_PROPERTY: [("device", "d1"), ("why", "crash")],
          P.PAYLOAD_FORMAT_INDICATOR: 1, P.RESPONSE_TOPIC: prefix + "reply", P.CORRELATION_DATA: b"\x00\x01"}
    dev = mk(version, will=will(prefix + "will", b'{"online": false}', props=wp))
    cut(dev)
    assert run([watcher], lambda: inbox, 5)
    m, = inbox
    assert m.payload == b'{"online": false}'
    assert m.props[P.CONTENT_TYPE] == "application/json"
    assert m.props[P.USER_PROPERTY] == [("device", "d1"), ("why", "crash")]
    assert m.props[P.PAYLOAD_FORMAT_INDICATOR] == 1
    assert m.props[P.RESPONSE_TOPIC] == prefix + "reply"
    assert m.props[P.CORRELATION_DATA] == b"\x00\x01"


@pytest.mark.parametrize("version", V5_ONLY)
def test_v5_will_delay_interval(mk, prefix, version):
    inbox = Inbox()
    watcher = mk(version)
    watcher.subscribe(prefix + "will", 1, handler=inbox.add)
    # The will waits for the earlier of the delay and the end of the session: the session must outlive it.
    dev = mk(version, session_expiry=10, will=will(prefix + "will", b"late", props={P.WILL_DELAY_INTERVAL: 1}))
    cut(dev)
    t0 = time.monotonic()
    idle([watcher], 0.6)
    assert not inbox, "will published before its delay"
    assert run([watcher], lambda: inbox, 4), "will never published"
    assert time.monotonic() - t0 >= 0.9
    assert inbox.payloads() == [b"late"]
    # A session is left behind for 10 s; its will has gone, nothing else of it matters.


@pytest.mark.parametrize("version", V5_ONLY)
def test_v5_reconnect_within_will_delay_suppresses_the_will(mk, prefix, version):
    inbox = Inbox()
    watcher = mk(version)
    watcher.subscribe(prefix + "#", 1, handler=inbox.add)
    cid = "t5" + uid()
    w = will(prefix + "will", b"late", props={P.WILL_DELAY_INTERVAL: 1})
    dev = mk(version, client_id=cid, session_expiry=10, will=w)
    cut(dev)
    again = mk(version, client_id=cid, session_expiry=10, clean=False)  # no will this time
    again.publish(prefix + "back", b"1", 1)
    idle([watcher, again], 1.5)
    assert inbox.payloads() == [b"1"], "the will of a resumed session was published: %r" % inbox
    again.disconnect(props={P.SESSION_EXPIRY_INTERVAL: 0})


# ------------------------------------------------------------------------------------------ retained messages

@pytest.mark.parametrize("version", VERSIONS)
def test_retained_online_offline_status(mk, prefix, version):
    status = prefix + "dev1/status"
    dev = mk(version, will=will(status, b"offline", qos=1, retain=True))
    set_retained(dev, status, b"online")

    live = Inbox()
    watcher = mk(version)
    watcher.subscribe(status, 1, handler=live.add)
    assert run([watcher], lambda: live, 5)
    assert [(m.payload, m.retain) for m in live] == [(b"online", True)]  # the stored state, flagged retained

    cut(dev)
    assert run([watcher], lambda: len(live) == 2, 5), "no offline status after the cut"
    assert (live[1].payload, live[1].retain) == (b"offline", False)  # a live delivery

    late = Inbox()
    newcomer = mk(version)
    newcomer.subscribe(status, 1, handler=late.add)
    assert run([newcomer], lambda: late, 5)
    assert [(m.payload, m.retain, m.qos) for m in late] == [(b"offline", True, 1)]

    set_retained(watcher, status, b"")


@pytest.mark.parametrize("version", VERSIONS)
def test_retained_lifecycle(mk, prefix, version):
    state, marker = prefix + "room1/setpoint", prefix + "zz/setpoint"
    pub = mk(version)
    set_retained(pub, state, b"20.0")

    first = Inbox()
    c1 = mk(version)
    c1.subscribe(state, 1, handler=first.add)
    assert run([c1], lambda: first, 5)
    assert [(m.payload, m.retain) for m in first] == [(b"20.0", True)]

    set_retained(pub, state, b"21.5")  # replaces; the existing subscriber sees it live
    assert run([c1], lambda: len(first) == 2, 5)
    assert (first[1].payload, first[1].retain) == (b"21.5", False)

    wild = Inbox()
    c2 = mk(version)
    c2.subscribe(prefix + "+/setpoint", 1, handler=wild.add)
    assert run([c2], lambda: wild, 5)
    idle([c2], 0.1)
    assert [(m.topic, m.payload, m.retain) for m in wild] == [(state, b"21.5", True)]  # only the latest

    set_retained(pub, state, b"")  # clear: current subscribers see one empty message
    assert run([c1, c2], lambda: len(first) == 3 and len(wild) == 2, 5)
    assert first[2].payload == b"" and wild[1].payload == b""

    set_retained(pub, marker, b"m")
    late = Inbox()
    c3 = mk(version)
    c3.subscribe(prefix + "+/setpoint", 1, handler=late.add)
    assert run([c3], lambda: late, 5)
    idle([c3], 0.1)
    assert [(m.topic, m.payload) for m in late] == [(marker, b"m")], "a cleared retained message came back"
    set_retained(pub, marker, b"")


@pytest.mark.parametrize("version", VERSIONS)
def test_retained_delivery_qos_is_min_of_stored_and_subscription(mk, prefix, version):
    pub = mk(version)
    # A QoS 0 store has no ack to wait for: the acknowledged QoS 1 stores after it show it is done.
    pub.publish(prefix + "q0", b"s0", 0, retain=True)
    for stored in (1, 2):
        set_retained(pub, prefix + "q%d" % stored, b"s%d" % stored, qos=stored)
    set_retained(pub, prefix + "sync", b"x")
    try:
        for sub_qos in (0, 1, 2):
            inbox = Inbox()
            c = mk(version)
            c.subscribe(prefix + "+", sub_qos, handler=inbox.add)
            assert run([c], lambda: len(inbox) == 4, 5), inbox
            got = {m.topic: (m.qos, m.retain) for m in inbox}
            for stored in (0, 1, 2):
                assert got[prefix + "q%d" % stored] == (min(stored, sub_qos), True), (stored, sub_qos, got)
            c.disconnect()
    finally:
        for t in ("q0", "q1", "q2", "sync"):
            set_retained(pub, prefix + t, b"")


@pytest.mark.parametrize("version", VERSIONS)
def test_live_messages_have_retain_flag_clear(mk, prefix, version):
    inbox = Inbox()
    sub = mk(version)
    sub.subscribe(prefix + "t", 1, handler=inbox.add)
    pub = mk(version)
    set_retained(pub, prefix + "t", b"now")
    assert run([sub], lambda: inbox, 5)
    assert [(m.payload, m.retain) for m in inbox] == [(b"now", False)]
    set_retained(pub, prefix + "t", b"")


@pytest.mark.parametrize("version", V5_ONLY)
def test_v5_retain_as_published_keeps_the_flag(mk, prefix, version):
    inbox = Inbox()
    sub = mk(version)
    sub.subscribe([(prefix + "t", sub_options(1, retain_as_published=True))], handler=inbox.add)
    pub = mk(version)
    set_retained(pub, prefix + "t", b"kept")
    pub.publish(prefix + "t", b"plain", 1)
    assert run([sub], lambda: len(inbox) == 2, 5)
    assert [(m.payload, m.retain) for m in inbox] == [(b"kept", True), (b"plain", False)]
    set_retained(pub, prefix + "t", b"")


@pytest.mark.parametrize("version", V5_ONLY)
def test_v5_retain_handling(mk, prefix, version):
    pub = mk(version)
    set_retained(pub, prefix + "t", b"stored")
    try:
        inbox = Inbox()
        sub = mk(version)
        # 2: never send retained messages on subscribe; a live message still comes.
        sub.subscribe([(prefix + "t", sub_options(1, retain_handling=2))], handler=inbox.add)
        pub.publish(prefix + "t", b"live", 1)
        assert run([sub], lambda: inbox, 5)
        idle([sub], 0.1)
        assert inbox.payloads() == [b"live"]
        # 1: only when the subscription is new.
        del inbox[:]
        sub.subscribe([(prefix + "t", sub_options(1, retain_handling=1))], handler=inbox.add)
        sub.unsubscribe(prefix + "t")
        sub.subscribe([(prefix + "t", sub_options(1, retain_handling=1))], handler=inbox.add)
        sub.subscribe([(prefix + "t", sub_options(1, retain_handling=1))], handler=inbox.add)
        # 0: always.
        sub.subscribe([(prefix + "t", sub_options(1, retain_handling=0))], handler=inbox.add)
        assert run([sub], lambda: len(inbox) == 2, 5)
        idle([sub], 0.1)
        assert [(m.payload, m.retain) for m in inbox] == [(b"stored", True), (b"stored", True)]
    finally:
        set_retained(pub, prefix + "t", b"")


# ------------------------------------------------------------------------------------------ keep-alive

@pytest.fixture(scope="module")
def idle_with_keepalive(broker):
    """One client per version with keepalive 2 s, idle together until each has had two PINGREQs answered
    (the versions share the wait; a generous deadline, no window: busy cores only make it later)."""
    clients = {}
    for v in (3, 4, 5):
        c = clients[v] = Client(broker.host, broker.port, client_id="t%d%s" % (v, uid()), version=v, keepalive=2,
                                reconnect=False)
        c.connect()
        c.tap = Tap(c)
    t0 = time.monotonic()
    run(list(clients.values()), lambda: all(len(c.tap.of_type(PINGREQ)) >= 2 and not c.session.pinging
                                            for c in clients.values()), 20)
    yield t0, clients
    for c in clients.values():
        c.disconnect()


@pytest.mark.parametrize("version", VERSIONS)
def test_keepalive_pings_while_idle(idle_with_keepalive, version):
    t0, clients = idle_with_keepalive
    c = clients[version]
    # mosquitto closes a link silent for 1.5 x keepalive (3 s): still being connected shows the pings arrived.
    assert c.is_connected(), "the connection dropped while idle: %s" % c.last_error
    pings = [at - t0 for at, _ in c.tap.of_type(PINGREQ)]
    assert len(c.tap.packets) == len(pings), "only PINGREQs go out while idle"
    assert len(pings) >= 2, "PINGREQs at %r s (keepalive 2 s)" % pings
    # Never early: each PINGREQ comes a keep-alive after the last traffic (the previous PINGREQ's answer).
    assert all(b - a >= 1.99 for a, b in zip(pings, pings[1:])), pings
    assert not c.session.pinging, "the last PINGREQ got no PINGRESP"


# ------------------------------------------------------------------------------------------ QoS through the broker

@pytest.mark.parametrize("qos", [1, 2])
@pytest.mark.parametrize("version", VERSIONS)
def test_qos_messages_counted_exactly(mk, prefix, version, qos):
    # Subscribers keep the default table of 16 inbound QoS 2 flows. A 3.x server never hears of it (this
    # broker keeps up to 1000 in flight) and mosquitto 2.0.11 overshoots a v5 one (it frees a QoS 2 slot at
    # PUBREC, not PUBCOMP): flows past our PUBREC must be tolerated, within the session's memory bound.
    n = 500
    inbox = Inbox()
    sub = mk(version)
    sub.subscribe(prefix + "n", qos, handler=inbox.add)
    pub = mk(version)
    for i in range(n):
        pub.publish(prefix + "n", b"%d" % i, qos)
        if i % 50 == 49:
            sub.loop(0.001)
    assert run([pub, sub], lambda: len(inbox) >= n and not pub.session.flights.count, 20), \
        "%d of %d delivered, %d in flight, subscriber: %s" % (len(inbox), n, pub.session.flights.count, sub.last_error)
    idle([sub], 0.1)
    assert inbox.payloads() == [b"%d" % i for i in range(n)], "lost, duplicated or reordered"
    assert {m.qos for m in inbox} == {qos} and not any(m.dup for m in inbox)
    assert sub.is_connected() and pub.is_connected()


@pytest.mark.parametrize("version", V5_ONLY)
def test_v5_qos2_broker_overshooting_receive_maximum(mk, prefix, version):
    # mosquitto 2.0.11 sends more unfinished QoS 2 flows than our Receive Maximum of 16 (it frees a slot at
    # PUBREC): the session tolerates flows past its PUBREC within a memory bound, so the link should hold;
    # should it drop (0x93), a persistent session resumed at once still gets every message exactly once.
    inbox, drops = Inbox(), []
    sub = mk(version, session_expiry=60, receive_maximum=16)
    sub.reconnect, sub.backoff_min_ms, sub.backoff_max_ms = True, 20, 50
    sub.on_disconnect = drops.append
    sub.subscribe(prefix + "n", 2, handler=inbox.add)
    pub = mk(version)
    n = 200
    for i in range(n):
        pub.publish(prefix + "n", b"%d" % i, 2)
    assert run([pub, sub], lambda: len(inbox) >= n and not pub.session.flights.count, 20), \
        "%d of %d delivered after %d drops" % (len(inbox), n, len(drops))
    idle([sub], 0.2)
    assert inbox.payloads() == [b"%d" % i for i in range(n)], "lost, duplicated or reordered"
    assert all(e.reason == 0x93 for e in drops), drops
    report.record("v5 QoS 2, Receive Maximum 16, mosquitto 2.0.11", "%d drops (0x93) for %d messages, none lost"
                  % (len(drops), n))
    sub.disconnect(props={P.SESSION_EXPIRY_INTERVAL: 0})


# ------------------------------------------------------------------------------------------ MQTT 5 features

@pytest.mark.parametrize("version", V5_ONLY)
def test_v5_topic_aliases_on_the_wire(mk, prefix, version):
    inbox = Inbox()
    sub = mk(version, topic_alias_maximum=4)  # lets the broker alias too, if it wants
    sub.subscribe(prefix + "#", 1, handler=inbox.add)
    pub = mk(version)
    amax = pub.session.aliases.max
    assert amax > 0, "mosquitto grants topic aliases (Topic Alias Maximum in CONNACK)"
    tap = Tap(pub)
    topics = [prefix + "a%d" % i for i in range(amax + 3)]  # more topics than aliases: some get reassigned
    sent = []
    for rnd in range(3):
        for t in topics[:2] + topics:
            pub.publish(t, b"%d" % len(sent), 1)
            sent.append(t)
    assert run([pub, sub], lambda: len(inbox) == len(sent) and not pub.session.flights.count, 10)
    assert [m.topic for m in inbox] == sent, "a topic alias was mapped to the wrong topic"
    assert inbox.payloads() == [b"%d" % i for i in range(len(sent))]
    publishes = [decode(raw, 5) for _, raw in tap.of_type(PUBLISH)]
    aliased = [p for p in publishes if p.props and P.TOPIC_ALIAS in p.props]
    alone = [p for p in aliased if p.topic == ""]
    assert len(publishes) == len(sent)
    assert alone, "no PUBLISH used an alias alone"
    assert all(1 <= p.props[P.TOPIC_ALIAS] <= amax for p in aliased)


@pytest.mark.parametrize("version", V5_ONLY)
def test_v5_request_response(mk, prefix, version):
    responder = mk(version)

    def serve(req):
        pr = req.props
        responder.publish(pr[P.RESPONSE_TOPIC], b"re:" + bytes(req.payload), 1,
                          props={P.CORRELATION_DATA: pr[P.CORRELATION_DATA]})

    responder.subscribe(prefix + "req", 1, handler=serve)
    answers = Inbox()
    requester = mk(version)
    reply_to = prefix + "resp/" + requester.session.client_id
    requester.subscribe(reply_to, 1, handler=answers.add)
    for k in range(3):
        requester.publish(prefix + "req", b"q%d" % k, 1,
                          props={P.RESPONSE_TOPIC: reply_to, P.CORRELATION_DATA: b"id-%d" % k})
    assert run([requester, responder], lambda: len(answers) == 3, 5)
    assert sorted((m.props[P.CORRELATION_DATA], m.payload) for m in answers) == \
        [(b"id-%d" % k, b"re:q%d" % k) for k in range(3)]


@pytest.mark.parametrize("version", V5_ONLY)
def test_v5_publish_properties_reach_a_v5_subscriber(mk, prefix, version):
    inbox = Inbox()
    sub = mk(version)
    sub.subscribe(prefix + "#", 2, handler=inbox.add)
    pub = mk(version)
    users = [("a", "1"), ("b", "two"), ("a", "3")]  # repeated names, order kept
    pub.publish(prefix + "u", b"x", 1, props={P.USER_PROPERTY: users})
    pub.publish(prefix + "json", b'{"t": 21.5}', 2,
                props={P.CONTENT_TYPE: "application/json", P.PAYLOAD_FORMAT_INDICATOR: 1})
    pub.publish(prefix + "bin", b"\xff\xfe", 1, props={P.PAYLOAD_FORMAT_INDICATOR: 0})
    pub.publish(prefix + "exp", b"e", 1, props={P.MESSAGE_EXPIRY_INTERVAL: 100})
    assert run([pub, sub], lambda: len(inbox) == 4, 5)
    u, j, b, e = (inbox.on(prefix + t)[0] for t in ("u", "json", "bin", "exp"))
    assert u.props[P.USER_PROPERTY] == users
    assert j.props[P.CONTENT_TYPE] == "application/json" and j.props[P.PAYLOAD_FORMAT_INDICATOR] == 1
    assert j.qos == 2
    assert b.payload == b"\xff\xfe" and b.props.get(P.PAYLOAD_FORMAT_INDICATOR, 0) == 0
    assert 98 <= e.props[P.MESSAGE_EXPIRY_INTERVAL] <= 100  # the remaining lifetime


@pytest.mark.parametrize("version", V5_ONLY)
def test_v5_expired_retained_message_is_not_delivered(mk, prefix, version):
    pub = mk(version)
    set_retained(pub, prefix + "short", b"gone soon", props={P.MESSAGE_EXPIRY_INTERVAL: 1})
    set_retained(pub, prefix + "long", b"stays", props={P.MESSAGE_EXPIRY_INTERVAL: 60})
    try:
        time.sleep(2.1)
        inbox = Inbox()
        sub = mk(version)
        sub.subscribe(prefix + "+", 1, handler=inbox.add)
        assert run([sub], lambda: inbox, 5)
        idle([sub], 0.1)
        assert [m.topic for m in inbox] == [prefix + "long"]
        assert inbox[0].props[P.MESSAGE_EXPIRY_INTERVAL] <= 58
    finally:
        set_retained(pub, prefix + "long", b"")


@pytest.mark.parametrize("version", VERSIONS)
def test_empty_client_id(mk, version):
    if version == 3:  # 3.1 requires 1 to 23 characters: refused before anything is sent
        c = mk(version, client_id="", connect=False)
        with pytest.raises(LocalProtocolError):
            c.connect()
        assert c.transport is None, "the socket opened for the refused CONNECT was left open"
        return
    c = mk(version, client_id="")
    assert c.is_connected()
    if version == 5:  # the server assigns one and says which
        assert c.session.client_id and c.session.client_id.startswith("auto-")


# ------------------------------------------------------------------------------------------ sessions

@pytest.mark.parametrize("version", VERSIONS)
def test_persistent_session_gets_messages_published_while_offline(mk, prefix, version):
    cid = "t%d%s" % (version, uid())
    persist = {"session_expiry": 60} if version == 5 else {"clean": False}
    first = Inbox()
    sub = mk(version, client_id=cid, **persist)
    sub.subscribe(prefix + "#", 2, handler=first.add)
    sub.disconnect()

    pub = mk(version)
    pids = [pub.publish(prefix + "m", b"q1-%d" % i, 1) for i in range(5)]
    pids += [pub.publish(prefix + "m", b"q2-%d" % i, 2) for i in range(3)]
    assert all(pub.wait_for(pid, 5) for pid in pids)
    pub.publish(prefix + "m", b"q0", 0)  # QoS 0 is not queued for an offline client

    later = Inbox()
    back = mk(version, client_id=cid, connect=False, **dict(persist, clean=False))
    back.on_message = later.add
    assert back.connect(), "session present"
    want = [b"q1-%d" % i for i in range(5)] + [b"q2-%d" % i for i in range(3)]
    assert run([back], lambda: len(later) >= len(want), 5), later
    idle([back], 0.1)
    assert later.payloads() == want
    assert [m.qos for m in later] == [1] * 5 + [2] * 3
    assert not first
    # Drop the session on the broker.
    if version == 5:
        back.disconnect(props={P.SESSION_EXPIRY_INTERVAL: 0})
    else:
        back.disconnect()
        mk(version, client_id=cid, clean=True).disconnect()


@pytest.mark.parametrize("version", VERSIONS)
def test_same_client_resumes_its_session_and_handlers(mk, prefix, version):
    persist = {"session_expiry": 60} if version == 5 else {"clean": False}
    inbox = Inbox()
    sub = mk(version, **persist)
    sub.subscribe(prefix + "#", 1, handler=inbox.add)
    sub.disconnect()
    pub = mk(version)
    assert all(pub.wait_for(pub.publish(prefix + "x", b"%d" % i, 1), 5) for i in range(3))
    sub.connect()  # a later connection resumes: clean start off
    assert sub.session.session_present or version == 3
    assert run([sub], lambda: len(inbox) == 3, 5)
    assert inbox.payloads() == [b"0", b"1", b"2"]
    if version == 5:
        sub.disconnect(props={P.SESSION_EXPIRY_INTERVAL: 0})


# ------------------------------------------------------------------------------------------ (un)subscribe routing

@pytest.mark.parametrize("version", VERSIONS)
def test_unsubscribe_stops_delivery(mk, prefix, version):
    inbox = Inbox()
    sub = mk(version)
    sub.subscribe([(prefix + "a", 1), (prefix + "b", 1)], handler=inbox.add)
    pub = mk(version)
    pub.publish(prefix + "a", b"a1", 1)
    pub.publish(prefix + "b", b"b1", 1)
    assert run([pub, sub], lambda: len(inbox) == 2, 5)
    codes = sub.unsubscribe(prefix + "a")
    assert codes == ([0] if version == 5 else None)
    pub.publish(prefix + "a", b"a2", 1)
    pub.publish(prefix + "b", b"b2", 1)  # same publisher, same subscriber: arrives after a2 would have
    assert run([pub, sub], lambda: len(inbox) == 3, 5)
    idle([sub], 0.05)
    assert inbox.payloads() == [b"a1", b"b1", b"b2"]
    if version == 5:
        assert sub.unsubscribe(prefix + "never") == [0x11]  # No subscription existed


@pytest.mark.parametrize("version", VERSIONS)
def test_several_filters_in_one_subscribe_and_handlers(mk, prefix, version):
    h1, h2, rest = Inbox(), Inbox(), Inbox()
    sub = mk(version)
    sub.on_message = rest.add
    codes = sub.subscribe([(prefix + "a/+", 1), (prefix + "b/#", 0), (prefix + "c", 2)], handler=h1.add)
    assert codes == [1, 0, 2]
    assert sub.subscribe(prefix + "d", 1, handler=h2.add) == [1]
    assert sub.subscribe(prefix + "e", 1) == [1]  # no handler: on_message
    pub = mk(version)
    for t in ("a/x", "b/y/z", "b", "c", "d", "e", "a/x/deeper", "f"):
        pub.publish(prefix + t, t.encode(), 2)
    pub.publish(prefix + "e", b"end", 2)  # QoS 2 like the rest: mosquitto forwards QoS 2 only at PUBREL
    assert run([pub, sub], lambda: rest.payloads()[-1:] == [b"end"], 5)
    assert [(m.topic[len(prefix):], m.qos) for m in h1] == [("a/x", 1), ("b/y/z", 0), ("b", 0), ("c", 2)]
    assert [m.topic[len(prefix):] for m in h2] == ["d"]
    assert rest.payloads() == [b"e", b"end"]


@pytest.mark.parametrize("version", VERSIONS)
def test_with_statement_and_loop_forever(broker, prefix, version):
    # The two idioms people bring from paho: `with Client(...) as c:` connects and disconnects; loop_forever()
    # runs until the link ends with reconnect=False (here a handler disconnects once its message came back).
    got = Inbox()
    with Client(broker.host, broker.port, version=version, client_id="w%d%s" % (version, uid()),
                reconnect=False) as c:
        assert c.is_connected()

        def handler(p):
            got.add(p)
            c.disconnect()

        c.subscribe(prefix + "x", 1, handler=handler)
        c.publish(prefix + "x", b"once", qos=1)
        c.loop_forever()  # returns: disconnect() closed the link and nothing reconnects
        assert got.payloads() == [b"once"] and not c.is_connected()
