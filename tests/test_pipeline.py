# The fleet -> mosquitto -> Spark pipeline (tools/spark): the session's O(1) inbound flow table for a large
# Receive Maximum, the spool (recovery, redelivery matching), the MQTT link across a crash against a real
# mosquitto, then end to end in Spark: a few thousand messages from a faulty fleet through the tinymqtt source
# to Parquet while the source's process is SIGKILLed and the query is stopped mid-stream and restarted from
# its checkpoint; loss and duplicates counted from the rows against the fleet's manifest, exactly, and
# compared with the audit's figures. Last, the scale-out path: ingest processes sharing a $share subscription,
# one of them killed and restarted, their landing files read by Spark's file source.
import asyncio
import collections
import os
import random
import signal
import subprocess
import sys
import threading
import time
import uuid

import pytest

import tools.spark  # noqa: F401  (sys.path: lib/ and the Linux port)
from tinymqtt.client import Client
from tinymqtt.packets import CONNACK, PUBLISH, encode_publish, frame, V5
from tinymqtt_cli.server_codec import Packet, encode, decode  # the server half: a fake server's CONNACK, any packet
from tinymqtt.session5 import Session5
from tinymqtt.app_acks import extended
from tinymqtt_spark.link import MqttLink
from tinymqtt_spark.spool import Spool, read_range
from tests.support.broker import Mosquitto
from tests.support.report import record

try:
    import pyspark  # noqa: F401
    HAVE_SPARK = True
except ImportError:
    HAVE_SPARK = False
needs_spark = pytest.mark.skipif(not HAVE_SPARK, reason="pyspark is not installed (tools/bootstrap.sh installs "
                                                        "pyspark[sql]; CI runs these)")

# Deferred acks keep thousands of messages in flight per client: see tools/demo.py's broker config.
BROKER_CONF = "max_queued_messages 1000000\nmax_queued_bytes 0\n"


@pytest.fixture(scope="module")
def mosq():
    with Mosquitto(extra_conf=BROKER_CONF) as b:
        yield b


@pytest.fixture(scope="session")
def spark():
    from tools.spark.pipeline import spark_session
    return spark_session()


# ------------------------------------------------------------------------------------ Session (lib edit)

def _feed(s, data):
    """Hands bytes to the session the way a driver does (in chunks its buffer holds); returns what it wrote."""
    out = b""
    while data:
        k = min(len(data), len(s.inbuf) - s.inlen)
        s.inbuf[s.inlen:s.inlen + k] = data[:k]
        data = data[k:]
        n = k
        while s.received(n, 0):
            out += bytes(s.out[:s.outlen])
            s.outlen = 0
            n = 0
        out += bytes(s.out[:s.outlen])
        s.outlen = 0
    return out


def _packets(data):
    out, pos = [], 0
    while pos < len(data):
        n = frame(data, len(data) - pos, len(data), pos)
        out.append(decode(memoryview(data)[pos:pos + n], V5))
        pos += n
    return out


@pytest.mark.parametrize("window", [16, 5000], ids=["scan", "indexed"])
def test_manual_ack_inbound_table_small_and_large(window):
    """Manual ack (app_acks.py) with a small window (boards) and one in the thousands (desktop): every message
    delivered once, acks in any order, resends recognised, before the ack and after it (QoS 2 past PUBREC)."""
    got = []
    s = extended(Session5)(client_id="t", manual_ack=True, receive_maximum=window, max_packet_size=65536,
                           on_event=lambda ev, v, r: got.append(v) if ev == PUBLISH else None)
    s.connect(0)
    s.outlen = 0
    buf = bytearray(64)
    _feed(s, bytes(buf[:encode(buf, Packet(CONNACK, reason=0), V5)]))
    n = window
    rng = random.Random(window)
    pids = list(range(1, n + 1))
    wire = bytearray(200 * n)
    pos = 0
    for pid in pids:
        pos += encode_publish(wire, V5, "t/x", b"m%d" % pid, 1 + pid % 2, False, False, pid, None, 0, pos)
    assert _feed(s, bytes(wire[:pos])) == b""  # manual ack: nothing acknowledged yet
    assert [p.pid for p in got] == pids
    resend = bytearray(64)
    k = encode_publish(resend, V5, "t/x", b"m7", 2, False, True, 7, None, 0)
    assert _feed(s, bytes(resend[:k])) == b"" and len(got) == n  # a DUP of an unacked message: not delivered
    order = pids[:]
    rng.shuffle(order)
    acks = []
    for pid in order:
        assert s.ack(Packet(PUBLISH, pid=pid))
        acks += _packets(bytes(s.out[:s.outlen]))
        s.outlen = 0
    assert [(a.type, a.pid) for a in acks] == [(4 if pid % 2 == 0 else 5, pid) for pid in order]  # PUBACK / PUBREC
    assert len(s._rx_pid) == sum(1 for pid in pids if pid % 2)  # QoS 2 flows wait for PUBREL
    k = encode_publish(resend, V5, "t/x", b"m7", 2, False, True, 7, None, 0)
    assert [(a.type, a.pid) for a in _packets(_feed(s, bytes(resend[:k])))] == [(5, 7)]  # PUBREC again
    rel = b"".join(bytes([0x62, 2, pid >> 8, pid & 255]) for pid in pids if pid % 2)
    comps = _packets(_feed(s, rel))
    assert [(c.type, c.pid, c.reason) for c in comps] == [(7, pid, 0) for pid in pids if pid % 2]
    assert not s._rx_pid and not s._held


