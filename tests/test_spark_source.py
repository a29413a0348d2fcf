# The tinymqtt_spark source in Spark (local[2], the suite's shared session) as a user's job meets it: the
# session exists from load() on (QoS 1 published before start() arrives) and wait_live() says when QoS 0 may
# start; the client id is the checkpoint's (a restart resumes the session, another checkpoint is another
# session); a second query on a held session is refused at load(); run-once triggers (availableNow, once)
# take what was queued and acknowledge it before the run ends, so a series of runs against mosquitto's
# default limits loses nothing.
import collections
import os
import time
import uuid

import pytest

pytest.importorskip("pyspark", reason="pyspark is not installed (tools/bootstrap.sh installs pyspark[sql])")

import tinymqtt_spark  # noqa: E402
from tinymqtt.client import Client  # noqa: E402
from tests.support.broker import Mosquitto  # noqa: E402
from tests.support.report import record  # noqa: E402
from tests.support.sink_log import committed_files  # noqa: E402

ROWS = "topic STRING, body STRING, qos INT"


@pytest.fixture(scope="session")
def spark():
    from tools.spark.pipeline import spark_session
    return spark_session()


def publish(b, topic, n, qos_of, tag):
    pub = Client(b.host, b.port, client_id="pub-" + uuid.uuid4().hex[:8], version=5, max_inflight=100)
    pub.connect()
    pids = [pub.publish(topic, b"%s-%d" % (tag.encode(), i), qos=qos_of(i)) for i in range(n)]
    for pid in pids:
        if pid:
            assert pub.wait_for(pid) is True
    pub.disconnect()


def load(spark, b, topic, ckpt, **extra):
    return (spark.readStream.format("mqtt").option("broker", "%s:%d" % (b.host, b.port)).option("topic", topic)
            .option("checkpointLocation", ckpt).options(**extra).load())


def start(df, out, ckpt, **trigger):
    return (df.selectExpr("topic", "CAST(payload AS STRING) AS body", "qos").writeStream.format("parquet")
            .option("path", out).option("checkpointLocation", ckpt).trigger(**(trigger or {"processingTime": "500 milliseconds"}))
            .start())


def rows(spark, out):
    return [(r.body, r.qos) for r in spark.read.schema(ROWS).parquet(out).collect()]


def committed_count(out):
    """Rows in the files the sink's log has committed, from their Parquet footers (no Spark job): a cheap
    test of whether a Spark read can have reached a count yet. Never the answer itself (that is rows())."""
    import pyarrow.parquet as pq
    try:
        return sum(pq.read_metadata(os.path.join(out, name)).num_rows for name in committed_files(out))
    except (OSError, ValueError, KeyError):  # a log file being written, a file not there yet
        return None


def wait_rows(spark, out, n, q, timeout=90):
    # A Spark read of the sink costs the streaming query it waits for a job's worth of the machine's two
    # cores: read only once the committed files' footers say it can find n rows (or cannot tell).
    deadline = time.monotonic() + timeout
    got = []
    while True:
        k = committed_count(out)
        if k is None or k >= n:
            got = rows(spark, out)
            if len(got) >= n:
                return got
        assert q.exception() is None, q.exception()
        assert time.monotonic() < deadline, (len(got), k, n, tinymqtt_spark.link_stats(q_ckpt(q)))
        time.sleep(0.5)


def final_link_stats(ckpt, limit=1.5):
    """The link's stats once no process can rewrite them: the link's process (it rewrites the file each
    second) has exited, or `limit` seconds have passed (then whatever it wrote last, as a fixed wait would)."""
    end = time.monotonic() + limit
    pid = tinymqtt_spark.link_stats(ckpt).get("pid")
    while pid and time.monotonic() < end:
        try:
            os.kill(pid, 0)
        except (ProcessLookupError, PermissionError):  # (PermissionError: another user's process took the number)
            break
        time.sleep(0.02)
    return tinymqtt_spark.link_stats(ckpt)


def q_ckpt(q):
    return getattr(q, "_tinymqtt_ckpt", "")


def check(got, expected):
    """Every expected body present; QoS 2 never twice. Returns the QoS 1 duplicates."""
    copies = collections.Counter(b for b, _ in got)
    missing = [b for b in expected if not copies[b]]
    assert not missing, (len(missing), missing[:5])
    assert not [b for b, q in got if q == 2 and copies[b] > 1]
    assert set(copies) == set(expected)
    return sum(c - 1 for c in copies.values())


@pytest.fixture(scope="module")
def mosq():
    with Mosquitto(extra_conf="max_queued_messages 1000000\nmax_queued_bytes 0\n") as b:
        yield b


