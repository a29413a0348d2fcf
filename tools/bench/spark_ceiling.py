# The ingest ceiling (issue 14): a broker preloaded with N QoS 1/2 messages for a persistent session, drained
# (a) by a plain tinymqtt subscriber writing Parquet with pyarrow (the ceiling: no spool, acks as they come),
# (b) by the Spark source (host/tinymqtt_spark) in local[2] writing the raw rows to Parquet,
# (c) by the scale-out ingest path (one tinymqtt_spark.ingest process writing landing files),
# and (d) the floor a Spark user knows: Spark's own file source reading the same rows from Parquet files into
# Parquet, in the same session. Each clock runs from the first message the drainer received to the moment its
# last row was in a Parquet file (for Spark: the batch that held it had completed); (b) and (d) also from the
# query's start() (what a user waits for), and (b) is reported against (d) on that clock. Spark is measured warm, as a long-running job is:
# a first query over N/2 messages starts the session, the JVM and the Python workers and gets the JVM's JIT
# past its first thousands of rows (its time is reported apart); (a) is warmed the same way with a 2,000
# message drain (pyarrow's first Parquet write alone costs ~0.25 s). Neither clock counts connecting. (c) is
# a new process each round, so its figure still includes its own cold start.
# --rounds rounds, each running (a), (b), (c) in turn on a fresh session and preload: a drainer's figure is its
# median round, and a ratio is the median of the per-round ratios (each against the (a) of the same round),
# because on a shared 2-core machine the load swings a single drain by 2x. Spark's rounds also report each
# batch's rows and time.
#     python -m tools.bench.spark_ceiling [--n 20000] [--json FILE]    (the bench's "spark" section runs this)
#     [--option KEY=VALUE ...] [--driver-scan]: (b) with more source options, or through spark_batches' DriverScan
import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid

import tools.spark  # noqa: F401  (sys.path: lib/ and the Linux port)
from tinymqtt.client import Client
from tinymqtt.packets import sub_options
from tools.bench.broker import BenchBroker

TOPIC = "ceil/dev/telemetry"


def payload(i):
    return json.dumps({"device": "dev-%04d" % (i % 1000), "seq": i, "ts": 1.7e9 + i / 1000, "value": 20.0 + i % 7,
                       "status": None, "reason": None, "conn": 1}).encode()


def make_session(broker, cid):
    """Creates the persistent session and its QoS 2 subscription, then leaves: the broker queues for it."""
    c = Client(broker.host, broker.port, client_id=cid, version=5, clean=False, session_expiry=3600)
    c.connect()
    c.subscribe([(TOPIC, sub_options(2))], timeout=30)
    c.disconnect()


def preload(broker, n):
    c = Client(broker.host, broker.port, client_id="ceil-pub-" + uuid.uuid4().hex[:6], version=5, max_inflight=256,
               batch=True)
    c.connect()
    for i in range(n):
        c.publish(TOPIC, payload(i), qos=1 + i % 2)
    while c.session.flights.count or c.session.outlen:
        c.loop(0.05)
    c.disconnect()


def _arrow_table(rows):
    import pyarrow as pa
    from datetime import datetime, timezone
    topic, data, qos, ts = zip(*rows)
    return pa.table({"topic": list(topic), "payload": list(data), "qos": list(qos),
                     "received_ts": [datetime.fromtimestamp(t, tz=timezone.utc) for t in ts]})


def write_parquet(rows, path):
    """The plain subscriber's file: rows [(topic, payload, qos, received time)] as Parquet, on disk when it returns
    (fsynced, as the Spark sink's files are committed)."""
    import pyarrow.parquet as pq
    pq.write_table(_arrow_table(rows), path)
    fd = os.open(path, os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)


def drain_plain(broker, cid, n, out, rows_per_file=10000):
    """(a): tinymqtt subscriber, automatic acks, rows buffered and written as Parquet files (fsynced)."""
    os.makedirs(out)
    rows, written, first = [], 0, [None]

    def on_message(p):
        now = time.time()
        if first[0] is None:
            first[0] = now
        rows.append((p.topic, bytes(p.payload), p.qos, now))
    c = Client(broker.host, broker.port, client_id=cid, version=5, clean=False, session_expiry=3600,
               receive_maximum=65000, max_packet_size=1 << 20, batch=True)
    c.on_message = on_message
    c.connect()
    deadline = time.monotonic() + 300
    while written < n and time.monotonic() < deadline:
        c.loop(0.05)
        if len(rows) >= rows_per_file or (rows and written + len(rows) >= n):
            batch, rows[:] = rows[:], []
            write_parquet(batch, os.path.join(out, "part-%06d.parquet" % written))
            written += len(batch)
    end = time.time()
    c.disconnect()
    return {"rows": written, "seconds": end - first[0]}


