# Exactly-once by construction in the MQTT link behind the Spark source and the ingest processes: a crash in
# every window a message passes through (received, spooled, landed, committed, acked, PUBREL saved), made to
# happen by TINYMQTT_CRASH (tinymqtt_spark/faults.py) rather than by timing, with identical payloads throughout
# (a switch saying "on"), against a real mosquitto; and the issue-14 case against a scripted server that
# reuses a packet id at once, as the spec allows: each ends with QoS 1 and QoS 2 0 lost, QoS 2 0 duplicated.
import collections
import glob
import os
import signal
import subprocess
import sys
import threading
import time
import uuid

import pytest

import tools.spark  # noqa: F401  (sys.path: lib/ and the Linux port)
from tinymqtt import props as P
from tinymqtt.client import Client
from tinymqtt.packets import (Packet, PUBLISH, PUBACK, PUBREC, PUBREL, PUBCOMP, SUBSCRIBE, SUBACK, PINGREQ, PINGRESP,
                              DISCONNECT)
from tools.spark.pipeline import link_stats
from tests.support.broker import Mosquitto
from tests.support.fakebroker import FakeBroker
from tests.support.report import record

pq = pytest.importorskip("pyarrow.parquet", reason="pyarrow is not installed (requirements-test.txt)")

BROKER_CONF = "max_queued_messages 1000000\nmax_queued_bytes 0\n"
N = 600  # messages per crash test, QoS 1 and 2 alternating, all with the payload b"on"


@pytest.fixture(scope="module")
def mosq():
    with Mosquitto(extra_conf=BROKER_CONF) as b:
        yield b


class IngestProc:
    """One tinymqtt_spark.ingest process (the MQTT link plus landing files) on a fixed client id and spool."""

    def __init__(self, tmp, port, cid, topic):
        self.tmp, self.port, self.cid, self.topic = tmp, port, cid, topic
        self.landing, self.spool = os.path.join(tmp, "landing"), os.path.join(tmp, "spool")
        self.log = os.path.join(tmp, cid + ".log")
        self.p = None

    def start(self, crash=None, ready=True):
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(tools.spark.PATHS))
        env.pop("TINYMQTT_CRASH", None)
        if crash:
            env["TINYMQTT_CRASH"] = crash
        self.p = subprocess.Popen([sys.executable, "-m", "tinymqtt_spark.ingest", "--broker", "127.0.0.1:%d" % self.port,
                                   "--topics", self.topic, "--client-id", self.cid, "--landing", self.landing,
                                   "--spool", self.spool, "--flush-ms", "100", "--group", ""],
                                  cwd=tools.spark.ROOT, env=env, stdout=subprocess.PIPE,
                                  stderr=open(self.log, "a"), text=True)
        if ready:
            assert self.p.stdout.readline().strip() == "READY", open(self.log).read()
        return self

    def crashed(self, timeout=30):
        rc = self.p.wait(timeout)
        assert rc == 99, "expected the injected crash (exit 99), got %s: %s" % (rc, open(self.log).read())

    def stop(self):
        self.p.send_signal(signal.SIGTERM)
        assert self.p.wait(30) == 0, open(self.log).read()


def landed(landing):
    """(seq, qos) of every row in the landing files (the seq travels as a user property)."""
    out = []
    for path in glob.glob(os.path.join(landing, "part-*.parquet")):
        t = pq.read_table(path, columns=["qos", "properties"]).to_pydict()
        out += [(int(dict(p)["seq"]), q) for q, p in zip(t["qos"], t["properties"])]
    return out


def count(rows, sent):
    """Loss and duplicates per QoS; `sent`: {seq: qos}."""
    copies = collections.Counter(s for s, _ in rows)
    res = {q: {"sent": 0, "lost": 0, "duplicates": 0} for q in (1, 2)}
    for seq, q in sent.items():
        res[q]["sent"] += 1
        res[q]["lost"] += not copies[seq]
        res[q]["duplicates"] += max(0, copies[seq] - 1)
    return res


def wait_for(cond, timeout, what):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, what() if callable(what) else what
        time.sleep(0.05)


def publish(broker, topic, n, box):
    """n identical payloads, QoS 1 and 2 alternating, in bursts of 50 about 0.1 s apart: a stream that spans
    several of the ingest's 100 ms batches, so that the n-th batch exists (pacing, not synchronisation)."""
    c = Client(broker.host, broker.port, client_id="pub-" + uuid.uuid4().hex[:8], version=5, max_inflight=64)
    c.connect()
    for i in range(n):
        c.publish(topic, b"on", qos=1 + i % 2, props={P.USER_PROPERTY: [("seq", str(i))]})
        if i % 50 == 49:
            c.flush()
            time.sleep(0.1)
    while c.session.flights.count:
        c.loop(0.05)
    c.disconnect()
    box["sent"] = {i: 1 + i % 2 for i in range(n)}


