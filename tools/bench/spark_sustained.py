# Sustained capacity (issue 34): the highest publish rate each sink keeps up with, and its latency there.
# For each target rate, paced publisher processes (two by default; tinymqtt, QoS 1, the payload carries the
# publish time) publish for --seconds to one mosquitto (BenchBroker), into (a) the plain tinymqtt subscriber writing
# Parquet (spark_ceiling's (a), a file every --interval or 10,000 rows) and then (b) the tinymqtt_spark source in
# local[2] writing Parquet with Spark's file sink (trigger every --interval). A row's latency is when it was in a
# durable Parquet file minus its publish time: for (a) when its file was fsynced, for (b) when its batch's entry in the
# sink's log (`_spark_metadata/<batch>`) was written, i.e. the batch's commit. Each step waits for the drain
# (at most --drain-cap s) before the next rate; a sink's steps stop at its first unbounded one.
# "Bounded" (a step's backlog did not grow): every row delivered, the last one within DRAIN_LIMIT_S of the
# publisher's end, and the p50 latency of the rows published in the step's last third at most one --interval
# above the first third's. The publishers alone (unpaced, a C subscriber counting) are measured first. When a
# step's achieved rate is short of its target, the publishers were the bound, not the sink: their CPU (in cores)
# and the share of the machine's CPUs busy (others' work included) say whether their own code or a full machine
# held them.
#     python -m tools.bench.spark_sustained [--rates 2500,5000,10000,20000] [--seconds 15] [--json FILE]
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid

import tools.spark  # noqa: F401  (sys.path: lib/, the Linux port, host/)
from tools.bench import cpu
from tools.bench.broker import BenchBroker, Counter
from tools.bench.spark_ceiling import run_json_tool, write_json, write_parquet
from tools.bench.spark_overload import paced, unconfirmed_after

DRAIN_LIMIT_S = 5.0  # the last row within this of the publisher's end (two or three Spark batches)
ROWS_PER_FILE = 10000  # the plain subscriber's largest file, as in spark_ceiling
WARM_S = 3.0  # an unmeasured first step at the lowest rate: Spark's first batches, pyarrow's first write


def publisher(broker, topic, rate, seconds, step, tag):
    """One publisher process, paced to `rate` (QoS 1): payload b"<step> <tag> <seq> <time.time()>". Prints what
    it sent, when it started and ended (time.time()) and what the broker never acknowledged."""
    from tinymqtt.client import Client
    host, _, port = broker.rpartition(":")
    c = Client(host, int(port), client_id="sus-pub-%s-%s" % (tag, uuid.uuid4().hex[:6]), version=5,
               max_inflight=2000, batch=True)
    c.connect()
    head = b"%d %s " % (step, tag.encode())
    w0, c0 = time.time(), time.process_time()
    i = paced(c, rate, seconds, lambda i: c.publish(topic, head + b"%d %.6f" % (i, time.time()), qos=1, timeout=5))
    w1, c1 = time.time(), time.process_time()
    unconfirmed = unconfirmed_after(c, 30)
    c.disconnect()
    print(json.dumps({"tag": tag, "sent": i, "unconfirmed": unconfirmed, "t_start": w0, "t_end": w1,
                      "cpu_s": c1 - c0}), flush=True)


