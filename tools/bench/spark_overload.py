# The overload of issue 34, full size: the tinymqtt_spark source in local[2] fed faster than its batches commit
# (target 40k msgs/s for 30 s, QoS 1 and 2 alternating, from two publisher processes), a supervisor restarting
# the query on its checkpoint whenever it fails, then the drain. Counted from what the Parquet sink committed
# against what the publishers had acknowledged by the broker: QoS 1/2 lost, QoS 2 duplicated, QoS 1
# duplicated; from the source's link: packet ids the broker reused while in flight, the peak unacknowledged
# window (received, not yet on disk), the peak of QoS 2 flows awaiting the broker's PUBREL, the peak of records
# spooled and not yet committed by Spark, how often the link stopped reading; from mosquitto's log: messages
# it dropped.
#     python -m tools.bench.spark_overload [--rate 40000] [--seconds 30] [--window 20000] [--spool-cap N]
#                                          [--json FILE]
import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid

import tools.spark  # noqa: F401  (sys.path: lib/, the Linux port, host/)
from tools.bench.broker import BenchBroker
from tools.bench.spark_ceiling import write_json


def paced(c, rate, seconds, publish_one):
    """Publishes with the connected client c at `rate` msgs/s for `seconds` (publish_one(i) sends message i);
    returns how many it sent."""
    t0, i = time.monotonic(), 0
    while True:
        now = time.monotonic() - t0
        if now >= seconds:
            break
        due = min(int(now * rate), i + 1000)  # (a broker that falls behind slows us: never past `seconds`)
        while i < due:
            publish_one(i)
            i += 1
        c.loop(0.001)
    return i


def unconfirmed_after(c, seconds):
    """Waits up to `seconds` for the broker to acknowledge c's flows; returns how many it never did."""
    deadline = time.monotonic() + seconds
    while c.session.flights.count and time.monotonic() < deadline:
        c.loop(0.05)
    return c.session.flights.count