# Crash points and at which pass: mid-stream for "received", the 2nd/3rd batch for the others.
POINTS = [("received", 200), ("spooled", 2), ("landed", 2), ("committed", 2), ("acked", 2), ("released", 2)]


@pytest.mark.parametrize("point,nth", POINTS, ids=[p for p, _ in POINTS])
def test_crash_in_each_window_loses_and_duplicates_nothing(mosq, tmp_path, point, nth):
    topic = "eo-%s/switch" % uuid.uuid4().hex[:8]
    ing = IngestProc(str(tmp_path), mosq.port, "eo-" + uuid.uuid4().hex[:8], topic).start("%s:%d" % (point, nth))
    box = {}
    th = threading.Thread(target=publish, args=(mosq, topic, N, box))
    th.start()
    ing.crashed()
    ing.start()  # the same session and spool
    th.join(60)
    sent = box["sent"]

    def settled():
        s = link_stats(ing.spool)
        return (s.get("pid") == ing.p.pid and s["connected"] and not s["unacked"] and not s["awaiting_pubrel"]
                and s["committed"] >= s["next_offset"] and len({seq for seq, _ in landed(ing.landing)}) == N)
    wait_for(settled, 60, lambda: (link_stats(ing.spool), len(landed(ing.landing))))
    stats = link_stats(ing.spool)
    ing.stop()
    res = count(landed(ing.landing), sent)
    assert res[1]["lost"] == 0 and res[2]["lost"] == 0 and res[2]["duplicates"] == 0, res
    assert res[1]["sent"] == res[2]["sent"] == N // 2
    record("exactly-once: crash at %s" % point, "QoS 1 lost %d dup %d, QoS 2 lost %d dup %d of %d; %d redeliveries "
           "recognised" % (res[1]["lost"], res[1]["duplicates"], res[2]["lost"], res[2]["duplicates"], N,
                           stats.get("redeliveries_matched", 0)))


@pytest.mark.parametrize("qos", [1, 2])
def test_reused_packet_id_with_identical_payload_is_a_new_message(tmp_path, qos):
    """The issue-14 loss: message A (pid 1, "on") is committed and acknowledged; the server reuses pid 1 at once
    for message B, also "on"; the process dies after receiving B, before spooling it; the server resends B with
    DUP. B must be landed: A was acknowledged, so its packet id tells nothing about B."""
    topic = "t/switch"

    def pub(seq, dup=False):
        return Packet(PUBLISH, topic=topic, payload=b"on", qos=qos, pid=1, dup=dup,
                      props={P.USER_PROPERTY: [("seq", str(seq))]})

    def acked(fb):
        if qos == 1:
            fb.expect(PUBACK, timeout=20, pid=1)
        else:
            fb.expect(PUBREC, timeout=20, pid=1)
            fb.send(Packet(PUBREL, pid=1))
            fb.expect(PUBCOMP, timeout=20, pid=1)

    def script(fb):
        fb.handshake()
        s = fb.expect(SUBSCRIBE, timeout=20)
        fb.send(Packet(SUBACK, pid=s.pid, codes=[2]))
        fb.send(pub(0))  # A
        acked(fb)
        fb.send(pub(1))  # B, under the packet id A just freed
        fb.expect_closed(timeout=20)  # the process died on receiving B
        fb.handshake(session_present=True, timeout=30)
        fb.send(pub(1, dup=True))  # B again, as the session requires
        s = fb.expect(SUBSCRIBE, timeout=20)
        fb.send(Packet(SUBACK, pid=s.pid, codes=[2]))
        acked(fb)
        fb.expect(PINGREQ, timeout=30)  # the stop: a ping after the acks (so they were read), then DISCONNECT
        fb.send(Packet(PINGRESP))
        fb.expect(DISCONNECT, timeout=20)

    with FakeBroker(version=5, timeout=20) as fb:
        fb.start(script)
        ing = IngestProc(str(tmp_path), fb.port, "reuse", topic).start("received:2")
        ing.crashed()
        ing.start(ready=False)
        assert ing.p.stdout.readline().strip() == "READY"
        wait_for(lambda: len(landed(ing.landing)) >= 2, 20, "B never landed")
        ing.stop()
        fb.join(60)
    assert sorted(landed(ing.landing)) == [(0, qos), (1, qos)]
