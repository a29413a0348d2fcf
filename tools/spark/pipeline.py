# The streaming job: MQTT (through the tinymqtt_spark package) -> parsed rows -> Parquet, with a checkpoint.
# Library use (tests, demo):  spark = spark_session(); q = start_query(spark, broker, out, checkpoint)
# As a process (the demo runs it so that it can kill it mid-stream and start it again from the checkpoint):
#     python -m tools.spark.pipeline --broker 127.0.0.1:1883 --out DIR --checkpoint DIR [--drain-file F]
#         [--master spark://HOST:PORT]
# It runs until the drain file appears and the source has been idle (everything received committed), then
# stops the query, optionally runs the audit (--manifest, --audit-json) in the same Spark session, and exits.
# With --master (a standalone cluster) the code executors need is shipped as the package's own zip
# (tinymqtt_spark.archive(), addPyFile: the workers run without the repo), the driver's
# UI is on for its REST API, and the audit gets a "spark" section: the master and the executors that ran tasks.
import argparse
import json
import os
import sys
import time

import tools.spark

TOPICS = "{prefix}/+/telemetry,{prefix}/+/status"
PAYLOAD_SCHEMA = "device STRING, seq BIGINT, ts DOUBLE, value DOUBLE, status STRING, reason STRING, conn INT"


def spark_env():
    """What the Python workers need: this interpreter, a loopback driver, and the repo's lib/, Linux port and
    host/ on PYTHONPATH (where an installed tinymqtt_spark would be in site-packages)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    for p in tools.spark.PATHS:
        if p not in paths:
            paths.append(p)
    os.environ["PYTHONPATH"] = os.pathsep.join(paths)


_spark = None


def spark_session(cores=2, app="tinymqtt-pipeline", master=None):
    """One Spark session per process (about 5 s to start), with the mqtt source registered: local[cores], or
    a standalone cluster's master URL (executors of 1 core and 512 MB, up to `cores` of them)."""
    global _spark
    if _spark is not None:
        return _spark
    spark_env()
    from pyspark.sql import SparkSession
    import tinymqtt_spark
    cluster = bool(master) and not master.startswith("local")
    b = (SparkSession.builder.master(master or "local[%d]" % cores).appName(app)
         .config("spark.ui.enabled", "true" if cluster else "false")
         .config("spark.ui.showConsoleProgress", "false")
         .config("spark.sql.shuffle.partitions", str(2 * cores))
         .config("spark.default.parallelism", str(cores))
         .config("spark.sql.session.timeZone", "UTC")
         .config("spark.driver.bindAddress", "127.0.0.1")
         .config("spark.driver.host", "127.0.0.1")
         .config("spark.sql.streaming.minBatchesToRetain", "20"))
    if cluster:
        b = (b.config("spark.ui.port", "0").config("spark.cores.max", str(cores))
             .config("spark.executor.cores", "1").config("spark.executor.memory", "512m"))
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    if cluster:
        spark.sparkContext.addPyFile(tinymqtt_spark.archive())
    spark.dataSource.register(tinymqtt_spark.MQTTDataSource)
    _spark = spark
    return spark


def stop_spark():
    global _spark
    if _spark is not None:
        _spark.stop()
        _spark = None


def source_options(broker, topics, checkpoint, client_id=None, spool=None, **extra):
    o = {"broker": broker, "topic": topics, "checkpointLocation": checkpoint, "qos": "2"}
    if spool:
        o["spoolDir"] = spool
    if client_id:
        o["clientId"] = client_id
    o.update({k: str(v) for k, v in extra.items()})
    return o


def transform(raw):
    """Raw MQTT rows -> telemetry and status columns parsed from the JSON payload (JVM-side)."""
    from pyspark.sql import functions as F
    j = F.from_json(F.col("payload").cast("string"), PAYLOAD_SCHEMA)
    return (raw.withColumn("j", j)
            .select(F.when(F.col("topic").endswith("/status"), F.lit("status")).otherwise(F.lit("telemetry"))
                    .alias("kind"),
                    "topic", "qos", "retain", "dup", "properties", "received_ts", "offset", "pid", "payload",
                    F.col("j.device").alias("device"), F.col("j.seq").alias("seq"), F.col("j.ts").alias("sent_ts"),
                    F.col("j.value").alias("value"), F.col("j.status").alias("status"),
                    F.col("j.reason").alias("reason"), F.col("j.conn").alias("conn")))


def start_query(spark, broker, out, checkpoint, topics=None, prefix="fleet", spool=None, client_id=None,
                trigger="1 second", name=None, **source_extra):
    """Starts MQTT -> Parquet. The spool defaults to <checkpoint>/mqtt-spool, so the two move together."""
    topics = topics or TOPICS.format(prefix=prefix)
    raw = spark.readStream.format("mqtt").options(**source_options(broker, topics, checkpoint, client_id, spool,
                                                                    **source_extra)).load()
    w = (transform(raw).writeStream.format("parquet").option("path", out)
         .option("checkpointLocation", checkpoint).trigger(processingTime=trigger))
    if name:
        w = w.queryName(name)
    return w.start()


def link_stats(spool):
    import tinymqtt_spark
    return tinymqtt_spark.link_stats(spool)