def test_start_identity_and_a_second_query_refused(spark, mosq, tmp_path):
    topic = "st-%s/t" % uuid.uuid4().hex[:8]
    ckpt, out = str(tmp_path / "ckpt"), str(tmp_path / "out")
    df = load(spark, mosq, topic, ckpt)
    # load() made the session and its subscription: QoS 1/2 published now, before start(), wait for the query.
    publish(mosq, topic, 300, lambda i: 1 + i % 2, "early")
    t0 = time.monotonic()
    q = start(df, out, ckpt)
    q._tinymqtt_ckpt = ckpt
    live = tinymqtt_spark.wait_live(ckpt, q, timeout=120)
    live_s = time.monotonic() - t0
    publish(mosq, topic, 300, lambda i: 0, "live")  # QoS 0: only a live link gets them
    spool = tinymqtt_spark.spool_dir_for(ckpt)
    cid = tinymqtt_spark.session_client_id(spool)
    # A second query on this session, by checkpoint or by client id, is refused when it is defined. (The
    # running query never lets go of its session: waiting 10 s, the default lockTimeout, would prove no more.)
    with pytest.raises(Exception, match="held by a running query \\(process %d" % live["pid"]):
        load(spark, mosq, topic, ckpt, lockTimeout="1")
    with pytest.raises(Exception, match="held by a running query"):
        load(spark, mosq, topic, str(tmp_path / "other"), clientId=cid, lockTimeout="1")
    # Another checkpoint is another session, created beside the running one.
    other = str(tmp_path / "third")
    load(spark, mosq, topic, other)
    assert tinymqtt_spark.session_client_id(tinymqtt_spark.spool_dir_for(other)) != cid
    got = wait_rows(spark, out, 600, q)
    stats = tinymqtt_spark.link_stats(ckpt)
    q.stop()
    assert stats["sessions_resumed"] >= 1 and not stats.get("session_lost")  # the session load() made
    # Down, then the same query again (same checkpoint): its session kept what came meanwhile.
    publish(mosq, topic, 200, lambda i: 1 + i % 2, "down")
    q = start(load(spark, mosq, topic, ckpt), out, ckpt)
    q._tinymqtt_ckpt = ckpt
    got = wait_rows(spark, out, 800, q)
    stats2 = tinymqtt_spark.link_stats(ckpt)
    q.stop()
    expected = ["early-%d" % i for i in range(300)] + ["live-%d" % i for i in range(300)] + \
               ["down-%d" % i for i in range(200)]
    dup1 = check(got, expected)
    assert stats2["pid"] != stats["pid"] and stats2["sessions_resumed"] >= 1
    record("spark source: start", "QoS 1/2 published between load() and start() all arrive; live %.1f s after "
           "start(); second query refused; restart resumed its session (QoS 1 dup %d)" % (live_s, dup1))


def test_available_now_runs_with_default_broker_limits_lose_nothing(spark, tmp_path):
    with Mosquitto() as b:  # mosquitto's defaults: 1,000 queued messages per client
        topic = "an-%s/t" % uuid.uuid4().hex[:8]
        ckpt, out = str(tmp_path / "ckpt"), str(tmp_path / "out")
        expected, times = [], []
        triggers = [{"availableNow": True}, {"availableNow": True}, {"once": True}, {"availableNow": True}]
        left = []  # unacknowledged after each run
        for run, trigger in enumerate(triggers):
            df = load(spark, b, topic, ckpt)  # a job started by a scheduler: defined, then run
            n = 900 if run < 3 else 0  # the last run finds nothing: what the once-run took was acknowledged
            publish(b, topic, n, lambda i: 1 + i % 2, "run%d" % run)
            expected += ["run%d-%d" % (run, i) for i in range(n)]
            t0 = time.monotonic()
            q = start(df, out, ckpt, **trigger)
            assert q.awaitTermination(180), "the run-once query did not end"
            times.append(time.monotonic() - t0)
            assert q.exception() is None, q.exception()
            # Spark ends the source's process without a stop() once the run is over: a run's last batch is
            # acknowledged before that only when Spark planned one more (empty) batch, which a once-run never
            # does and an availableNow run usually does; else the next run acknowledges it at its start, from
            # the checkpoint. The last run here brings nothing new: everything must be acknowledged after it.
            s = final_link_stats(ckpt)
            left.append(s["unacked"])
            got = rows(spark, out)
            assert len({body for body, _ in got}) == len(expected), (run, len(got), len(expected), s)
        assert left[-1] == 0 and s["committed"] >= s["next_offset"] - 1, (left, s)
        dup1 = check(got, expected)
        log = b.log_text()
        assert "dropped" not in log.lower(), log[-2000:]
    record("spark source: run-once series, default mosquitto limits", "%d of %d (2 availableNow + once + "
           "availableNow), QoS 2 dup 0, QoS 1 dup %d, unacknowledged after each run %s, runs %s s"
           % (len(set(b for b, _ in got)), len(expected), dup1, left, "/".join("%.1f" % t for t in times)))