def publish(addr, topic, rate, seconds, step, publishers):
    """Runs the publisher processes to their end; returns their reports merged: sent, t_start, t_end, the
    publishers' CPU (in cores: CPU seconds over the publishing time) and the share of all this machine's CPUs
    busy meanwhile (everything on it, others' work included)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(tools.spark.PATHS))
    procs = [subprocess.Popen([sys.executable, "-m", "tools.bench.spark_sustained", "--publish", addr, topic,
                               str(rate / publishers), str(seconds), str(step), "p%d" % k],
                              cwd=tools.spark.ROOT, env=env, stdout=subprocess.PIPE, text=True)
             for k in range(publishers)]
    busy0 = cpu.snapshot()
    reports = []
    for p in procs:
        out, _ = p.communicate(timeout=seconds + 120)
        if p.returncode:
            raise RuntimeError("a publisher failed (exit %d)" % p.returncode)
        reports.append(json.loads(out.strip().splitlines()[-1]))
    busy1 = cpu.snapshot()
    pub = {"sent": sum(r["sent"] for r in reports), "unconfirmed": sum(r["unconfirmed"] for r in reports),
           "t_start": min(r["t_start"] for r in reports), "t_end": max(r["t_end"] for r in reports)}
    pub["publisher_cores"] = sum(r["cpu_s"] for r in reports) / max(pub["t_end"] - pub["t_start"], 1e-9)
    pub["machine_busy"] = cpu.busy_between(busy0, busy1)
    return pub


def parse(payload):
    """(step, key, publish time) of a payload the publisher wrote; key = "tag seq", unique within a step."""
    step, tag, seq, t = payload.split(b" ")
    return int(step), tag + b" " + seq, float(t)


def percentile(sorted_xs, q):
    """Nearest rank: the smallest value with at least q of the values at or below it."""
    if not sorted_xs:
        return None
    rank = math.ceil(round(q * len(sorted_xs), 6))  # (round: 0.99 * 100 is 99.00000000000001 in floats)
    return sorted_xs[min(len(sorted_xs), max(rank, 1)) - 1]


def step_stats(rows, pub, interval, drain_limit=DRAIN_LIMIT_S):
    """A step's figures from its delivered rows [(key, publish time, landed time)] (duplicates allowed: the
    first landing counts) and the publishers' merged report `pub` (sent, t_start, t_end)."""
    first = {}
    for key, t_pub, t_land in rows:
        if key not in first or t_land < first[key][1]:
            first[key] = (t_pub, t_land)
    span = max(pub["t_end"] - pub["t_start"], 1e-9)
    lat = sorted(land - p for p, land in first.values())
    third = span / 3

    def p50_of(lo, hi):
        xs = sorted(land - p for p, land in first.values() if lo <= p - pub["t_start"] < hi)
        return percentile(xs, 0.5)
    last = max((land for _, land in first.values()), default=None)
    r = {"published": pub["sent"], "publish_rate": pub["sent"] / span, "rows": len(rows), "delivered": len(first),
         "duplicates": len(rows) - len(first),
         "p50_s": percentile(lat, 0.5), "p99_s": percentile(lat, 0.99), "max_s": lat[-1] if lat else None,
         "backlog_at_end": pub["sent"] - sum(1 for _, land in first.values() if land <= pub["t_end"]),
         "last_after_end_s": None if last is None else last - pub["t_end"],
         "p50_first_third_s": p50_of(0, third), "p50_last_third_s": p50_of(2 * third, span + 1)}
    r["batches"] = len(set(land for _, land in first.values()))  # (Spark's batches, the plain sink's files)
    r["drained"] = r["delivered"] >= pub["sent"]
    r["bounded"] = bool(r["drained"] and r["last_after_end_s"] is not None and r["last_after_end_s"] <= drain_limit
                        and r["p50_first_third_s"] is not None and r["p50_last_third_s"] is not None
                        and r["p50_last_third_s"] <= r["p50_first_third_s"] + interval)
    return r


def headline(steps):
    """The bounded step with the highest achieved rate, or None; "at_least": no step was unbounded, so the
    sink's own limit lies above every rate it was given (the publishers' or the machine's limit was reached)."""
    ok = [s for s in steps if s.get("bounded")]
    if not ok:
        return None
    best = max(ok, key=lambda s: s["publish_rate"])
    return dict({k: best[k] for k in ("target", "publish_rate", "p50_s", "p99_s")}, at_least=len(ok) == len(steps))