# ------------------------------------------------------------------------------------ the spool

def test_spool_recovers_and_lists_qos_records(tmp_path):
    d = str(tmp_path / "spool")
    sp = Spool(d, segment_records=3, fsync=False)
    offs = [sp.append(10 + i, i % 3, False, False, "t/%d" % i, b"p%d" % i, None, 1.0 + i) for i in range(7)]
    assert offs == list(range(7)) and len(sp.segments) == 2  # 0-2, 3-5 sealed; 6 open
    sp.commit(3)
    sp.skip(1)  # a heartbeat: offset 7 holds no record (seals 6 first)
    sp.append(40, 1, False, False, "t/h", b"after", {"k": "v"}, 9.0)  # offset 8, in an open segment
    sp.flush()
    with open(os.path.join(d, "open-%020d.jsonl" % 8), "a") as f:
        f.write('[9, 41, 1, false, fal')  # the process died in the middle of a line
    sp2 = Spool(d, segment_records=3, fsync=False)  # a new process: no close() of the first
    assert sp2.committed == 3 and sp2.next_offset == 9 and sp2.recovered == 8
    assert [(s.a, s.b) for s in sp2.segments] == [(0, 3), (3, 6), (6, 7), (8, 9)]
    assert not any(name.startswith("open-") for name in os.listdir(d))
    rows = list(read_range(sp2.paths(0, 9), 0, 9))
    assert [r[0] for r in rows] == [0, 1, 2, 3, 4, 5, 6, 8] and rows[-1][7] == {"k": "v"}
    assert not sp2.has_records(7, 8) and sp2.has_records(7, 9)
    assert sp2.keys_from(0) == [(1, 11, 1), (2, 12, 2), (4, 14, 1), (5, 15, 2), (8, 40, 1)]  # QoS 1/2 only
    assert sp2.keys_from(5) == [(5, 15, 2), (8, 40, 1)]
    sp2.drop_through(6)  # only what is committed goes: segment 0-3
    assert [(s.a, s.b) for s in sp2.segments] == [(3, 6), (6, 7), (8, 9)]
    sp2.commit(8)
    sp2.drop_through(8)
    assert [(s.a, s.b) for s in sp2.segments] == [(8, 9)]
    sp2.skip(2)
    assert Spool(d, fsync=False).next_offset == 11  # heartbeat offsets are never handed out twice


# ------------------------------------------------------------------------------------ the link, no Spark

