# The Spark source's link alone (host/tinymqtt_spark/link.py), draining a backlog: a broker preloaded with N
# QoS 1/2 messages for a persistent session, one MqttLink receiving, spooling (fsync on) and acknowledging them,
# and a consumer in this process standing in for the Spark source (every --commit-ms it exposes what was spooled,
# decodes the records as partitions() does, and commits them). The clock runs from the link's first message to
# the moment the consumer has committed the last one and every ack is written; and the CPU time the link's thread
# used per message (less at the mercy of a loaded machine than the rate): what the link costs on its own, without
# Spark. --profile prints where the link's thread spends its time (cProfile).
#     python -m tools.bench.spark_link_rate [--n 50000] [--rounds 3] [--profile]
import argparse
import cProfile
import os
import pstats
import shutil
import tempfile
import time
import uuid

import tools.spark  # noqa: F401  (sys.path: lib/, the Linux port, host/)
from tools.bench.broker import BenchBroker
from tools.bench.spark_ceiling import make_session, preload, TOPIC


def drain_link(broker, cid, n, spool, commit_s=0.1, profile=None):
    from tinymqtt_spark.link import MqttLink
    link = MqttLink(broker.host, broker.port, cid, [TOPIC], spool)
    run, cpu = link._run, [0.0]

    def measured():  # the CPU the link's own thread used: what a message costs, whatever else loads the machine
        t0 = time.thread_time()
        try:
            run() if profile is None else profile.runcall(run)  # (cProfile sees one thread: this one)
        finally:
            cpu[0] = time.thread_time() - t0
    link._run = measured
    link.start()
    try:
        done, deadline = 0, time.monotonic() + 300
        while done < n and time.monotonic() < deadline:
            time.sleep(commit_s)
            link.check()
            with link.lock:
                start = link.spool.committed
            end = link.expose()
            done += sum(1 for _ in link.records(start, end))
            link.commit(end)
        if not link.wait_acked(end, 30):
            raise RuntimeError("acks not written within 30 s")
        t_end = time.time()
    finally:
        link.stop()
    return {"rows": done, "seconds": t_end - link.first_message_at, "cpu_s": cpu[0]}


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m tools.bench.spark_link_rate")
    ap.add_argument("--n", type=int, default=50000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--profile", action="store_true")
    a = ap.parse_args(argv)
    work = tempfile.mkdtemp(prefix="tinymqtt-linkrate-")
    rates, cpu = [], []
    prof = cProfile.Profile() if a.profile else None
    try:
        with BenchBroker() as broker:
            for i in range(a.rounds):
                cid = "linkrate-" + uuid.uuid4().hex[:6]
                make_session(broker, cid)
                preload(broker, a.n)
                r = drain_link(broker, cid, a.n, os.path.join(work, "spool-%d" % i), profile=prof)
                rates.append(r["rows"] / r["seconds"])
                cpu.append(r["cpu_s"] / r["rows"] * 1e6)
                print("bench: spark link: round %d: %d rows in %.2f s = %.0f rows/s, link thread CPU %.1f us/message"
                      % (i + 1, r["rows"], r["seconds"], rates[-1], cpu[-1]), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("bench: spark link: median %.0f rows/s (rounds %s), link thread CPU median %.1f us/message (rounds %s)"
          % (sorted(rates)[len(rates) // 2], "/".join("%.0f" % x for x in rates), sorted(cpu)[len(cpu) // 2],
             "/".join("%.1f" % x for x in cpu)))
    if prof is not None:
        pstats.Stats(prof).sort_stats("tottime").print_stats(30)


if __name__ == "__main__":
    main()
