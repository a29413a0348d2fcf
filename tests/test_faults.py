# Fault injection: the blocking and the asyncio client talk to a real mosquitto through tests/support/faultproxy.py,
# which cuts their connections at random points it finds by parsing the stream (inside CONNECT or CONNACK, in
# the middle of a PUBLISH, between PUBREC and PUBREL, just before an ack, at any byte), holds chunks back
# (latency) and forwards some connections one byte per write. Then the broker itself restarts (persistence on).
# Asserted every time: no message lost, no QoS 2 message delivered twice, no LOST event, and the client came
# back by itself after every fault (it never wedged; the gap is reported). Both directions: the client publishing
# (a watcher subscribed straight to the broker counts), and the client subscribed (a feeder publishes straight
# to the broker). A half-open link (the proxy goes silent) is found by keep-alive (0x8D).
#
# CI size: 2,000 QoS 1 + 2,000 QoS 2 messages each way across ~50 cuts. The long run:
#     TINYMQTT_FAULT_MESSAGES=10000 .venv/bin/python -m pytest tests/test_faults.py -q
# (10,000 + 10,000 each way across 250 cuts; TINYMQTT_FAULT_SEED picks another random sequence).
import asyncio
import collections
import os
import random
import threading
import time
import uuid

import pytest

from tests.support import report
from tests.support.faultproxy import FaultProxy, RandomPlans, PUBLISHER_CUTS, SUBSCRIBER_CUTS, UP, DOWN
from tinymqtt import props as P
from tinymqtt.aio import AsyncClient
from tinymqtt.client import Client
from tinymqtt.errors import ConnectionLost
from tinymqtt.packets import PUBLISH
from tinymqtt.session import LOST

N = int(os.environ.get("TINYMQTT_FAULT_MESSAGES", "2000"))  # per QoS level, per direction
CUTS = max(10, N // 40)  # 2,000 -> 50 cuts, 10,000 -> 250
SEED = int(os.environ.get("TINYMQTT_FAULT_SEED", "20261121"))
BACKOFF = dict(backoff_min_ms=20, backoff_max_ms=200)
# A fault is followed by the next connection within the backoff (max 200 ms, +25% jitter) plus the time to
# notice the cut and open a TCP connection. That is what the gap is measured against (reported); the assertion
# only catches a client that wedged, with room for two busy cores (no narrow window: it must not flake).
MAX_GAP = 10.0
# Sessions that outlive a connection (and, with persistence, a broker restart). v5 starts with Clean Start 0 too:
# mosquitto 2.0.11 does not save a session begun with Clean Start 1 across a restart, whatever its expiry.
PERSIST = {5: dict(session_expiry=600, clean=False), 4: dict(clean=False)}


def uid():
    return uuid.uuid4().hex[:10]


class Watcher:
    """A client straight to the broker, in its own thread: subscribes at QoS 2 and counts every payload."""

    def __init__(self, broker, topic, version=5):
        self.got = collections.Counter()
        self.c = Client(broker.host, broker.port, client_id="w" + uid(), version=version, receive_maximum=256,
                        max_inflight=8, keepalive=5, **BACKOFF, **PERSIST[version])
        self.c.on_message = lambda m: self.got.update([bytes(m.payload)])
        tracked(self.c)
        self.c.connect()
        assert self.c.subscribe(topic, 2) == [2]
        self._stop = False
        self.error = None
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self):
        try:
            while not self._stop:
                self.c.loop(0.05)
        except BaseException as e:  # reported by the test
            self.error = e

    def close(self):
        self._stop = True
        self._t.join(5)
        self.c.disconnect()


