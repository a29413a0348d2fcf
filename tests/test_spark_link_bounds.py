# The Spark source's MQTT link (host/tinymqtt_spark/link.py) against a real mosquitto, no Spark: the bounds a
# user relies on. A write error while acknowledging is a reconnect, not a dead thread; fed far faster than its
# consumer commits, the link acknowledges what is on disk at once (QoS 2 flows complete in milliseconds, no
# packet id reused), stops reading when its spool is full (maxSpooled), and loses nothing, QoS 2 twice nothing; a broker that lost the session fails a link with failOnDataLoss; a
# second holder of a session is refused; the ack state's journal stays small and replays to the same state.
import os
import socket
import threading
import time
import uuid

import pytest

from tinymqtt.client import Client
from tinymqtt import props as P
from tinymqtt_spark.ackstate import AckState
from tinymqtt_spark.link import DataLoss, MqttLink, SessionHeld, open_session
from tests.support.broker import Mosquitto
from tests.support.report import record

BROKER_CONF = "max_queued_messages 1000000\nmax_queued_bytes 0\n"


@pytest.fixture(scope="module")
def mosq():
    with Mosquitto(extra_conf=BROKER_CONF) as b:
        yield b


def _wait(cond, timeout, what):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, what() if callable(what) else what
        time.sleep(0.02)


def _publish(b, topic, n, qos_of=lambda i: 1 + i % 2, tag=""):
    pub = Client(b.host, b.port, client_id="pub-" + uuid.uuid4().hex[:8], version=5, max_inflight=200, batch=True)
    pub.connect()
    for i in range(n):
        pub.publish(topic, b"%s%07d" % (tag.encode(), i), qos=qos_of(i))
    while pub.session.flights.count:
        pub.loop(0.05)
    pub.disconnect()


def _seqs(link, lo, hi):
    return [(r[6], r[2]) for r in link.records(lo, hi)]  # (payload, qos)


def test_a_write_error_while_acknowledging_is_a_reconnect(mosq, tmp_path):
    topic, cid = "wr-%s/t" % uuid.uuid4().hex[:8], "wr-" + uuid.uuid4().hex[:8]
    link = MqttLink(mosq.host, mosq.port, cid, [topic], str(tmp_path / "spool"), fsync=False).start()
    assert link.subscribed.wait(10)
    n = 600
    # The link's thread parks on its lock in the middle of the read that brings the messages (each turn: read,
    # then spool, fsync and ack under the lock). Meanwhile our side of the TCP connection is shut for writing:
    # the acks for what that read brought meet EPIPE in the ack flush itself, with no read in between to
    # notice the link first (the broker closes its end once it sees our FIN, but no read comes before the acks).
    with link.lock:
        _publish(mosq, topic, n)
        time.sleep(0.3)
        link.client.transport.sock.shutdown(socket.SHUT_WR)
    _wait(lambda: link.snapshot().get("write_errors", 0) >= 1, 10, lambda: str(link.snapshot()))
    # The broker resends what our acks never reached it; every copy is recognised (QoS 2: PUBREC again) or, for
    # QoS 1, taken as a new message (at-least-once allows it); nothing stays unacknowledged.
    rows, at = [], [0]

    def settled():  # the consumer keeps committing what comes
        e = link.expose()
        rows.extend(_seqs(link, at[0], e))
        link.commit(e)
        at[0] = e
        s = link.snapshot()
        return (s["connected"] and s["connects"] >= 2 and len({p for p, _ in rows}) == n and not s["unacked"]
                and not s["awaiting_pubrel"])
    _wait(settled, 20, lambda: str(link.snapshot()))
    link.check()  # the thread is alive, no error
    s = link.snapshot()
    link.stop()
    assert s["error"] is None and s.get("write_errors") == 1 and s["connects"] >= 2
    copies = {}
    for p, q in rows:
        copies.setdefault(p, []).append(q)
    assert not [p for p, qs in copies.items() if qs[0] == 2 and len(qs) > 1]  # QoS 2 never twice
    record("spark link: write error in the ack flush", "reconnected (%d connects), %d QoS 1 resent as new, "
           "QoS 2 dup 0" % (s["connects"], len(rows) - n))