class PlainSink(threading.Thread):
    """(a): spark_ceiling's plain subscriber (tinymqtt, automatic acks, pyarrow Parquet files fsynced), written
    for a live stream: a file every `interval` seconds or ROWS_PER_FILE rows. landed: [(time, payloads)]."""

    def __init__(self, broker, topic, out, interval):
        super().__init__(daemon=True)
        from tinymqtt.client import Client
        from tinymqtt.packets import sub_options
        os.makedirs(out)
        self.out, self.interval, self.rows, self.landed, self.count = out, interval, [], [], 0
        self.done, self.error, self.lock = threading.Event(), None, threading.Lock()
        c = self.client = Client(broker.host, broker.port, client_id="sus-plain-" + uuid.uuid4().hex[:6],
                                 version=5, clean=False, session_expiry=3600, receive_maximum=65000,
                                 max_packet_size=1 << 20, batch=True)
        c.on_message = lambda p: self.rows.append((p.topic, bytes(p.payload), p.qos, time.time()))
        c.connect()
        c.subscribe([(topic, sub_options(1))], timeout=30)

    def _flush(self):
        batch, self.rows[:] = self.rows[:], []
        write_parquet(batch, os.path.join(self.out, "part-%08d.parquet" % self.count))
        with self.lock:
            self.landed.append((time.time(), [r[1] for r in batch]))
            self.count += len(batch)

    def run(self):
        try:
            last = time.monotonic()
            while not self.done.is_set():
                self.client.loop(0.05)
                now = time.monotonic()
                if self.rows and (len(self.rows) >= ROWS_PER_FILE or now - last >= self.interval):
                    self._flush()
                    last = now
                elif not self.rows:
                    last = now  # (the interval runs from the first row buffered after an idle spell)
            if self.rows:
                self._flush()
            self.client.disconnect()
        except Exception as e:  # reported by the step that waits for it
            self.error = e

    def delivered(self):
        if self.error:
            raise RuntimeError("the plain subscriber failed: %r" % self.error)
        return self.count

    def take(self):
        """[(landed time, payloads)] landed since the last take()."""
        with self.lock:
            out, self.landed[:] = self.landed[:], []
        return out

    def close(self):
        self.done.set()
        self.join(30)


class SparkSink:
    """(b): the tinymqtt_spark source in local[2], raw rows to Parquet with Spark's file sink. A batch's rows
    landed when its entry in the sink's log (out/_spark_metadata/<batch>, written at the batch's commit) was."""

    def __init__(self, broker, topic, work, interval):
        import tinymqtt_spark
        from tools.spark.pipeline import spark_session
        self.spark = spark_session(2, app="tinymqtt-sustained")
        self.out, ckpt = os.path.join(work, "out"), os.path.join(work, "ckpt")
        raw = (self.spark.readStream.format("mqtt").option("broker", "%s:%d" % (broker.host, broker.port))
               .option("topic", topic).option("qos", "1").option("checkpointLocation", ckpt).load())
        self.query = (raw.writeStream.format("parquet").option("path", self.out).option("checkpointLocation", ckpt)
                      .trigger(processingTime="%g seconds" % interval).start())
        tinymqtt_spark.wait_live(ckpt, self.query, timeout=180)
        self.seen, self.next_batch, self.count, self.landed = set(), 0, 0, []

    def _scan(self):
        import pyarrow.parquet as pq
        log = os.path.join(self.out, "_spark_metadata")
        while True:  # batch logs in order: "N" or (every 10th, holding all before it) "N.compact"
            path = next((p for p in (os.path.join(log, str(self.next_batch)),
                                     os.path.join(log, "%d.compact" % self.next_batch)) if os.path.exists(p)), None)
            if path is None:
                return
            t = os.stat(path).st_mtime
            with open(path) as f:
                files = [json.loads(line)["path"] for line in f.read().splitlines()[1:] if line.strip()]
            for uri in files:
                if uri not in self.seen:
                    self.seen.add(uri)
                    local = uri[len("file:"):] if uri.startswith("file:") else uri
                    local = "/" + local.lstrip("/")
                    payloads = pq.read_table(local, columns=["payload"]).column(0).to_pylist()
                    self.landed.append((t, payloads))
                    self.count += len(payloads)
            self.next_batch += 1

    def delivered(self):
        if self.query.exception() is not None:
            raise RuntimeError("the Spark query failed: %s" % str(self.query.exception())[:500])
        self._scan()
        return self.count

    def take(self):
        self._scan()
        out, self.landed[:] = self.landed[:], []
        return out

    def close(self):
        self.query.stop()