class Feeder(threading.Thread):
    """Publishes n QoS 1 and n QoS 2 messages straight to the broker, in its own thread. gate(i), if given,
    holds message i back until it returns True (for at most 0.3 s): it spreads the traffic over the cuts."""

    def __init__(self, broker, topic, n, version=5, gate=None):
        super().__init__(daemon=True)
        self.gate = gate
        self.c = Client(broker.host, broker.port, client_id="f" + uid(), version=version, max_inflight=64,
                        keepalive=5, **BACKOFF, **PERSIST[version])
        tracked(self.c)
        self.c.connect()
        self.topic, self.n, self.error = topic, n, None
        self.start()

    def run(self):
        try:
            c = self.c
            for i in range(self.n):
                if self.gate:
                    end = time.monotonic() + 0.3
                    while not self.gate(i) and time.monotonic() < end:
                        c.loop(0.005)
                c.publish(self.topic, b"q1-%06d" % i, 1)
                c.publish(self.topic, b"q2-%06d" % i, 2)
                if i % 32 == 0:
                    c.loop(0)
            end = time.monotonic() + 120
            while c.session.flights.count and time.monotonic() < end:
                c.loop(0.05)
            c.disconnect()
        except BaseException as e:
            self.error = e


def check_delivery(got, n, what, excused=None):
    """Every q1 at least once, every q2 exactly once, nothing else. excused: {payload: count} of QoS 2
    PUBLISHes the broker sent again after its PUBREL (a broker bug, see FaultProxy.resent_after_pubrel): the
    client had completed that flow and rightly takes each as a new message."""
    excused = excused or {}
    want1 = {b"q1-%06d" % i for i in range(n)}
    want2 = {b"q2-%06d" % i for i in range(n)}
    lost1, lost2 = want1 - set(got), want2 - set(got)
    dup2 = sorted(p for p in want2 if got[p] > 1 + excused.get(p, 0))
    extra = set(got) - want1 - want2
    assert not (lost1 or lost2 or dup2 or extra), (
        "%s: %d QoS 1 lost, %d QoS 2 lost, %d QoS 2 duplicated, %d unexpected (e.g. %r %r %r)" % (
            what, len(lost1), len(lost2), len(dup2), len(extra), sorted(lost1 | lost2)[:3], dup2[:3],
            sorted(extra)[:3]))
    return sum(got[p] for p in want1) - n  # QoS 1 duplicates (allowed)


def all_in(got, n):
    return all(got[b"q1-%06d" % i] and got[b"q2-%06d" % i] for i in range(n))


def broker_resends(px):
    """QoS 2 PUBLISHes mosquitto sent to the client again after their PUBREL (mosquitto 2.0.11 does, after
    some reconnects): {payload: count}. The client itself must never do it."""
    assert not px.resent_after_pubrel(UP), "the client re-sent a QoS 2 PUBLISH after its PUBREL"
    return px.resent_after_pubrel(DOWN)


def diagnostics(px, seed):
    return "seed %d; %d cuts (%d inside a packet), %d connections; last cuts: %s" % (
        seed, len(px.cuts), px.mid_packet_cuts(), px.accepted, px.cuts[-5:])


def tracked(c):
    c.lost, c.errors, c.presents = [], [], []
    c.on_event = lambda ev, value, reason: c.lost.append(value) if ev == LOST else None
    c.on_connect = lambda connack: c.presents.append(connack.session_present)
    c.on_disconnect = c.errors.append
    return c


def drive(c, done, seconds, what, px, seed, others=(), state=None):
    end = time.monotonic() + seconds
    while not done():
        for o in others:
            if o.error:
                raise o.error
        assert time.monotonic() < end, "%s: not done within %d s (wedged?) %s; client: %s%s" % (
            what, seconds, diagnostics(px, seed), client_state(c), state() if state else "")
        c.loop(0.02)


def client_state(c):
    s = c.session
    return "connected %s, %d in flight (%d unacked), %d inbound QoS 2 open, last error %r, %d LOST, session present: %s" % (
        c.is_connected(), s.flights.count, s.flights.unacked, len(s._rx_pid), c.last_error, len(getattr(c, "lost", ())),
        "".join("1" if p else "0" for p in getattr(c, "presents", ())))


# ---------------------------------------------------------------------------------------- publishing

