# python -m tools.bench.aio_profile [CLIENT] [RUNS] [QOS]: where a MicroPython publisher's CPU goes in aio_rates'
# QoS 1 (or QOS) run (20000 x 64 B, 1000 in flight, through the bench's mosquitto with a mosquitto_sub subscriber
# taking every message, as the counter does there). Each run twice under Linux perf: `perf stat` counts the
# publisher's read, write and poll calls (a poll is a wait in asyncio's IO queue), `perf record` its hottest C
# functions of the interpreter. CLIENT: mp-tinymqtt-aio (default), mp-tinymqtt, mp32-...; needs perf (linux-tools)
# and root or kernel.perf_event_paranoid <= 1. A diagnosis, not a figure for the report: perf slows what it watches.
import json
import os
import shutil
import subprocess
import sys
import tempfile

from tools.bench import mp_unix
from tools.bench.broker import BenchBroker

ROOT = mp_unix.ROOT
SYSCALLS = ("read", "write", "poll")


def run(args, env, perf):
    p = subprocess.Popen(perf + args, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env)
    if p.stdout.readline().strip() != "READY":
        raise SystemExit("the publisher did not connect: %s" % p.communicate(timeout=30)[1][-2000:])
    p.stdin.write("GO\n")
    p.stdin.flush()
    out, err = p.communicate(timeout=120)
    result = [line for line in out.splitlines() if line.startswith("RESULT ")]
    if p.returncode or not result:
        raise SystemExit("the publisher failed (exit %s): %s" % (p.returncode, err[-2000:]))
    r = json.loads(result[0][len("RESULT "):])
    return r["cpu"] / r["sent"] * 1e6  # the publisher's CPU (user + kernel) per message, us


def main(argv):
    client = argv[0] if argv else "mp-tinymqtt-aio"
    runs = int(argv[1]) if len(argv) > 1 else 3
    qos = int(argv[2]) if len(argv) > 2 else 1
    if not shutil.which("perf"):
        raise SystemExit("aio_profile needs Linux perf (apt-get install linux-perf)")
    tmp = tempfile.mkdtemp(prefix="aio-profile-")
    broker = BenchBroker().start()
    sub = subprocess.Popen(["mosquitto_sub", "-p", str(broker.port), "-t", "bench/t", "-q", str(qos), "-F", "x"],
                           stdout=subprocess.DEVNULL)
    try:
        for i in range(runs):
            args, env = mp_unix.command(client, ["tput", qos, 20000, broker.port, 10, 1000, 64, "bench/t"])
            counts = os.path.join(tmp, "stat%d" % i)
            cpu = run(args, env, ["perf", "stat", "-x,", "-o", counts, "-e",
                                  ",".join("syscalls:sys_enter_" + s for s in SYSCALLS)])
            calls = {line.split(",")[2].rsplit("_", 1)[1]: line.split(",")[0]
                     for line in open(counts) if "syscalls:" in line}
            data = os.path.join(tmp, "perf%d.data" % i)
            cpu_rec = run(args, env, ["perf", "record", "-q", "-o", data])
            report = subprocess.run(["perf", "report", "-i", data, "--sort", "symbol", "--stdio"],
                                    capture_output=True, text=True).stdout
            top = [" ".join(line.split()[:1] + line.split()[2:3]) for line in report.splitlines()
                   if line.strip() and not line.startswith("#")][:5]
            print("run %d: %.1f us/msg (perf stat), %.1f us/msg (perf record); calls %s; hottest: %s" % (
                i + 1, cpu, cpu_rec, " ".join("%s %s" % kv for kv in calls.items()), ", ".join(top)))
    finally:
        sub.kill()
        broker.close()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv[1:])