def publisher(broker, topic, rate, seconds, tag):
    """One publisher process: paced to `rate`, QoS 1/2 alternating; prints how many the broker acknowledged."""
    from tinymqtt.client import Client
    host, _, port = broker.rpartition(":")
    c = Client(host, int(port), client_id="ovl-pub-%s" % tag, version=5, max_inflight=2000, batch=True)
    c.connect()
    t0 = time.monotonic()
    i = paced(c, rate, seconds, lambda i: c.publish(topic, b"%s-%d" % (tag.encode(), i), qos=1 + i % 2, timeout=5))
    unconfirmed = unconfirmed_after(c, 60)  # never acknowledged by the broker: not owed
    c.disconnect()
    print(json.dumps({"tag": tag, "sent": i, "unconfirmed": unconfirmed, "seconds": time.monotonic() - t0}),
          flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m tools.bench.spark_overload")
    ap.add_argument("--rate", type=int, default=40000, help="target msgs/s over all publishers")
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--publishers", type=int, default=2)
    ap.add_argument("--window", type=int, default=20000, help="the source's maxUnacked")
    ap.add_argument("--spool-cap", type=int, default=None, help="the source's maxSpooled (default: its own)")
    ap.add_argument("--drain-timeout", type=float, default=120)
    ap.add_argument("--json", default=None)
    ap.add_argument("--publish", nargs=5, metavar=("BROKER", "TOPIC", "RATE", "SECONDS", "TAG"), help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.publish:
        b, t, r, s, tag = a.publish
        return publisher(b, t, float(r), float(s), tag)

    import tinymqtt_spark
    from tools.spark.pipeline import spark_session, stop_spark
    work = tempfile.mkdtemp(prefix="tinymqtt-overload-")
    ckpt, out = os.path.join(work, "ckpt"), os.path.join(work, "out")
    topic = "ovl-%s/t" % uuid.uuid4().hex[:6]
    res = {"rate_target": a.rate, "seconds": a.seconds, "window": a.window, "failures": []}
    with BenchBroker() as broker:
        addr = "%s:%d" % (broker.host, broker.port)
        spark = spark_session(2, app="tinymqtt-overload")

        def start():
            df = (spark.readStream.format("mqtt").option("broker", addr).option("topic", topic)
                  .option("checkpointLocation", ckpt).option("maxUnacked", str(a.window)))
            if a.spool_cap:
                df = df.option("maxSpooled", str(a.spool_cap))
            df = df.load()
            return (df.selectExpr("CAST(payload AS STRING) AS body", "qos").writeStream.format("parquet")
                    .option("path", out).option("checkpointLocation", ckpt).trigger(processingTime="1 second")
                    .start())
        try:
            q = start()
            tinymqtt_spark.wait_live(ckpt, q, timeout=180)
            env = dict(os.environ, PYTHONPATH=os.pathsep.join(tools.spark.PATHS))
            t0 = time.time()
            pubs = [subprocess.Popen([sys.executable, "-m", "tools.bench.spark_overload", "--publish", addr, topic,
                                      str(a.rate / a.publishers), str(a.seconds), "p%d" % k],
                                     cwd=tools.spark.ROOT, env=env, stdout=subprocess.PIPE, text=True)
                    for k in range(a.publishers)]
            sent, peak, paused, reused, superseded, rel, spooled = {}, 0, 0, 0, 0, 0, 0

            def watch(q):
                nonlocal peak, paused, reused, superseded, rel, spooled
                s = tinymqtt_spark.link_stats(ckpt)
                peak = max(peak, s.get("peak_unacked", 0), s.get("unacked", 0))
                rel = max(rel, s.get("peak_awaiting_pubrel", 0), s.get("awaiting_pubrel", 0))
                spooled = max(spooled, s.get("uncommitted", 0))
                paused = max(paused, s.get("paused", 0))
                reused = max(reused, s.get("pid_reused", 0))
                superseded = max(superseded, s.get("pid_superseded", 0))
                if q.exception() is not None:  # the supervisor: start it again on its checkpoint
                    res["failures"].append({"t": round(time.time() - t0, 1), "error": str(q.exception())[:300]})
                    q = start()
                return q
            while any(p.poll() is None for p in pubs):
                q = watch(q)
                time.sleep(0.5)
            for p in pubs:
                d = json.loads(p.stdout.read().strip().splitlines()[-1])
                sent[d["tag"]] = d["sent"]
                res.setdefault("unconfirmed_by_broker", 0)
                res["unconfirmed_by_broker"] += d["unconfirmed"]
            pub_end = time.time()
            res["published"] = sum(sent.values())
            res["publish_rate"] = round(res["published"] / (pub_end - t0))
            owed = {"%s-%d" % (tag, i): 1 + i % 2 for tag, n in sent.items() for i in range(n)}
            deadline = time.monotonic() + a.drain_timeout
            got = 0
            while time.monotonic() < deadline:
                q = watch(q)
                s = tinymqtt_spark.link_stats(ckpt)
                if s.get("received", 0) and not s.get("unacked") and s.get("idle_s", 0) and s["idle_s"] > 3:
                    got = spark.read.schema("body STRING, qos INT").parquet(out).count()
                    if got >= len(owed):
                        break
                time.sleep(1)
            res["drained_after_s"] = round(time.time() - pub_end, 1)
            q.stop()
            rows = spark.read.schema("body STRING, qos INT").parquet(out).collect()
            stats = tinymqtt_spark.link_stats(ckpt)
        finally:
            stop_spark()
        log = broker.log_text() if hasattr(broker, "log_text") else ""
    copies = collections.Counter(r.body for r in rows)
    res.update(rows=len(rows), distinct=len(copies),
               lost_qos1=sum(1 for b, q in owed.items() if q == 1 and not copies[b]),
               lost_qos2=sum(1 for b, q in owed.items() if q == 2 and not copies[b]),
               dup_qos1=sum(copies[b] - 1 for b, q in owed.items() if q == 1 and copies[b] > 1),
               dup_qos2=sum(copies[b] - 1 for b, q in owed.items() if q == 2 and copies[b] > 1),
               unknown_rows=sum(1 for b in copies if b not in owed), peak_unacked=peak,
               peak_awaiting_pubrel=rel, peak_uncommitted_sampled=spooled,
               pid_reused=reused, pid_superseded=superseded, paused=stats.get("paused"),
               link=stats, broker_dropped_lines=sum(1 for line in log.splitlines() if "dropped" in line.lower()))
    print(json.dumps({k: v for k, v in res.items() if k != "link"}))
    print("overload: %d published (%d msgs/s of %d target) in %.0f s, %d query failures; drained %.1f s after the "
          "publishers; QoS 1 lost %d dup %d, QoS 2 lost %d dup %d; peak unacked %d (window %d), peak awaiting "
          "PUBREL %d, peak uncommitted %d (sampled), reading paused %s times, packet ids reused %d, broker drop "
          "lines %d" % (res["published"], res["publish_rate"], a.rate, a.seconds, len(res["failures"]),
                        res["drained_after_s"], res["lost_qos1"], res["dup_qos1"], res["lost_qos2"], res["dup_qos2"],
                        res["peak_unacked"], a.window, rel, spooled, res["paused"], res["pid_reused"],
                        res["broker_dropped_lines"]))
    write_json(a.json, res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
