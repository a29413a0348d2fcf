# The main job, end to end on one machine (`python -m tools.demo`, `make demo`):
#   a local mosquitto (own config: free loopback port, in-flight and queue limits raised for deferred acks)
#   -> a fleet of simulated devices on tinymqtt's AsyncClient (cuts, deaths, session resume)
#   -> Spark Structured Streaming through the tinymqtt_spark source (host/tinymqtt_spark; the job is
#      tools/spark/pipeline.py), writing Parquet with a checkpoint;
#      the Spark job is killed (SIGKILL, whole process group) mid-stream and restarted from its checkpoint
#   -> the audit (loss and duplicates per QoS against the fleet's manifest, latency, device status, sensor
#      windows) -> a table here and a PNG plot (latency per QoS, messages per second).
# --cluster N runs the same job on a Spark standalone cluster started here (tools/spark/cluster.py: a master
# and N workers, each its own JVM), kills and restarts its driver the same way, and stops the cluster;
# audit.json then says where the tasks ran ("spark": master, executors, executors_by_worker).
import argparse
import json
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

import tools.spark  # noqa: F401  (sys.path)

ROOT = tools.spark.ROOT


# ------------------------------------------------------------------------------------------ the broker

def mosquitto_binary():
    path = shutil.which("mosquitto") or "/usr/sbin/mosquitto"
    if not os.access(path, os.X_OK):
        raise SystemExit("demo: mosquitto not found (apt-get install mosquitto, or run tools/bootstrap.sh)")
    return path


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


BROKER_CONF = """listener {port} 127.0.0.1
allow_anonymous true
# Deferred acks: the Spark source acknowledges a batch only after Spark committed it, so thousands of QoS 1/2
# messages wait in flight. mosquitto's defaults (20 in flight, 1000 queued per client) would drop the rest
# silently. The source's Receive Maximum sets the in-flight window of an MQTT 5 client; this is for others.
max_inflight_messages 1000
max_queued_messages 1000000
max_queued_bytes 0
max_connections -1
set_tcp_nodelay true
# Sessions live in memory: the demo never restarts the broker (persistence true + autosave would let them
# survive a broker restart, not a broker crash).
persistence false
log_dest file {log}
log_type error
log_type warning
log_type notice
log_timestamp true
"""


class Broker:
    def __init__(self, workdir):
        self.dir = workdir
        self.port = free_port()
        self.host = "127.0.0.1"
        self.conf = os.path.join(workdir, "mosquitto.conf")
        self.log = os.path.join(workdir, "mosquitto.log")
        self.proc = None

    def start(self):
        with open(self.conf, "w") as f:
            f.write(BROKER_CONF.format(port=self.port, log=self.log))
        self.proc = subprocess.Popen([mosquitto_binary(), "-c", self.conf], stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=open(self.log + ".stderr", "w"))
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection((self.host, self.port), 0.2).close()
                return self
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit("demo: mosquitto did not start (see %s)" % self.log)
                time.sleep(0.05)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.proc = None

    @property
    def address(self):
        return "%s:%d" % (self.host, self.port)


# ------------------------------------------------------------------------------------------ the Spark job