def run_sink(name, sink, addr, topic, rates, seconds, interval, publishers, drain_cap, stop_early, log):
    """The steps for one sink: a warm-up, then each rate in turn; returns [step figures]."""
    owed, steps, rows = 0, [], {}

    def collect():
        for t_land, payloads in sink.take():
            for p in payloads:
                step, key, t_pub = parse(p)
                rows.setdefault(step, []).append((key, t_pub, t_land))

    plan = [(-1, rates[0], WARM_S)] + [(k, r, seconds) for k, r in enumerate(rates)]
    for k, rate, secs in plan:
        pub = publish(addr, topic, rate, secs, k, publishers)
        owed += pub["sent"]
        deadline = time.time() + drain_cap
        while sink.delivered() < owed and time.time() < deadline:
            time.sleep(0.1)
        collect()
        if k < 0:
            continue
        s = step_stats(rows.pop(k, []), pub, interval)
        s.update(target=rate, unconfirmed_by_broker=pub["unconfirmed"], publisher_cores=pub["publisher_cores"],
                 machine_busy=pub["machine_busy"])
        steps.append(s)
        log("bench: sustained: %-5s target %6d/s: published %d at %.0f/s, delivered %d in %d batches, p50 %s p99 %s, "
            "backlog at end %d, last row %s after, p50 first/last third %s/%s (publisher %.2f cores, machine %s "
            "busy): %s" % (
                name, rate, s["published"], s["publish_rate"], s["delivered"], s["batches"], _s(s["p50_s"]),
                _s(s["p99_s"]),
                s["backlog_at_end"], _s(s["last_after_end_s"]), _s(s["p50_first_third_s"]),
                _s(s["p50_last_third_s"]), s["publisher_cores"], _pct(s["machine_busy"]),
                "bounded" if s["bounded"] else "NOT bounded"))
        if not s["bounded"] and stop_early:
            break
        owed = sink.delivered()  # (duplicates of at-least-once delivery must not count toward the next step)
    return steps


def _s(x):
    return "-" if x is None else "%.2f s" % x


def _pct(x):
    return "?" if x is None else "%.0f%%" % (100 * x)


def publisher_ceiling(broker, publishers, seconds=3.0):
    """The publisher(s) unpaced for `seconds`, a C subscriber (mosquitto_sub) counting: their own ceiling here."""
    topic = "sus-ceil-%s/t" % uuid.uuid4().hex[:6]
    counter = Counter(broker.port, topic, qos=1)
    try:
        time.sleep(0.3)  # (subscribed before the first message)
        pub = publish("%s:%d" % (broker.host, broker.port), topic, 1e9, seconds, 0, publishers)
        got, _ = counter.wait_for(pub["sent"], time.monotonic() + 10)
    finally:
        counter.close()
    span = pub["t_end"] - pub["t_start"]
    return {"sent": pub["sent"], "rate": pub["sent"] / span, "counted": got, "publisher_cores": pub["publisher_cores"],
            "machine_busy": pub["machine_busy"],
            # its CPU per message: the rate it would reach with a core of its own (when the broker keeps up)
            "cpu_us_per_msg": 1e6 * pub["publisher_cores"] * span / max(pub["sent"], 1)}


