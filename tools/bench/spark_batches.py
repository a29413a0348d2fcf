# Where a Spark source query's time goes, batch by batch: the measuring tool behind docs/spark.md's "Speed".
# One warm local[2] session (Spark UI on, for its REST API), a persistent session preloaded with --n QoS 1/2
# messages, then the mqtt source drains it into Parquet (as tools.bench.spark_ceiling's (b) does) and Spark's
# own file source writes the same rows, --rounds times. It prints, per run:
#  - the source's calls with their time after start() and duration, each in the process that made it (the
#    driver's long-lived source worker: streamReader, getDefaultReadLimit, latestOffset, partitions, commit;
#    the executors' workers: read, with their CPU), from a subclass of the source that only times its calls
#    ("mqtttimed", in this module, so that Spark's workers import it as they import the source);
#  - when the driver's source worker process was started and when it imported this module (unpickling the
#    source), so: how long Spark took to hand it the source, and which part of that was Python's imports;
#  - each batch's phases (Spark's durationMs) and each task's run time and JVM CPU (the UI's REST API).
#     python -m tools.bench.spark_batches [--n 50000] [--rounds 2] [--num-partitions N] [--driver-scan]
#                                         [--option KEY=VALUE ...] [--conf KEY=VALUE ...]
import argparse
import json
import os
import tempfile
import time
import urllib.request
import uuid

import tools.spark  # noqa: F401  (sys.path: lib/ and the Linux port)
from pyspark.sql.datasource_internal import _SimpleStreamReaderWrapper

from tinymqtt_spark.source import MQTTDataSource, MQTTPartition, MQTTStreamReader, arrow_schema, records_to_batch

TRACE_ENV = "TINYMQTT_SPARK_BENCH_TRACE"  # the file the timed source appends its lines to


def _process_started():
    """This process's start time (epoch seconds), from /proc."""
    with open("/proc/self/stat") as f:
        ticks = int(f.read().rsplit(")", 1)[1].split()[19])
    with open("/proc/uptime") as f:
        up = float(f.read().split()[0])
    return time.time() - up + ticks / os.sysconf("SC_CLK_TCK")


def _trace(what, t0, **more):
    path = os.environ.get(TRACE_ENV)
    if path:
        with open(path, "a") as f:
            f.write(json.dumps(dict(more, what=what, t=t0, s=time.time() - t0, pid=os.getpid())) + "\n")


# A Spark worker imports this module when it unpickles the source: after pyspark's own imports, before the JVM
# hands it anything else (so this line splits the driver's source worker start into Python's and the JVM's part).
_trace("imported", time.time(), started=_process_started())


def _timed(what, call, *args, **more):
    """call(*args), traced as `what` from its start to its end (also when it raises)."""
    t = time.time()
    try:
        return call(*args)
    finally:
        _trace(what, t, **more)


class TimedReader(MQTTStreamReader):
    def initialOffset(self):
        return _timed("initialOffset", super().initialOffset)

    def getDefaultReadLimit(self):
        return _timed("getDefaultReadLimit", super().getDefaultReadLimit)

    def latestOffset(self, start, limit):
        t = time.time()
        end = super().latestOffset(start, limit)
        _trace("latestOffset", t, start=start["offset"], end=end["offset"])
        return end

    def partitions(self, start, end):
        return _timed("partitions", super().partitions, start, end, rows=int(end["offset"]) - int(start["offset"]))

    def batch(self, s, e):  # DriverScan's partitions(): the same spool read and Arrow columns as partitions()'
        def build():
            link = self.link()
            rows = list(link.records(s, e)) if link.expose() >= e else None
            if rows is None:
                raise RuntimeError("the spool does not reach offset %d" % e)
            return records_to_batch(rows, arrow_schema()) if rows else None
        return _timed("batch", build, rows=e - s)

    def read(self, partition):
        t, c = time.time(), time.process_time()
        yield from super().read(partition)
        _trace("read", t, rows=partition.rows, cpu=time.process_time() - c, started=_process_started())

    def commit(self, end):
        return _timed("commit", super().commit, end)