class Pipeline:
    """tools.spark.pipeline in its own process group, so that a kill takes the JVM and its Python workers."""

    def __init__(self, d, broker, prefix, n, master=None):
        self.d, self.broker, self.prefix, self.n, self.master = d, broker, prefix, n, master
        self.log = os.path.join(d, "pipeline-%d.log" % n)
        self.proc = None
        self.started = self.ready_at = None

    def start(self):
        cmd = [sys.executable, "-m", "tools.spark.pipeline", "--broker", self.broker, "--prefix", self.prefix,
               "--out", os.path.join(self.d, "out"), "--checkpoint", os.path.join(self.d, "checkpoint"),
               "--progress", os.path.join(self.d, "progress.jsonl"), "--drain-file", os.path.join(self.d, "drain"),
               "--manifest", os.path.join(self.d, "manifest.jsonl"), "--audit-json", os.path.join(self.d, "audit.json")]
        if self.master:
            cmd += ["--master", self.master]
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(tools.spark.PATHS + [p for p in env.get("PYTHONPATH", "").split(
            os.pathsep) if p])
        self.started = time.time()
        self.proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=open(self.log, "w"),
                                     stderr=subprocess.STDOUT, start_new_session=True)
        return self

    def saw(self, word):
        """The seconds after its start at which the job printed `word` (its own clock), or None."""
        try:
            with open(self.log, errors="replace") as f:
                for line in f:
                    if line.startswith(word + " "):
                        return float(line.split()[1])
        except (OSError, ValueError, IndexError):
            pass
        return None

    def wait_for(self, word, timeout):
        deadline = time.monotonic() + timeout
        while self.saw(word) is None:
            if self.proc.poll() is not None:
                raise SystemExit("demo: the Spark job exited (code %s) before %s; its log: %s\n%s"
                                 % (self.proc.returncode, word, self.log, tail(self.log)))
            if time.monotonic() > deadline:
                raise SystemExit("demo: no %s from the Spark job within %.0f s; its log: %s" % (word, timeout,
                                                                                                self.log))
            time.sleep(0.1)
        if word == "READY" and self.ready_at is None:
            self.ready_at = self.started + self.saw(word)

    def kill(self):
        """SIGKILL to the whole group: driver, JVM, the reader holding the MQTT session, the workers."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()


def tail(path, n=30):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-n:])
    except OSError:
        return ""


# ------------------------------------------------------------------------------------------ the report

def retained_status(broker, prefix, devices, wait=1.5):
    """The broker's retained status topics, read by a fresh subscriber: {device: status}. The broker sends
    them all right after the SUBACK; this stops once every device's is in, or after `wait` seconds."""
    from tinymqtt.client import Client
    seen = {}
    c = Client(broker.host, broker.port, client_id="demo-status-%d" % os.getpid(), version=5)

    def on_message(p):
        try:
            m = json.loads(bytes(p.payload))
            seen[m["device"]] = m["status"]
        except (ValueError, KeyError):
            pass
    c.on_message = on_message
    c.connect()
    c.subscribe("%s/+/status" % prefix, 1)
    end = time.monotonic() + wait
    while time.monotonic() < end and len(seen) < devices:
        c.loop(0.1)
    c.disconnect()
    return seen


def ingest_figures(progress_path):
    rows = []
    try:
        with open(progress_path) as f:
            rows = [json.loads(line) for line in f if line.strip()]
    except OSError:
        pass
    busy = [r for r in rows if r["rows"]]
    total_rows = sum(r["rows"] for r in busy)
    total_ms = sum(r["duration_ms"] or 0 for r in busy)
    peak = max([r["processed_rps"] or 0 for r in busy] or [0])
    return {"batches": len(rows), "batches_with_data": len(busy), "rows": total_rows,
            "rows_per_s_of_batch_time": total_rows / (total_ms / 1000) if total_ms else 0.0,
            "peak_processed_rps": peak,
            "mean_batch_s": (total_ms / 1000 / len(busy)) if busy else 0.0}


def plot(audit, kill_at, restart_ready, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(13, 4.8))
    colors = {"0": "#555555", "1": "#1f77b4", "2": "#d62728"}
    for q, bins in sorted(audit["latency_histogram"].items()):
        if not bins:
            continue
        by_lo = {round(math.log10(b[0]) * 10): b[2] for b in bins}  # bin k: 10**(k/10) ms
        xs, ys = [], []
        for k in range(min(by_lo), max(by_lo) + 1):  # a step outline per QoS (empty bins at 0)
            xs += [10 ** (k / 10), 10 ** ((k + 1) / 10)]
            ys += [by_lo.get(k, 0)] * 2
        xs = [xs[0]] + xs + [xs[-1]]
        ys = [0] + ys + [0]
        a1.plot(xs, ys, color=colors.get(q), lw=1.6, label="QoS %s (%d msgs)" % (q, sum(b[2] for b in bins)))
        a1.fill_between(xs, ys, color=colors.get(q), alpha=0.12, step=None)
    a1.set_xscale("log")
    a1.set_yscale("log")
    a1.set_xlabel("latency: device send -> Spark source receive (ms)")
    a1.set_ylabel("messages")
    a1.set_title("Latency per QoS (first copy of each message)")
    a1.legend()
    ps = audit["per_second"]
    if ps:
        t0 = ps[0][0]
        a2.plot([p[0] - t0 for p in ps], [p[1] for p in ps], label="sent by the fleet", color="#2ca02c")
        a2.plot([p[0] - t0 for p in ps], [p[2] for p in ps], label="received by the Spark source", color="#1f77b4")
        if kill_at:
            a2.axvline(kill_at - t0, color="#d62728", ls="--", label="Spark job killed")
        if restart_ready:
            a2.axvline(restart_ready - t0, color="#ff7f0e", ls=":", label="restarted from checkpoint")
    a2.set_xlabel("seconds")
    a2.set_ylabel("messages per second")
    a2.set_title("Throughput")
    a2.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ------------------------------------------------------------------------------------------ main