@pytest.mark.parametrize("version", [5, 4], ids=["v5", "v3.1.1"])
def test_publisher_survives_random_cuts(make_broker, version):
    n = N if version == 5 else max(N // 4, 100)  # 3.1.1 takes the same paths: a quarter of the traffic
    cuts = CUTS if version == 5 else max(CUTS // 4, 10)
    seed = SEED + version
    br = make_broker()
    topic = "f/" + uid()
    w = Watcher(br, topic, version)
    with FaultProxy(br.host, br.port, seed=seed, record=True) as px:
        px.plan = RandomPlans(random.Random(seed), cuts, PUBLISHER_CUTS)
        c = tracked(Client(px.host, px.port, client_id="p" + uid(), version=version, max_inflight=64,
                           keepalive=10, **BACKOFF, **PERSIST[version]))
        c.connect()
        t0 = time.monotonic()
        for i in range(n):
            c.publish(topic, b"q1-%06d" % i, 1)
            c.publish(topic, b"q2-%06d" % i, 2)
            if i % 16 == 0:
                c.loop(0)
        drive(c, lambda: not c.session.flights.count, 60, "publisher", px, seed, [w])
        elapsed = time.monotonic() - t0
        drive(c, lambda: all_in(w.got, n), 30, "watcher", px, seed, [w])
        gap = px.max_reconnect_gap()
        w.close()
        c.disconnect()
        assert not c.lost, "LOST events: %r" % c.lost[:3]
        broker_resends(px)
        dups = check_delivery(w.got, n, "v%d publisher" % version)
        assert len(px.cuts) >= cuts * 0.8, diagnostics(px, seed)
        assert px.mid_packet_cuts() > 0
        assert gap is not None and gap < MAX_GAP, "stayed away %.2f s after a fault; %s" % (gap, diagnostics(px, seed))
        assert all(isinstance(e, (ConnectionLost, OSError)) for e in c.errors[:-1]) and c.errors[-1] is None, c.errors
        assert c.session.flights.unacked == 0
    report.record("faults: v%d publisher" % version, "%d QoS 1 + %d QoS 2 msgs, %d cuts (%d mid-packet), "
                  "%d QoS 1 dups, max reconnect gap %.3f s, %.1f s" % (n, n, len(px.cuts), px.mid_packet_cuts(),
                                                                       dups, gap, elapsed))


# ---------------------------------------------------------------------------------------- receiving

def wait_rx_closed(c, px, seed):
    # Every inbound QoS 2 flow ends with the broker's PUBREL; the last ones may still be on their way.
    drive(c, lambda: len(c.session._rx_pid) == 0, 10, "inbound QoS 2 flows", px, seed)


@pytest.mark.parametrize("version", [5, 4], ids=["v5", "v3.1.1"])
def test_subscriber_survives_random_cuts(make_broker, version):
    n = N if version == 5 else max(N // 4, 100)
    cuts = CUTS if version == 5 else max(CUTS // 4, 10)
    seed = SEED + 10 + version
    br = make_broker()
    topic = "f/" + uid()
    with FaultProxy(br.host, br.port, seed=seed, record=True) as px:
        px.plan = RandomPlans(random.Random(seed), cuts, SUBSCRIBER_CUTS)
        got = collections.Counter()
        c = tracked(Client(px.host, px.port, client_id="s" + uid(), version=version, receive_maximum=64,
                           keepalive=10, **BACKOFF, **PERSIST[version]))
        c.on_message = lambda m: got.update([bytes(m.payload)])
        c.connect()
        assert c.subscribe(topic, 2) == [2]
        t0 = time.monotonic()
        f = Feeder(br, topic, n, version, gate=lambda i: i * cuts <= (len(px.cuts) + 1) * n)
        drive(c, lambda: all_in(got, n) and not f.is_alive(), 90, "subscriber", px, seed, [f])
        elapsed = time.monotonic() - t0
        wait_rx_closed(c, px, seed)
        gap = px.max_reconnect_gap()
        c.disconnect()
        excused = broker_resends(px)
        dups = check_delivery(got, n, "v%d subscriber" % version, excused)
        assert len(px.cuts) >= cuts * 0.8, diagnostics(px, seed)
        assert gap is not None and gap < MAX_GAP, "stayed away %.2f s after a fault; %s" % (gap, diagnostics(px, seed))
    report.record("faults: v%d subscriber" % version, "%d QoS 1 + %d QoS 2 msgs, %d cuts (%d mid-packet), "
                  "%d QoS 1 dups, %d QoS 2 PUBLISHes mosquitto re-sent after PUBREL, max reconnect gap %.3f s, "
                  "%.1f s" % (n, n, len(px.cuts), px.mid_packet_cuts(), dups, sum(excused.values()), gap, elapsed))


# ---------------------------------------------------------------------------------------- asyncio

async def test_asyncio_publisher_and_subscriber_survive_random_cuts(make_broker):
    n = max(N // 4, 100)
    cuts = max(CUTS // 3, 10)
    seed = SEED + 20
    br = make_broker()
    topic = "f/" + uid()
    w = Watcher(br, topic + "/up")
    rx = collections.Counter()
    with FaultProxy(br.host, br.port, seed=seed, record=True) as px:
        px.plan = RandomPlans(random.Random(seed), cuts, PUBLISHER_CUTS + SUBSCRIBER_CUTS)
        c = AsyncClient(px.host, px.port, client_id="a" + uid(), version=5, max_inflight=64, receive_maximum=64,
                        keepalive=10, **BACKOFF, **PERSIST[5])
        lost = []
        c.on_event = lambda ev, value, reason: lost.append(value) if ev == LOST else None
        await c.connect()
        assert await c.subscribe(topic + "/down", 2, handler=lambda m: rx.update([bytes(m.payload)])) == [2]
        f = Feeder(br, topic + "/down", n, gate=lambda i: i * cuts <= (len(px.cuts) + 1) * n)
        t0 = time.monotonic()
        for i in range(n):
            await c.publish(topic + "/up", b"q1-%06d" % i, 1, wait=False)
            await c.publish(topic + "/up", b"q2-%06d" % i, 2, wait=False)
        end = time.monotonic() + 90
        while not (not c.session.flights.count and not f.is_alive() and all_in(rx, n) and all_in(w.got, n)
                   and len(c.session._rx_pid) == 0):
            assert not f.error and not w.error, f.error or w.error
            assert time.monotonic() < end, "asyncio: not done within 90 s (wedged?) " + diagnostics(px, seed)
            await asyncio.sleep(0.02)
        elapsed = time.monotonic() - t0
        gap = px.max_reconnect_gap()
        await c.disconnect()
        w.close()
        assert not lost
        excused = broker_resends(px)
        check_delivery(w.got, n, "asyncio publisher")
        check_delivery(rx, n, "asyncio subscriber", excused)
        assert len(px.cuts) >= cuts * 0.8, diagnostics(px, seed)
        assert gap is not None and gap < MAX_GAP, "stayed away %.2f s after a fault; %s" % (gap, diagnostics(px, seed))
    report.record("faults: asyncio both ways", "%d + %d msgs each way, %d cuts (%d mid-packet), max reconnect gap "
                  "%.3f s, %.1f s" % (n, n, len(px.cuts), px.mid_packet_cuts(), gap, elapsed))


# ---------------------------------------------------------------------------------------- broker restart

def test_broker_restart_with_persistence(make_broker):
    n = max(N // 2, 100)
    seed = SEED + 30
    br = make_broker(persistence=True)
    topic = "f/" + uid()
    w = Watcher(br, topic + "/up")
    rx = collections.Counter()
    with FaultProxy(br.host, br.port, seed=seed, record=True) as px:
        px.plan = RandomPlans(random.Random(seed), max(CUTS // 5, 4), PUBLISHER_CUTS + SUBSCRIBER_CUTS)
        c = tracked(Client(px.host, px.port, client_id="r" + uid(), version=5, max_inflight=64, receive_maximum=64,
                           keepalive=10, **BACKOFF, **PERSIST[5]))
        c.subscribe(topic + "/down", 2, handler=lambda m: rx.update([bytes(m.payload)]))
        c.connect()
        drive(c, lambda: c.session.flights.count == 0, 5, "subscribe", px, seed)
        f = Feeder(br, topic + "/down", n)
        restarts, t0 = [], time.monotonic()
        for i in range(n):
            c.publish(topic + "/up", b"q1-%06d" % i, 1)
            c.publish(topic + "/up", b"q2-%06d" % i, 2)
            if i % 16 == 0:
                c.loop(0)
            if i and i % (n // 3) == 0 and len(restarts) < 2:
                br.restart()
                restarts.append(time.monotonic())
        drive(c, lambda: (not c.session.flights.count and not f.is_alive() and all_in(rx, n) and all_in(w.got, n)
                          and len(c.session._rx_pid) == 0), 90, "restart", px, seed, [f, w],
              lambda: "; feeder alive %s (%s), watcher (%s), %d of %d received, %d of %d at the watcher" % (
                  f.is_alive(), client_state(f.c), client_state(w.c), len(rx), 2 * n, len(w.got), 2 * n))
        elapsed = time.monotonic() - t0
        gap = px.max_reconnect_gap()
        w.close()
        c.disconnect()
        assert not c.lost, "LOST events after a restart with persistence: %r" % c.lost[:3]
        excused = broker_resends(px)
        check_delivery(w.got, n, "publisher across restarts")
        check_delivery(rx, n, "subscriber across restarts", excused)
        assert len(restarts) == 2
        assert gap is not None and gap < MAX_GAP, "stayed away %.2f s after a fault; %s" % (gap, diagnostics(px, seed))
    report.record("faults: broker restarts", "2 restarts + %d cuts, %d + %d msgs each way, max reconnect gap "
                  "%.3f s, %.1f s" % (len(px.cuts), n, n, gap, elapsed))


# ---------------------------------------------------------------------------------------- half-open link

def test_half_open_link_found_within_one_and_a_half_keepalives(make_broker):
    br = make_broker()
    with FaultProxy(br.host, br.port) as px:
        c = tracked(Client(px.host, px.port, client_id="h" + uid(), version=5, keepalive=1, **BACKOFF))
        c.connect()
        for _ in range(20):
            c.loop(0.01)
        px.silence()
        t0 = time.monotonic()
        while not c.errors:
            assert time.monotonic() - t0 < 15, "the dead link was never noticed"
            c.loop(0.05)
        found = time.monotonic() - t0
        # 0x8D: found by the unanswered PINGREQ (keep-alive), not by TCP. That it takes at most 1.5 keep-alives
        # is checked on a clock the test moves (test_fake_broker.py); here the time is only reported.
        assert isinstance(c.errors[0], ConnectionLost) and c.errors[0].reason == 0x8D, c.errors
        px.resume()
        while not c.is_connected():
            assert time.monotonic() - t0 < found + MAX_GAP
            c.loop(0.05)
        assert c.wait_for(c.publish("h/" + uid(), b"x", 1), 5)
        c.disconnect()
    report.record("faults: half-open (blocking, keepalive 1 s)", "found in %.2f s" % found)


async def test_asyncio_half_open_link_found_within_one_and_a_half_keepalives(make_broker):
    br = make_broker()
    with FaultProxy(br.host, br.port) as px:
        c = AsyncClient(px.host, px.port, client_id="h" + uid(), version=5, keepalive=1, **BACKOFF)
        errors = []
        c.on_disconnect = errors.append
        await c.connect()
        await asyncio.sleep(0.2)
        px.silence()
        t0 = time.monotonic()
        while not errors:
            assert time.monotonic() - t0 < 15, "the dead link was never noticed"
            await asyncio.sleep(0.01)
        found = time.monotonic() - t0
        assert isinstance(errors[0], ConnectionLost) and errors[0].reason == 0x8D, errors  # keep-alive, not TCP
        px.resume()
        assert await asyncio.wait_for(c.publish("h/" + uid(), b"x", 1), found + MAX_GAP + 2) in (0, 0x10)
        await c.disconnect()
    report.record("faults: half-open (asyncio, keepalive 1 s)", "found in %.2f s" % found)