def _spark_query(spark, broker, cid, d, **extra):
    from tools.spark.pipeline import source_options
    fmt = "mqtt"
    if extra.get("driverScan"):  # --driver-scan: the source behind tools.bench.spark_batches' DriverScan reader
        from tools.bench.spark_batches import TimedDataSource  # (registered by its module's name, for the workers)
        spark.dataSource.register(TimedDataSource)
        fmt = TimedDataSource.name()
    raw = spark.readStream.format(fmt).options(**source_options(
        "%s:%d" % (broker.host, broker.port), TOPIC, os.path.join(d, "ckpt"), cid, **extra)).load()
    return (raw.writeStream.format("parquet").option("path", os.path.join(d, "out"))
            .option("checkpointLocation", os.path.join(d, "ckpt")).trigger(processingTime="0 seconds").start())


PHASES = ("latestOffset", "walCommit", "queryPlanning", "addBatch", "commitOffsets")  # of a batch, in order


def _until_rows(q, n, timeout, log=None):
    """Polls the query's progress until n input rows were processed; returns (rows, time, batches with data,
    seconds those batches took). `log` gets [rows, ms, {phase: ms}] of every batch (Spark's durationMs: the
    first latestOffset holds the source's start, addBatch the executors' tasks and the sink's write)."""
    rows, end, batches, busy, seen = 0, None, 0, 0.0, set()
    deadline = time.monotonic() + timeout
    while rows < n and time.monotonic() < deadline:
        if q.exception() is not None:
            raise RuntimeError(str(q.exception()))
        for p in q.recentProgress:
            if p["batchId"] not in seen:
                seen.add(p["batchId"])
                rows += p["numInputRows"]
                if log is not None:
                    log.append([p["numInputRows"], p["durationMs"].get("triggerExecution", 0),
                                {k: p["durationMs"].get(k, 0) for k in PHASES}])
                if p["numInputRows"]:
                    batches += 1
                    busy += p["durationMs"].get("triggerExecution", 0) / 1000
        end = time.time()
        time.sleep(0.05)
    return rows, end, batches, busy


def warm_spark(broker, d, n=2000, **extra):
    """A long-running job is warm: the session, its JVM and its Python workers are started by a first small
    query (its time is reported apart, as the cold start), before the measured one."""
    from tools.spark.pipeline import spark_session
    t0 = time.time()
    spark = spark_session(2, app="tinymqtt-ceiling")
    cid = "ceil-warm-" + uuid.uuid4().hex[:6]
    make_session(broker, cid)
    preload(broker, n)
    q = _spark_query(spark, broker, cid, d, **extra)
    _until_rows(q, n, 300)
    q.stop()
    return time.time() - t0


def drain_spark(broker, cid, n, d, **extra):
    """(b): the Spark source in local[2] (warm), raw rows to Parquet, as fast as Spark triggers; `extra`: more
    source options."""
    from tools.spark.pipeline import spark_session
    spark = spark_session(2, app="tinymqtt-ceiling")
    t0 = time.time()
    q = _spark_query(spark, broker, cid, d, **extra)
    per_batch = []
    rows, end, batches, busy = _until_rows(q, n, 600, per_batch)
    q.stop()
    first = spark.read.parquet(os.path.join(d, "out")).agg({"received_ts": "min"}).collect()[0][0].timestamp()
    return {"rows": rows, "seconds": end - first, "from_start_s": end - t0, "first_row_after_start_s": first - t0,
            "batches": batches, "batch_seconds": busy, "batch_rows_ms": per_batch}