def run(rates, seconds, interval=1.0, publishers=2, drain_cap=10.0, stop_early=True, log=None):
    from tools.spark.pipeline import stop_spark
    log = log or (lambda line: print(line, flush=True))
    work = tempfile.mkdtemp(prefix="tinymqtt-sustained-")
    res = {"rates": list(rates), "seconds": seconds, "interval_s": interval, "publishers": publishers,
           "drain_limit_s": DRAIN_LIMIT_S, "drain_cap_s": drain_cap, "load_before": "%.2f" % os.getloadavg()[0]}
    t0 = time.time()
    with BenchBroker() as broker:
        addr = "%s:%d" % (broker.host, broker.port)
        res["publisher"] = publisher_ceiling(broker, publishers)
        p = res["publisher"]
        log("bench: sustained: the publishers alone (unpaced, %d processes): %.0f msgs/s (publishers %.2f cores, "
            "%.1f us of its CPU per message, machine %s busy)" % (publishers, p["rate"], p["publisher_cores"],
                                                                  p["cpu_us_per_msg"], _pct(p["machine_busy"])))
        topic = "sus-plain-%s/t" % uuid.uuid4().hex[:6]
        sink = PlainSink(broker, topic, os.path.join(work, "plain"), interval)
        sink.start()
        try:
            res["plain"] = run_sink("plain", sink, addr, topic, rates, seconds, interval, publishers, drain_cap,
                                    stop_early, log)
        finally:
            sink.close()
        topic = "sus-spark-%s/t" % uuid.uuid4().hex[:6]
        try:
            t1 = time.time()
            sink = SparkSink(broker, topic, os.path.join(work, "spark"), interval)
            res["spark_start_s"] = time.time() - t1
            try:
                res["spark"] = run_sink("spark", sink, addr, topic, rates, seconds, interval, publishers, drain_cap,
                                        stop_early, log)
            finally:
                sink.close()
        finally:
            stop_spark()
    res["load_after"] = "%.2f" % os.getloadavg()[0]
    res["wall_s"] = time.time() - t0
    for key in ("plain", "spark"):
        h = headline(res[key])
        res[key + "_capacity"] = h
        log("bench: sustained: %-5s highest bounded rate: %s" % (key, "none of the rates" if not h else
            "%s%.0f msgs/s (target %d), p50 %.2f s, p99 %.2f s%s" % (
                "at least " if h["at_least"] else "", h["publish_rate"], h["target"], h["p50_s"], h["p99_s"],
                " (bounded at every rate it was given)" if h["at_least"] else "")))
    return res


def run_in_process(python, log=print, rates=None, seconds=None):
    """The bench's "spark" section: this module in a process of its own (its own Spark JVM); None on failure."""
    args = ["tools.bench.spark_sustained"]
    if rates:
        args += ["--rates", ",".join(str(r) for r in rates)]
    if seconds:
        args += ["--seconds", str(seconds)]
    return run_json_tool(python, args, "the Spark sustained run", log)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m tools.bench.spark_sustained")
    ap.add_argument("--rates", default="2500,5000,10000,20000", help="target msgs/s, comma-separated, rising")
    ap.add_argument("--seconds", type=float, default=15, help="publishing time per rate")
    ap.add_argument("--interval", type=float, default=1.0, help="Spark's trigger and the plain sink's flush (s)")
    ap.add_argument("--publishers", type=int, default=2, help="publisher processes sharing each rate")
    ap.add_argument("--drain-cap", type=float, default=10.0, help="longest wait for a step's drain (s)")
    ap.add_argument("--all", action="store_true", help="run every rate, not only up to a sink's first unbounded")
    ap.add_argument("--json", default=None)
    ap.add_argument("--publish", nargs=6, metavar=("BROKER", "TOPIC", "RATE", "SECONDS", "STEP", "TAG"),
                    help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.publish:
        b, t, r, s, step, tag = a.publish
        return publisher(b, t, float(r), float(s), int(step), tag)
    try:
        import pyspark  # noqa: F401
        import pyarrow  # noqa: F401
    except ImportError as e:
        raise SystemExit("spark_sustained: %s (pip install -r requirements-test.txt)" % e)
    rates = [int(x) for x in a.rates.split(",") if x.strip()]
    res = run(rates, a.seconds, a.interval, a.publishers, a.drain_cap, not a.all)
    from tools.bench import report
    print(report.table(*report.spark_sustained_rows({"spark_sustained": res})))
    print(report.spark_sustained_headline({"spark_sustained": res}))
    print("load average %s before, %s after; %.0f s in all" % (res["load_before"], res["load_after"], res["wall_s"]))
    write_json(a.json, res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