def test_link_crash_loses_nothing_and_duplicates_nothing(mosq, tmp_path):
    spool, topic = str(tmp_path / "spool"), "lk-%s/t" % uuid.uuid4().hex[:8]
    cid = "lk-" + uuid.uuid4().hex[:8]

    def link():
        return MqttLink(mosq.host, mosq.port, cid, [topic], spool, segment_records=500,
                        receive_maximum=20000).start()
    a = link()
    assert a.subscribed.wait(10)
    pub = Client(mosq.host, mosq.port, client_id=cid + "-pub", version=5, max_inflight=64)
    pub.connect()
    n = 4000
    for i in range(n):
        pub.publish(topic, b"%06d" % i, qos=i % 3)
    while pub.session.flights.count:
        pub.loop(0.05)
    deadline = time.monotonic() + 20
    while a.snapshot()["received"] < n and time.monotonic() < deadline:
        time.sleep(0.05)
    assert a.snapshot()["received"] == n
    end = a.expose()
    half = end // 2
    first = list(read_range(a.paths(0, end), 0, end))
    assert [r[0] for r in first] == list(range(n))
    a.commit(half)  # the consumer committed half
    # Every QoS 1/2 message was acknowledged once the spool had it on disk (the receiver's write-ahead log), not
    # when the consumer committed it: the broker owes this session nothing.
    acked = sum(1 for r in first if r[2])
    _wait(lambda: a.snapshot()["acked"] == acked, 10, "acks for every QoS 1/2 message on disk")
    # Crash: the thread stops dead, as in a killed process: no more acks, no DISCONNECT, the socket just goes.
    a._acks = lambda c: None
    a.client.disconnect = lambda *args: a.client.transport.sock.close()
    a._stop.set()
    a._thread.join()
    a._lock.release()
    b = link()
    assert b.subscribed.wait(10)
    # The uncommitted half comes from the spool, at the offsets it had; the broker resends nothing. (The spool
    # notes the consumer's commit on the link's next cycle: a crash before it recovers the committed half too,
    # which the consumer's own checkpoint skips.)
    assert b.snapshot()["recovered"] in (n - half, n)
    assert b.expose() == n
    assert [r[0] for r in read_range(b.paths(half, n), half, n)] == list(range(half, n))
    b.commit(n)
    deadline = time.monotonic() + 10
    while b.snapshot()["unacked"] or b.snapshot()["segments"]:
        assert time.monotonic() < deadline, b.snapshot()
        time.sleep(0.05)
    s = b.snapshot()
    b.stop()
    pub.disconnect()
    assert s["received"] == 0 and s["redeliveries_matched"] == 0 and s["committed"] == n and s["held"] == 0, s
    # Nothing comes back: a third link on the same session gets only a marker published after it connected
    # (the broker resends what is in flight before anything new, so the marker's arrival is the event).
    c = link()
    assert c.subscribed.wait(10)
    pub.connect()
    pub.publish(topic, b"marker", qos=1)
    pub.disconnect()
    _wait(lambda: c.snapshot()["received"] >= 1, 10, "the marker")
    cs = c.snapshot()
    assert cs["received"] == 1 and cs["redeliveries_matched"] == 0, cs
    c.stop()


# ------------------------------------------------------------------------------------ Spark end to end

def _fleet_thread(cfg, out):
    from tools.fleet.sim import Fleet

    def go():
        fleet = Fleet(cfg)
        out["fleet"] = fleet
        out["summary"] = asyncio.run(fleet.run())
    t = threading.Thread(target=go, name="fleet")
    t.start()
    return t


def _rows(spark, path):
    """(device, seq, qos) of every telemetry row Spark committed (the sink's log, not stray files)."""
    df = spark.read.parquet(path).where("kind = 'telemetry'").select("device", "seq", "qos")
    return [(r.device, r.seq, r.qos) for r in df.collect()]


def _expected(manifest, rows):
    """Loss and duplicates per QoS, counted in plain Python from the manifest and the rows."""
    copies = collections.Counter((d, s) for d, s, _ in rows)
    out = {q: {"sent": 0, "owed": 0, "lost": 0, "duplicates": 0} for q in range(3)}
    for m in manifest:
        o = out[m["qos"]]
        k = copies.get((m["device"], m["seq"]), 0)
        owed = m["qos"] == 0 or m["acked"]
        o["sent"] += 1
        o["owed"] += owed
        o["lost"] += owed and not k
        o["duplicates"] += max(0, k - 1)
    return out


def _sources(ckpt):
    """The file names a file-source query's checkpoint lists as read (its sources/0 log)."""
    import json
    names, d = [], os.path.join(ckpt, "sources", "0")
    for f in os.listdir(d) if os.path.isdir(d) else []:
        if not f.startswith("."):
            with open(os.path.join(d, f)) as fh:
                names += [os.path.basename(json.loads(line)["path"]) for line in fh if line.startswith("{")]
    return names