class DriverScan(_SimpleStreamReaderWrapper):
    """--driver-scan (measured in docs/spark.md, "Speed", and not adopted): the reader behind pyspark's wrapper
    for SimpleDataSourceStreamReader. For that wrapper (and only it) the driver's source worker sends a batch's
    rows to the JVM as Arrow right after partitions(), from getCache(); the JVM keeps them in its block manager and
    one task per batch reads them there, with no executor Python worker. Unlike pyspark's own wrapper, getCache()
    builds any batch from the spool, so a batch replayed after a restart would be served by the driver too
    (pyspark's calls readBetweenOffsets() on an executor, which cannot read the driver's spool)."""

    def __init__(self, reader):
        super().__init__(reader)  # the runner reads .simple_reader (SupportsTriggerAvailableNow) itself
        self._planned = None  # (start, end, RecordBatch or None) of the last partitions() call

    def initialOffset(self):
        return self.simple_reader.initialOffset()

    def getDefaultReadLimit(self):
        return self.simple_reader.getDefaultReadLimit()

    def latestOffset(self, start, limit):
        return self.simple_reader.latestOffset(start, limit)

    def partitions(self, start, end):  # Spark takes exactly one partition when the rows come from the driver
        s, e = int(start["offset"]), int(end["offset"])
        batch = self.simple_reader.batch(s, e) if e > s else None
        self._planned = (start, end, batch)
        return [] if batch is None else [MQTTPartition(b"", batch.num_rows)]

    def getCache(self, start, end):
        p, self._planned = self._planned, None
        if p is None or p[2] is None or (p[0], p[1]) != (start, end):
            return None
        return iter([p[2]])

    def read(self, partition):
        raise RuntimeError("driverScan: Spark asked an executor for a batch the driver did not send")

    def commit(self, end):
        self.simple_reader.commit(end)

    def stop(self):
        self.simple_reader.stop()


class TimedDataSource(MQTTDataSource):
    @classmethod
    def name(cls):
        return "mqtttimed"

    def streamReader(self, schema):
        _trace("streamReader", time.time(), started=_process_started())
        reader = TimedReader(self.config)
        driver_scan = {str(k).lower(): v for k, v in self.options.items()}.get("driverscan", "false")
        return DriverScan(reader) if str(driver_scan).lower() == "true" else reader