def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m tools.demo", description="fleet -> mosquitto -> Spark -> audit")
    ap.add_argument("--devices", type=int, default=1000)
    ap.add_argument("--rate", type=float, default=1.0, help="messages per second per device")
    ap.add_argument("--duration", type=float, default=60.0, help="seconds the fleet publishes")
    ap.add_argument("--cuts", type=int, default=3)
    ap.add_argument("--deaths", type=int, default=5)
    ap.add_argument("--kill-at", type=float, default=0.4, help="kill the Spark job at this share of the run "
                                                               "(0: no kill)")
    ap.add_argument("--out", default=os.path.join(ROOT, "out", "demo"))
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--cluster", type=int, default=0, metavar="N", help="run the job on a local standalone "
                                                                       "cluster of N workers (1 core, 1 GB each)")
    a = ap.parse_args(argv)
    try:
        import pyspark  # noqa: F401
        import matplotlib  # noqa: F401
    except ImportError as e:
        raise SystemExit("demo: %s: run tools/bootstrap.sh (or `make demo`), which installs pyspark[sql], "
                         "pandas<3 and matplotlib into .venv" % e)
    from tools.fleet.sim import Fleet, FleetConfig, format_summary
    from tools.spark.audit import format_table

    wall0 = time.time()
    d = os.path.abspath(a.out)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    prefix = "fleet"
    print("demo: workdir %s" % d)
    broker = Broker(tempfile.mkdtemp(prefix="demo-mosquitto-")).start()
    print("demo: mosquitto on %s (config %s)" % (broker.address, broker.conf))
    pipes, killed_at, cluster, spark_info = [], None, None, None
    try:
        if a.cluster:
            from tools.spark.cluster import Cluster
            os.makedirs(os.path.join(d, "cluster"))
            t = time.time()
            cluster = Cluster(a.cluster, os.path.join(d, "cluster"), python=sys.executable).start(wait=False)
        master = cluster.url if cluster else None
        # On a cluster the job starts once the master is up, while the workers start: the master gives the
        # job its executors as the workers register, and the job waits for them before its first batch.
        p1 = Pipeline(d, broker.address, prefix, 1, master).start()
        pipes.append(p1)
        if cluster:
            cluster.wait_workers()
            print("demo: Spark standalone cluster %s with %d workers up in %.1f s" % (cluster.url, a.cluster,
                                                                                      time.time() - t))
        p1.wait_for("READY", 240)
        print("demo: Spark job up and subscribed in %.1f s (pid %d)" % (p1.ready_at - p1.started, p1.proc.pid))

        cfg = FleetConfig(host=broker.host, port=broker.port, devices=a.devices, rate=a.rate, duration=a.duration,
                          qos_per="message", prefix=prefix, cuts=a.cuts, cut_via="mixed", cut_fraction=0.1,
                          deaths=a.deaths, seed=a.seed, manifest=os.path.join(d, "manifest.jsonl"), progress=True)
        fleet = Fleet(cfg)
        result = {}
        th = threading.Thread(target=lambda: result.update(summary=_run(fleet)), name="fleet")
        th.start()
        if a.kill_at > 0:
            while th.is_alive() and not fleet.publish_start:
                time.sleep(0.05)
            time.sleep(max(0.0, fleet.publish_start + a.kill_at * a.duration - time.time()))
            killed_at = time.time()
            p1.kill()
            sys.stderr.write("\n")
            print("demo: killed the Spark job (SIGKILL to its process group) at %.0f%% of the run; restarting "
                  "it from its checkpoint" % (100 * a.kill_at), flush=True)
            p2 = Pipeline(d, broker.address, prefix, 2, master).start()
            pipes.append(p2)
        th.join()
        if "summary" not in result:
            raise SystemExit("demo: the fleet failed")
        sm = result["summary"]
        last = pipes[-1]
        last.wait_for("READY", 240)
        if killed_at:
            print("demo: restarted Spark job ready %.1f s after the kill" % (last.ready_at - killed_at))
        status_direct = retained_status(broker, prefix, a.devices)
        open(os.path.join(d, "drain"), "w").close()
        last.wait_for("AUDITED", 600)
        last.proc.wait(60)
        with open(os.path.join(d, "audit.json")) as f:
            audit = json.load(f)
        if cluster:  # which worker ran which executor, from the workers themselves
            spark_info = audit["spark"]
            spark_info["workers"] = len(cluster.alive_workers())
            spark_info["executors_by_worker"] = cluster.executors_by_worker(spark_info["app_id"])
            with open(os.path.join(d, "audit.json"), "w") as f:
                json.dump(audit, f, indent=1, default=str)
    finally:
        for p in pipes:
            if p.proc and p.proc.poll() is None:
                p.kill()
        if cluster:
            cluster.stop()
        broker.stop()

    ingest = ingest_figures(os.path.join(d, "progress.jsonl"))
    png = os.path.join(d, "report.png")
    plot(audit, killed_at, pipes[-1].ready_at if killed_at else None, png)
    t = audit["totals"]
    span = (t["last_received"] or 0) - (t["first_received"] or 0)
    st = audit["status"]
    direct_online = sum(1 for v in status_direct.values() if v == "online")
    print()
    print("=" * 78)
    print("tinymqtt fleet -> mosquitto -> Spark: report")
    print("=" * 78)
    print("Fleet")
    print(format_summary(sm))
    print()
    print("Audit (owed = every QoS 0 message + every QoS 1/2 message the broker acknowledged;")
    print("       unconf. = delivered/total of QoS 1/2 messages never acknowledged to the device)")
    print(format_table(audit))
    print()
    print("Pipeline")
    print("  end to end          %d telemetry rows over %.1f s = %.0f msgs/s received by the source"
          % (t["telemetry_rows"], span, t["telemetry_rows"] / span if span else 0))
    print("  Spark ingest        %d micro-batches with data, %.0f rows/s of batch time (peak %.0f rows/s), "
          "%.2f s per batch" % (ingest["batches_with_data"], ingest["rows_per_s_of_batch_time"],
                                ingest["peak_processed_rps"], ingest["mean_batch_s"]))
    if killed_at:
        print("  crash + restart     killed at +%.0f s, ready again after %.1f s (QoS 1/2 waited in the broker "
              "session; QoS 0 sent meanwhile is lost by design)" % (killed_at - p1.ready_at,
                                                                   pipes[-1].ready_at - killed_at))
    print("  devices             %d online, %d offline (%d by their will), %d without status; the broker's "
          "retained topics say %d online, %d offline" % (st["online"], st["offline"], st["offline_by_will"],
                                                         st["no_status"], direct_online,
                                                         len(status_direct) - direct_online))
    w = [x for x in audit["windows"] if x["messages"]]
    if w:
        print("  sensor windows      %d x %ds: mean %.2f, min %.2f, max %.2f (%d..%d messages a window)" % (
            len(w), w[0]["seconds"], sum(x["avg"] * x["messages"] for x in w) / sum(x["messages"] for x in w),
            min(x["min"] for x in w), max(x["max"] for x in w), min(x["messages"] for x in w),
            max(x["messages"] for x in w)))
    if spark_info:
        print("  Spark cluster       %s: %d workers, %d executors ran tasks (%s); by worker: %s"
              % (spark_info["master"], spark_info["workers"], spark_info["executors"],
                 ", ".join("exec %s: %d tasks" % kv for kv in sorted(spark_info["executor_tasks"].items())),
                 spark_info["executors_by_worker"]))
    print("  wall time           %.1f s" % (time.time() - wall0))
    print("  plot                %s" % png)
    print("  files               %s (audit.json, manifest.jsonl, out/, checkpoint/, pipeline-*.log)" % d)
    report = {"fleet": sm.as_dict(), "ingest": ingest, "totals": t, "status": st, "status_direct_online":
              direct_online, "killed_at": killed_at, "wall_seconds": time.time() - wall0,
              "restart_seconds": (pipes[-1].ready_at - killed_at) if killed_at else None, "spark": spark_info}
    with open(os.path.join(d, "report.json"), "w") as f:
        json.dump(report, f, indent=1)
    bad = [q for q in audit["per_qos"] if q["qos"] > 0 and q["lost"]] + \
          [q for q in audit["per_qos"] if q["qos"] == 2 and q["duplicates"]]
    if bad:
        print("demo: FAILED: QoS 1/2 lost messages or QoS 2 duplicated some: %r" % bad)
        return 1
    return 0


def _run(fleet):
    import asyncio
    return asyncio.run(fleet.run())


if __name__ == "__main__":
    sys.exit(main())