def drain_files(n, d):
    """(d): Spark's own file source over the same rows (topic, payload, qos, received_ts) already in Parquet
    files of 10,000 rows, into Parquet, as fast as Spark triggers: the clock runs from start()."""
    import pyarrow.parquet as pq
    from tools.spark.pipeline import spark_session
    src = os.path.join(d, "src")
    os.makedirs(src)
    now = time.time()
    for k in range(0, n, 10000):
        rows = [(TOPIC, payload(i), 1 + i % 2, now) for i in range(k, min(n, k + 10000))]
        pq.write_table(_arrow_table(rows), os.path.join(src, "part-%06d.parquet" % k))
    spark = spark_session(2, app="tinymqtt-ceiling")
    t0 = time.time()
    q = (spark.readStream.schema("topic STRING, payload BINARY, qos BIGINT, received_ts TIMESTAMP").parquet(src)
         .writeStream.format("parquet").option("path", os.path.join(d, "out"))
         .option("checkpointLocation", os.path.join(d, "ckpt")).trigger(processingTime="0 seconds").start())
    rows, end, batches, busy = _until_rows(q, n, 600)
    q.stop()
    return {"rows": rows, "seconds": end - t0, "from_start_s": end - t0, "batches": batches}


def drain_ingest(broker, cid, n, landing, spool):
    """(c): one tinymqtt_spark.ingest process (a plain subscription), landing files counted from their metadata."""
    import pyarrow.parquet as pq
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(tools.spark.PATHS))
    p = subprocess.Popen([sys.executable, "-m", "tinymqtt_spark.ingest", "--broker", "%s:%d" % (broker.host, broker.port),
                          "--group", "", "--topics", TOPIC, "--client-id", cid, "--landing", landing, "--spool", spool,
                          "--flush-ms", "200"], cwd=tools.spark.ROOT, env=env, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    try:
        counted, rows, end = {}, 0, None
        deadline = time.monotonic() + 300
        while rows < n and time.monotonic() < deadline:
            for path in glob.glob(os.path.join(landing, "part-*.parquet")):
                if path not in counted:
                    counted[path] = pq.read_metadata(path).num_rows
            rows, end = sum(counted.values()), time.time()
            time.sleep(0.05)
        first = min(pq.read_table(f, columns=["received_ts"]).column(0)[0].as_py().timestamp() for f in counted)
        return {"rows": rows, "seconds": end - first, "files": len(counted)}
    finally:
        p.terminate()
        p.wait(30)


def run(n, log=print, rounds=3, source_extra=None):
    from tools.spark.pipeline import stop_spark
    extra = dict(source_extra or {})
    out = {"n": n, "rounds": rounds, "source_options": extra}
    work = tempfile.mkdtemp(prefix="tinymqtt-ceiling-")
    with BenchBroker() as broker:
        try:
            out["spark_warmup_s"] = warm_spark(broker, os.path.join(work, "warm"), max(2000, n // 2), **extra)
            cid = "ceil-warm-plain-" + uuid.uuid4().hex[:6]  # (a) warm too: pyarrow's first Parquet write
            make_session(broker, cid)  # costs ~0.25 s, which a 50k drain used to count against the ceiling
            preload(broker, 2000)
            drain_plain(broker, cid, 2000, os.path.join(work, "warm-plain"))
            drainers = (("plain", lambda cid, d: drain_plain(broker, cid, n, os.path.join(d, "out"))),
                        ("spark", lambda cid, d: drain_spark(broker, cid, n, d, **extra)),
                        ("ingest", lambda cid, d: drain_ingest(broker, cid, n, os.path.join(d, "landing"),
                                                               os.path.join(d, "spool"))),
                        ("files", lambda cid, d: drain_files(n, d)))
            results = {key: [] for key, _ in drainers}
            for i in range(rounds):
                for key, fn in drainers:
                    cid, d = "ceil-%s-%s" % (key, uuid.uuid4().hex[:6]), os.path.join(work, "%s-%d" % (key, i))
                    os.makedirs(d)
                    if key != "files":
                        make_session(broker, cid)
                        preload(broker, n)
                    r = fn(cid, d)
                    r["rate"] = r["rows"] / r["seconds"] if r["seconds"] > 0 else 0.0
                    results[key].append(r)
                    log("bench: spark ceiling: round %d %-6s %d rows in %.2f s = %.0f rows/s"
                        % (i + 1, key, r["rows"], r["seconds"], r["rate"]))
                    if key == "spark":
                        log("bench: spark ceiling:   first row %.2f s after start(), last %.2f s; batches (rows: ms "
                            "%s): %s" % (r["first_row_after_start_s"], r["from_start_s"], "/".join(PHASES), ", ".join(
                                "%d: %s" % (b[0], "/".join(str(b[2][k]) for k in PHASES))
                                for b in r["batch_rows_ms"])))
        finally:
            stop_spark()
    for key, rs in results.items():
        r = out[key] = dict(sorted(rs, key=lambda x: x["rate"])[len(rs) // 2])  # the median round
        r["round_rates"] = [round(x["rate"]) for x in rs]
        if key != "plain":
            ratios = sorted(x["rate"] / p["rate"] for x, p in zip(rs, results["plain"]) if p["rate"])
            r["round_ratios"] = [round(x, 3) for x in ratios]
            r["ratio"] = ratios[len(ratios) // 2] if ratios else 0.0
        log("bench: spark ceiling: %-6s median %.0f rows/s%s (rounds %s)" % (
            key, r["rate"], " = %.2fx the ceiling (median of the rounds' ratios)" % r["ratio"] if key != "plain"
            else "", "/".join(str(x) for x in r["round_rates"])))
    # The source against Spark's own file source, both from start() to the last row, round by round.
    vs = sorted(f["from_start_s"] / s["from_start_s"] for s, f in zip(results["spark"], results["files"]))
    out["spark_vs_files_from_start"] = {
        "ratio": vs[len(vs) // 2], "round_ratios": [round(x, 3) for x in vs],
        "spark_s": [round(x["from_start_s"], 2) for x in results["spark"]],
        "files_s": [round(x["from_start_s"], 2) for x in results["files"]],
        "spark_first_row_after_start_s": [round(x["first_row_after_start_s"], 2) for x in results["spark"]]}
    log("bench: spark ceiling: the mqtt source from start() to its last row = %.2fx Spark's file source on the "
        "same rows (rounds: source %s s, files %s s; first row %s s after start())" % (
            vs[len(vs) // 2], "/".join("%.2f" % x["from_start_s"] for x in results["spark"]),
            "/".join("%.2f" % x["from_start_s"] for x in results["files"]),
            "/".join("%.2f" % x["first_row_after_start_s"] for x in results["spark"])))
    return out


def run_in_process(python, n, log=print, rounds=3):
    """The bench's "spark" section: this module in a process of its own (its own Spark JVM); None when
    pyspark is missing there."""
    return run_json_tool(python, ["tools.bench.spark_ceiling", "--n", str(n), "--rounds", str(rounds)],
                         "the Spark ceiling", log)


def write_json(path, res):
    """The other end of run_json_tool(): a Spark tool's results written to its --json file (None: not asked)."""
    if path:
        with open(path, "w") as f:
            json.dump(res, f, indent=1)


def run_json_tool(python, argv, what, log):
    """`python -m argv... --json F` in a process of its own (a Spark tool: its own JVM); its "bench: " lines
    logged, F's results returned; None (and the tail of its output logged) when it failed."""
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        p = subprocess.run([python, "-m"] + argv + ["--json", f.name],
                           cwd=tools.spark.ROOT, capture_output=True, text=True, timeout=1800)
        if p.returncode:
            log("bench: %s failed (exit %d): %s" % (what, p.returncode, (p.stderr or p.stdout)[-1500:]))
            return None
        for line in p.stdout.splitlines():
            if line.startswith("bench: "):
                log(line)
        with open(f.name) as fh:
            return json.load(fh)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m tools.bench.spark_ceiling")
    ap.add_argument("--n", type=int, default=20000, help="messages preloaded for each drainer (QoS 1/2 alternating)")
    ap.add_argument("--rounds", type=int, default=3, help="rounds per drainer; the median is reported")
    ap.add_argument("--json", default=None)
    ap.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                    help="a source option for (b) (repeat)")
    ap.add_argument("--driver-scan", action="store_true",
                    help="the source behind tools.bench.spark_batches' DriverScan reader (docs/spark.md, Speed)")
    a = ap.parse_args(argv)
    try:
        import pyspark  # noqa: F401
        import pyarrow  # noqa: F401
    except ImportError as e:
        raise SystemExit("spark_ceiling: %s (pip install -r requirements-test.txt)" % e)
    extra = dict(kv.split("=", 1) for kv in a.option)
    if a.driver_scan:
        extra["driverScan"] = "true"
    res = run(a.n, rounds=a.rounds, source_extra=extra)
    write_json(a.json, res)
    print(json.dumps(res))


if __name__ == "__main__":
    main()