def _session(conf=()):
    from pyspark.sql import SparkSession
    from tools.spark import pipeline
    pipeline.spark_env()
    b = SparkSession.builder
    for k, v in conf:  # --conf: the settings under test, before the defaults below (which they do not override)
        b = b.config(k, v)
    spark = (b.master("local[2]").appName("tinymqtt-spark-batches")
             .config("spark.ui.enabled", "true").config("spark.ui.port", "0")
             .config("spark.ui.showConsoleProgress", "false").config("spark.sql.shuffle.partitions", "4")
             .config("spark.default.parallelism", "2").config("spark.sql.session.timeZone", "UTC")
             .config("spark.driver.bindAddress", "127.0.0.1").config("spark.driver.host", "127.0.0.1")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    from tools.bench.spark_batches import TimedDataSource as timed  # by its module's name, not __main__'s:
    spark.dataSource.register(timed)                                # Spark's workers import it by that name
    pipeline._spark = spark  # spark_ceiling.drain_files takes this session
    return spark


def _tasks(spark, after):
    """[(stage id, [(run ms, JVM CPU ms)])] of the stages after `after`."""
    def get(path):
        return json.load(urllib.request.urlopen(spark.sparkContext.uiWebUrl + "/api/v1/applications/" +
                                                spark.sparkContext.applicationId + path))
    out = []
    for st in sorted(get("/stages"), key=lambda s: s["stageId"]):
        if st["stageId"] > after and st.get("status") == "COMPLETE":
            tasks = get("/stages/%d/%d/taskList?length=100" % (st["stageId"], st["attemptId"]))
            out.append((st["stageId"], [(t["taskMetrics"]["executorRunTime"],
                                         t["taskMetrics"]["executorCpuTime"] // 1000000) for t in tasks]))
    return out


def run_source(spark, broker, n, d, trace, log=print, **options):
    from tools.bench import spark_ceiling as C
    from tools.spark.pipeline import source_options
    cid = "batches-" + uuid.uuid4().hex[:6]
    C.make_session(broker, cid)
    C.preload(broker, n)
    open(trace, "w").close()
    t0 = time.time()
    raw = spark.readStream.format("mqtttimed").options(**source_options(
        "%s:%d" % (broker.host, broker.port), C.TOPIC, os.path.join(d, "ckpt"), cid, **options)).load()
    t1 = time.time()
    q = (raw.writeStream.format("parquet").option("path", os.path.join(d, "out"))
         .option("checkpointLocation", os.path.join(d, "ckpt")).trigger(processingTime="0 seconds").start())
    batches = []
    rows, end, _, _ = C._until_rows(q, n, 600, batches)
    q.stop()
    log("source: load() %.2f s; start() to the last row %.2f s (%d rows)" % (t1 - t0, end - t1, rows))
    with open(trace) as f:
        for line in f:
            e = json.loads(line)
            more = " ".join("%s=%s" % (k, round(v - t1, 2) if k == "started" else
                                       round(v, 3) if isinstance(v, float) else v)
                            for k, v in sorted(e.items()) if k not in ("what", "t", "s", "pid"))
            log("  %+6.2f s  %5.3f s  pid %-6d %s %s" % (e["t"] - t1, e["s"], e["pid"], e["what"], more))
    for b in batches:
        log("  batch: %d rows, %d ms: %s" % (b[0], b[1], ", ".join("%s %d" % kv for kv in b[2].items())))
    return end - t1


def main(argv=None):
    from tools.bench import spark_ceiling as C
    from tools.bench.broker import BenchBroker
    from tools.spark.pipeline import stop_spark
    ap = argparse.ArgumentParser(prog="python -m tools.bench.spark_batches")
    ap.add_argument("--n", type=int, default=50000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--num-partitions", type=int, default=None, help="the source's numPartitions option")
    ap.add_argument("--driver-scan", action="store_true",
                    help="this module's DriverScan reader: each batch from the driver, no executor Python worker")
    ap.add_argument("--option", action="append", default=[], metavar="KEY=VALUE", help="a source option (repeat)")
    ap.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                    help="a Spark setting for the session (repeat)")
    a = ap.parse_args(argv)
    options = dict(kv.split("=", 1) for kv in a.option)
    if a.num_partitions:
        options["numPartitions"] = a.num_partitions
    if a.driver_scan:
        options["driverScan"] = "true"
    work = tempfile.mkdtemp(prefix="tinymqtt-batches-")
    trace = os.environ[TRACE_ENV] = os.path.join(work, "trace.jsonl")  # before the JVM: its workers inherit it
    with BenchBroker() as broker:
        try:
            spark = _session([kv.split("=", 1) for kv in a.conf])
            print("settings: %s; source options: %s" % (a.conf, options))
            print("load average before: %s" % open("/proc/loadavg").read().strip())
            run_source(spark, broker, max(2000, a.n // 2), os.path.join(work, "warm"), trace, log=lambda s: None)
            last = max([s for s, _ in _tasks(spark, -1)] or [-1])
            for i in range(a.rounds):
                print("round %d" % (i + 1))
                run_source(spark, broker, a.n, os.path.join(work, "src-%d" % i), trace,
                           **options)
                for s, ts in _tasks(spark, last):
                    print("  stage %d tasks (run ms / JVM CPU ms): %s" % (s, ", ".join("%d/%d" % t for t in ts)))
                    last = s
                r = C.drain_files(a.n, os.path.join(work, "files-%d" % i))
                print("files: start() to the last row %.2f s" % r["from_start_s"])
                for s, ts in _tasks(spark, last):
                    print("  stage %d tasks (run ms / JVM CPU ms): %s" % (s, ", ".join("%d/%d" % t for t in ts)))
                    last = s
            print("load average after: %s" % open("/proc/loadavg").read().strip())
        finally:
            stop_spark()


if __name__ == "__main__":
    main()