def _wait(cond, timeout, what):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, what() if callable(what) else what
        time.sleep(0.1)


@needs_spark
def test_pipeline_end_to_end_with_crash_and_restart(spark, mosq, tmp_path):
    from tools.fleet.sim import FleetConfig, read_manifest
    from tools.spark.audit import audit
    from tools.spark.pipeline import start_query, wait_subscribed, wait_drained, link_stats
    prefix = "pl-" + uuid.uuid4().hex[:6]
    out, ckpt = str(tmp_path / "out"), str(tmp_path / "ckpt")
    spool = os.path.join(ckpt, "mqtt-spool")
    broker = "%s:%d" % (mosq.host, mosq.port)
    t0 = time.time()

    def start():
        return start_query(spark, broker, out, ckpt, prefix=prefix, trigger="500 milliseconds")
    q = start()
    wait_subscribed(spool, timeout=120, query=q)
    cfg = FleetConfig(host=mosq.host, port=mosq.port, devices=150, rate=3.0, duration=10.0, qos_per="message",
                      prefix=prefix, cuts=2, cut_via="mixed", cut_fraction=0.2, deaths=3, reboot_after=2.0,
                      will_delay=1, manifest=str(tmp_path / "manifest.jsonl"), seed=21)
    box = {}
    th = _fleet_thread(cfg, box)
    _wait(lambda: box.get("fleet") and box["fleet"].publish_start, 30, "fleet up")
    # 1. SIGKILL the process that holds the MQTT session (Spark's Python stream reader) mid-stream: once it
    #    has received a quarter of the run (its stats file says so), whatever the machine's speed.
    _wait(lambda: link_stats(spool).get("received", 0) >= 1000, 60, "the source mid-stream")
    stats = link_stats(spool)
    os.kill(stats["pid"], signal.SIGKILL)
    with pytest.raises(Exception):
        q.awaitTermination(60)
    assert q.exception() is not None
    q = start()
    # 2. Stop the restarted query mid-stream (its last batch planned, not committed), start it again: once
    #    its own reader has received new messages.
    _wait(lambda: link_stats(spool).get("pid") != stats["pid"] and link_stats(spool).get("received", 0) >= 200, 60,
          "the restarted source receiving")
    q.stop()
    q = start()
    th.join(120)
    sm = box["summary"]
    wait_drained(q, spool, idle_s=1.5, timeout=120)
    q.stop()
    elapsed = time.time() - t0
    manifest = read_manifest(cfg.manifest)
    rows = _rows(spark, out)
    exp = _expected(manifest, rows)
    res = audit(spark, out, cfg.manifest)
    got = {r["qos"]: {k: r[k] for k in ("sent", "owed", "lost", "duplicates")} for r in res["per_qos"]}
    assert got == exp  # the audit agrees with a plain count, figure for figure
    assert len(manifest) == sm.total_sent() > 3000
    assert exp[1]["lost"] == 0 and exp[2]["lost"] == 0  # at-least-once for QoS 1 and 2 ...
    assert exp[2]["duplicates"] == 0  # ... exactly once for QoS 2, through a crash and a restart
    assert exp[1]["owed"] > 900 and exp[2]["owed"] > 900
    assert res["totals"]["unknown_rows"] == 0
    assert sm.deaths == 3 and sm.reboots >= 1 and sm.cuts > 0
    dead = sm.deaths - sm.reboots  # a device that died too late to reboot before the end stays offline
    assert (res["status"]["online"], res["status"]["offline_by_will"], res["status"]["no_status"]) == (150 - dead,
                                                                                                    dead, 0)
    stats = link_stats(spool)
    record("pipeline: messages through Spark (crash + restart)", "%d in %.0f s" % (len(rows), elapsed))
    for q_ in range(3):
        record("pipeline: QoS %d lost / duplicated" % q_, "%d / %d of %d" % (exp[q_]["lost"], exp[q_]["duplicates"],
                                                                            exp[q_]["sent"]))
    record("pipeline: redeliveries recognised after the last restart", stats.get("redeliveries_matched", 0))