def _overload(mosq, tmp_path, n, commit_every, max_spooled, publishers=2):
    """n QoS 1/2 messages (alternating) from `publishers` clients at once into a link whose consumer is a slow
    Spark: it reads what is exposed and commits it `commit_every` seconds later. Returns what it saw, the
    link's stats, the packet ids the client saw reused, and the seconds from the publishers' end to drained."""
    topic, cid = "ov-%s/t" % uuid.uuid4().hex[:8], "ov-" + uuid.uuid4().hex[:8]
    link = MqttLink(mosq.host, mosq.port, cid, [topic], str(tmp_path / "spool"), fsync=False,
                    max_spooled=max_spooled).start()
    assert link.subscribed.wait(10)
    seen, peak, stop = [], [0], threading.Event()

    def consumer():
        start = 0
        while not stop.is_set():
            end = link.expose()
            if end > start:
                seen.extend(_seqs(link, start, end))
                time.sleep(commit_every)
                link.commit(end)
                start = end
            peak[0] = max(peak[0], link.snapshot()["uncommitted"])
            time.sleep(0.05)
    th = threading.Thread(target=consumer)
    th.start()
    tags = "abcdefgh"[:publishers]
    pubs = [threading.Thread(target=_publish, args=(mosq, topic, n // publishers), kwargs={"tag": t}) for t in tags]
    for p in pubs:
        p.start()
    for p in pubs:
        p.join(180)
    t_end = time.monotonic()

    def drained():
        s = link.snapshot()
        return (s["received"] - s.get("pid_superseded", 0) >= n and not s["unacked"] and not s["awaiting_pubrel"]
                and s["committed"] >= s["next_offset"] - 1)
    _wait(drained, 60, link.snapshot)
    drain_s = time.monotonic() - t_end
    stop.set()
    th.join(10)
    s = link.snapshot()
    s["peak_uncommitted"] = peak[0]
    reused = link.client.session.reused
    link.stop()
    got = {}
    for payload, q in seen:
        got.setdefault(payload, []).append(q)
    lost = [k for k in (b"%s%07d" % (t.encode(), i) for t in tags for i in range(n // publishers)) if k not in got]
    dup2 = sum(len(v) - 1 for v in got.values() if v[0] == 2)
    dup1 = sum(len(v) - 1 for v in got.values() if v[0] == 1)
    return lost, dup1, dup2, s, reused, drain_s


def test_overload_qos2_flows_complete_at_once_and_nothing_is_lost(mosq, tmp_path):
    """The shape of issue 34's overload, scaled down (40,000 QoS 1/2 messages from two publishers at once, a
    consumer committing 1 s after it read, like Spark's batch cycle): mosquitto frees a QoS 2 message's slot at
    our PUBREC and queues its PUBREL behind the PUBLISHes it sends meanwhile. Acknowledged at commit, the QoS 2
    flows awaiting PUBREL grew with rate x two batch cycles until mosquitto reused ids still in flight
    (tools/bench/spark_overload.py at 40k msgs/s); acknowledged once on disk in the spool, they stay a small
    fraction of the id space however slow the consumer is."""
    n = 40000
    lost, dup1, dup2, s, reused, drain_s = _overload(mosq, tmp_path, n, commit_every=1.0, max_spooled=1000000)
    assert not lost and dup2 == 0, (len(lost), dup2, s)
    assert reused == 0 and s.get("pid_reused", 0) == 0 and s.get("pid_superseded", 0) == 0, s
    assert s["error"] is None and s["connects"] == 1 and not s.get("disconnects"), s
    # The id space cannot be scaled down, so this only guards the QoS 2 flows awaiting PUBREL well below it
    # (2,000-4,600 in three runs; acknowledged at commit, before this design, a run reached ~9,900, sampled):
    # the discriminating check is the full-size tools/bench/spark_overload.py.
    assert s["peak_awaiting_pubrel"] < 15000, s
    assert s["peak_unacked"] <= s["max_unacked"] * 1.25, s  # received, not on disk yet: within the window
    record("spark link: overload (40,000 QoS 1/2, consumer commits 1 s late)", "lost 0, QoS 2 dup 0, QoS 1 dup "
           "%d, peak awaiting PUBREL %d, peak unacked %d, peak uncommitted %d, no packet id reused, drained %.1f s "
           "after the publishers" % (dup1, s["peak_awaiting_pubrel"], s["peak_unacked"], s["peak_uncommitted"],
                                     drain_s))


def test_overload_stops_reading_when_the_spool_is_full_and_loses_nothing(mosq, tmp_path):
    """30,000 QoS 1/2 messages into a spool capped at 3,000 uncommitted records, the consumer committing 0.3 s
    late: the link stops reading (TCP back-pressure, the broker queues the rest) and loses nothing."""
    cap, n = 3000, 30000
    lost, dup1, dup2, s, reused, drain_s = _overload(mosq, tmp_path, n, commit_every=0.3, max_spooled=cap)
    assert not lost and dup2 == 0, (len(lost), dup2, s)
    assert reused == 0 and s.get("pid_reused", 0) == 0 and s.get("pid_superseded", 0) == 0, s
    assert s["error"] is None and s["connects"] == 1 and not s.get("disconnects"), s
    assert s["peak_uncommitted"] <= cap * 1.25, s  # the cap, a read's worth over at most
    assert s["paused"] >= 1, s  # the cap was reached: the link stopped reading
    record("spark link: spool cap (30,000 QoS 1/2, maxSpooled 3,000)", "lost 0, QoS 2 dup 0, QoS 1 dup %d, peak "
           "uncommitted %d, paused %d times, no packet id reused, drained %.1f s after the publishers"
           % (dup1, s["peak_uncommitted"], s["paused"], drain_s))


def test_a_lost_session_fails_the_link_with_fail_on_data_loss(tmp_path):
    with Mosquitto(extra_conf=BROKER_CONF) as b:  # no persistence: a restart forgets every session
        topic, cid = "dl-%s/t" % uuid.uuid4().hex[:8], "dl-" + uuid.uuid4().hex[:8]
        spool = str(tmp_path / "spool")
        assert open_session(b.host, b.port, cid, [topic], spool) is True
        assert open_session(b.host, b.port, cid, [topic], spool) is False  # exists: left alone
        link = MqttLink(mosq_host := b.host, b.port, cid, [topic], spool, fsync=False, fail_on_data_loss=True).start()
        assert link.subscribed.wait(10) and link.snapshot()["sessions_resumed"] == 1
        link.stop()
        b.restart()
        link = MqttLink(mosq_host, b.port, cid, [topic], spool, fsync=False, fail_on_data_loss=True).start()
        _wait(lambda: link.error is not None, 10, link.snapshot)
        with pytest.raises(DataLoss, match="no session for client id"):
            link.check()
        link.stop()
        # failOnDataLoss off: a warning, a count, and the link goes on
        b.restart()
        link = MqttLink(mosq_host, b.port, cid, [topic], spool, fsync=False, fail_on_data_loss=False).start()
        assert link.subscribed.wait(10)
        link.check()
        assert link.snapshot()["session_lost"] == 1
        link.stop()


def test_a_second_holder_of_a_session_is_refused(mosq, tmp_path):
    topic, cid = "sh-%s/t" % uuid.uuid4().hex[:8], "sh-" + uuid.uuid4().hex[:8]
    a = MqttLink(mosq.host, mosq.port, cid, [topic], str(tmp_path / "a"), fsync=False).start()
    assert a.subscribed.wait(10)
    with pytest.raises(SessionHeld, match="held by a running query \\(process %d" % os.getpid()):
        open_session(mosq.host, mosq.port, cid, [topic], str(tmp_path / "a"), lock_timeout=0.2)
    with pytest.raises(SessionHeld):  # another spool, the same client id
        MqttLink(mosq.host, mosq.port, cid, [topic], str(tmp_path / "b"), lock_timeout=0.2).start()
    # Someone elsewhere (no lock of ours) uses the id, reconnecting when pushed out: mosquitto 2.0.11 closes the
    # pushed-out connection without DISCONNECT 0x8E, so the link knows it by closes right after its CONNACKs,
    # and stops instead of taking turns with the other for ever.
    other = Client(mosq.host, mosq.port, client_id=cid, version=5, clean=False, session_expiry=60,
                   backoff_min_ms=100, backoff_max_ms=200)
    other.connect()
    stop = threading.Event()
    th = threading.Thread(target=lambda: [other.loop(0.05) for _ in iter(stop.is_set, True)])
    th.start()
    try:
        _wait(lambda: a.error is not None, 20, a.snapshot)
    finally:
        stop.set()
        th.join(5)
    with pytest.raises(SessionHeld, match="took the session over"):
        a.check()
    n = a.snapshot()["connects"]
    a.stop()
    other.disconnect()
    assert 2 <= n <= 5


def test_ack_state_journal_replays_and_stays_small(tmp_path):
    d = str(tmp_path)
    st = AckState(d, fsync=False)
    for i in range(3000):  # 3,000 ack cycles of 10 QoS 2 flows each: PUBREC out, PUBCOMP later
        st.acked = i * 10
        st.held = {i * 10 + 5: (7, 1)} if i % 2 else {}
        st.rel.update(range(i * 10 % 60000, i * 10 % 60000 + 10))
        if i > 2:
            st.rel.difference_update(range((i - 3) * 10 % 60000, (i - 3) * 10 % 60000 + 10))
        st.save()
    size = os.path.getsize(st.path)
    again = AckState(d, fsync=False)
    assert (again.acked, again.held, again.rel) == (st.acked, st.held, st.rel)
    assert size < 400000, size  # compacted: not 3,000 rewrites of the whole state
    with open(st.path, "a") as f:
        f.write("r+ 99")  # a torn last line: ignored
    assert AckState(d, fsync=False).rel == st.rel