def wait_subscribed(spool, timeout=60.0, query=None):
    """Waits for the source's link to be live (connected, subscription granted): tinymqtt_spark.wait_live."""
    import tinymqtt_spark
    return tinymqtt_spark.wait_live(spool, query, timeout)


def drained(spool, idle_s):
    """True when the source has been quiet for idle_s (no message, and no ack that might let the broker send
    more) and every message it received is committed and acknowledged."""
    s = link_stats(spool)
    if not s or not s.get("connected") or s.get("unacked", 1) or s.get("idle_s") is None:
        return False
    if s["idle_s"] < idle_s or time.time() - s.get("time", 0) > 3:
        return False
    sp_committed, sp_next = s["committed"], s["next_offset"]
    return sp_next - sp_committed <= 1  # at most the heartbeat offset, which holds no message


def wait_drained(query, spool, idle_s=2.0, timeout=120.0):
    deadline = time.monotonic() + timeout
    while not drained(spool, idle_s):
        if query.exception() is not None:
            raise RuntimeError("the streaming query failed: %s" % query.exception())
        if time.monotonic() > deadline:
            raise TimeoutError("the pipeline did not drain within %.0f s: %r" % (timeout, link_stats(spool)))
        time.sleep(0.2)


def progress_rows(query, seen):
    """New batch progress reports of a query (numInputRows, rates, durations) as plain dicts."""
    out = []
    for p in query.recentProgress:
        bid = p["batchId"] if isinstance(p, dict) else p.batchId
        if bid in seen:
            continue
        seen.add(bid)
        d = p if isinstance(p, dict) else json.loads(p.json)
        out.append({"batch": d["batchId"], "timestamp": d["timestamp"], "rows": d["numInputRows"],
                    "input_rps": d.get("inputRowsPerSecond"), "processed_rps": d.get("processedRowsPerSecond"),
                    "duration_ms": d.get("durationMs", {}).get("triggerExecution")})
    return out


def spark_section(spark, master):
    """Where the job ran: the master, and on a cluster the executors that ran its tasks (the driver's REST
    API, not an assumption) with their task counts."""
    sc = spark.sparkContext
    out = {"master": master or sc.master, "app_id": sc.applicationId}
    if master and not master.startswith("local"):
        from tools.spark.cluster import executors_with_tasks
        tasks = executors_with_tasks(spark)
        out.update(executors=len(tasks), executor_tasks=tasks)
    else:
        out["executors"] = 0  # local mode: the tasks ran in the driver's JVM
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--broker", required=True, help="host:port")
    ap.add_argument("--prefix", default="fleet")
    ap.add_argument("--topics", default=None)
    ap.add_argument("--out", required=True)
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--client-id", default=None)
    ap.add_argument("--trigger", default="1 second")
    ap.add_argument("--cores", type=int, default=2, help="local[cores], or at most this many executor cores")
    ap.add_argument("--master", default=None, help="a standalone cluster, spark://127.0.0.1:PORT")
    ap.add_argument("--drain-file", default=None, help="stop once this file exists and the source is idle")
    ap.add_argument("--idle", type=float, default=2.0)
    ap.add_argument("--progress", default=None, help="append batch progress here (JSON lines)")
    ap.add_argument("--manifest", default=None, help="after draining, audit against this fleet manifest")
    ap.add_argument("--audit-json", default=None)
    a = ap.parse_args(argv)
    t0 = time.time()
    spark = spark_session(a.cores, master=a.master)
    print("SESSION %.1f" % (time.time() - t0), flush=True)
    q = start_query(spark, a.broker, a.out, a.checkpoint, topics=a.topics, prefix=a.prefix, client_id=a.client_id,
                    trigger=a.trigger, name="mqtt-to-parquet")
    print("STARTED %.1f" % (time.time() - t0), flush=True)
    spool = os.path.join(a.checkpoint, "mqtt-spool")
    wait_subscribed(spool, timeout=300, query=q)
    print("READY %.1f" % (time.time() - t0), flush=True)
    seen = set()
    prog = open(a.progress, "a") if a.progress else None
    try:
        while True:
            if q.exception() is not None:
                raise RuntimeError("the streaming query failed: %s" % q.exception())
            if prog:
                for row in progress_rows(q, seen):
                    prog.write(json.dumps(row) + "\n")
                prog.flush()
            if a.drain_file and os.path.exists(a.drain_file) and drained(spool, a.idle):
                break
            time.sleep(0.25)
        q.stop()
        if prog:
            for row in progress_rows(q, seen):
                prog.write(json.dumps(row) + "\n")
        print("DRAINED %.1f" % (time.time() - t0), flush=True)
        section = spark_section(spark, a.master)
        print("EXECUTORS %.1f %s" % (time.time() - t0, json.dumps(section)), flush=True)
        if a.manifest:
            from tools.spark.audit import audit, write_json
            res = audit(spark, a.out, a.manifest)
            res["spark"] = section
            write_json(res, a.audit_json or os.path.join(os.path.dirname(a.out), "audit.json"))
            print("AUDITED %.1f" % (time.time() - t0), flush=True)
    finally:
        if prog:
            prog.close()
        stop_spark()


if __name__ == "__main__":
    main()