@needs_spark
def test_scale_out_shared_subscription_to_file_source(spark, mosq, tmp_path):
    from tools.fleet.sim import FleetConfig, read_manifest
    from tools.spark.audit import audit
    from tinymqtt_spark.ingest import LANDING_SCHEMA
    from tools.spark.pipeline import transform, link_stats
    prefix = "so-" + uuid.uuid4().hex[:6]
    landing = str(tmp_path / "landing")
    broker = "%s:%d" % (mosq.host, mosq.port)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(tools.spark.PATHS))
    procs = {}

    def ingest(cid):
        p = subprocess.Popen([sys.executable, "-m", "tinymqtt_spark.ingest", "--broker", broker, "--group", prefix,
                              "--topics", "%s/+/telemetry" % prefix, "--client-id", cid, "--landing", landing,
                              "--spool", str(tmp_path / cid), "--flush-ms", "300"], cwd=tools.spark.ROOT, env=env,
                             stdout=subprocess.PIPE, stderr=open(str(tmp_path / (cid + ".log")), "a"), text=True)
        assert p.stdout.readline().strip() == "READY", open(str(tmp_path / (cid + ".log"))).read()
        procs[cid] = p
        return p
    names = [prefix + "-i1", prefix + "-i2"]
    for cid in names:
        ingest(cid)
    # Spark reads the landing directory while the ingest processes write it (and one of them dies); files it
    # has committed are deleted behind it (cleanSource), which keeps the many small files from piling up.
    os.makedirs(landing, exist_ok=True)
    out, ckpt = str(tmp_path / "out"), str(tmp_path / "ckpt")
    q = (transform(spark.readStream.schema(LANDING_SCHEMA).option("cleanSource", "delete").parquet(landing))
         .writeStream.format("parquet").option("path", out).option("checkpointLocation", ckpt)
         .trigger(processingTime="500 milliseconds").start())
    cfg = FleetConfig(host=mosq.host, port=mosq.port, devices=60, rate=6.0, duration=5.5, qos_per="message",
                      prefix=prefix, cuts=1, cut_via="proxy", cut_fraction=0.2, manifest=str(tmp_path / "m.jsonl"),
                      seed=4)
    box = {}
    th = _fleet_thread(cfg, box)
    _wait(lambda: box.get("fleet") and box["fleet"].publish_start, 30, "fleet up")
    _wait(lambda: link_stats(str(tmp_path / names[0])).get("received", 0) >= 200, 60, "ingest mid-stream")
    procs[names[0]].kill()  # SIGKILL one ingest process mid-stream ...
    procs[names[0]].wait()
    ingest(names[0])  # ... and start it again on its session and spool
    th.join(60)

    def settled():
        for cid in names:
            s = link_stats(str(tmp_path / cid))
            if not s or s.get("unacked") or s.get("idle_s") is None or s["idle_s"] < 1.0 or \
                    s["next_offset"] != s["committed"] or time.time() - s["time"] > 2.5:
                return False
        return True
    _wait(settled, 60, "ingest processes idle with everything landed")
    for p in procs.values():
        p.send_signal(signal.SIGTERM)
        p.wait(20)
    landed = sum(link_stats(str(tmp_path / cid))["committed"] for cid in names)  # offsets = rows: no heartbeats
    _wait(lambda: q.exception() is not None or spark.read.parquet(out).where("kind = 'telemetry'").count() >= landed,
          120, lambda: ("Spark read every landed row", landed, spark.read.parquet(out).count(), os.listdir(landing)))
    assert q.exception() is None, q.exception()
    q.stop()
    writers = {n.split("-00")[0] for n in os.listdir(landing) + [r for r in _sources(ckpt)]}
    assert {cid for cid in names if any(w.endswith(cid) for w in writers)} == set(names)
    manifest = read_manifest(cfg.manifest)
    exp = _expected(manifest, _rows(spark, out))
    res = audit(spark, out, cfg.manifest)
    assert {r["qos"]: {k: r[k] for k in ("sent", "owed", "lost", "duplicates")} for r in res["per_qos"]} == exp
    assert exp[1]["lost"] == 0 and exp[2]["lost"] == 0 and exp[2]["duplicates"] == 0
    assert exp[1]["owed"] > 500 and exp[2]["owed"] > 500
    record("scale-out: 2 ingest processes, 1 killed", "%d messages, QoS 1/2 lost 0, QoS 2 dup 0" % len(manifest))
