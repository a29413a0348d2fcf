# One realistic program written for every MicroPython MQTT client (tools/bench/fp/real_*.py: connect with a
# will, subscribe with a callback, a QoS 1 reading every second, survive a broker restart), run on the 64-bit
# unix port (PyPI, .venv/bin/micropython), the 32-bit unix port and the 32-bit firmware with tinymqtt frozen
# (tools/mp32.py, from ../shared/micropython), against a real mosquitto that this bench restarts in the middle
# of every run. Per client and build: .mpy bytes (esp32), heap when connected, bytes per QoS 0 / QoS 1 publish
# and per received QoS 1 message, and the smallest -X heapsize with which the whole program runs (bisection).
# The peers come from the source tarballs beside the checkout, never from a registry: umqtt.simple 1.7.0 from
# the micropython-lib that MicroPython 1.28 pins, mqtt_as 0.8.3 from ../shared/peers.
#   python -m tools.bench.realistic [--quick]      (--quick: no bisection; make bench runs it as "realistic")
import concurrent.futures
import json
import os
import queue
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
import time

from tools import boards as boards_mod, deploy, mp32
from tools.bench import footprint
from tools.bench.broker import BenchBroker

FP = footprint.FP
PERIOD_MS = 1000
MQTT_AS = "mqtt_as-0.8.3-7b6a11d.tar.gz"
# What a board user can change to lower the heap, measured as rows of their own: the mqtt311 profile with
# buffers for small messages (a 512 B packet limit, 256 B for building outgoing ones, two messages in flight).
SMALL = {"max_packet_size": 512, "out_size": 256, "max_inflight": 2, "receive_maximum": 2, "keepalive": 60}
# (client, profile, app, buffers): profile None is a peer; buffers None is the esp32's (deploy.session_for)
ROWS = (("tinymqtt blocking", "mqtt311", "real_blocking.py", None),
        ("tinymqtt blocking, small buffers", "mqtt311", "real_blocking.py", SMALL),
        ("tinymqtt blocking", "full", "real_blocking.py", None),
        ("tinymqtt asyncio", "full", "real_aio.py", None),
        ("umqtt.simple", None, "real_umqtt.py", None),
        ("mqtt_as", None, "real_mqtt_as.py", None))
BUILDS = ("64-bit", "32-bit", "32-bit frozen")


def peers(tmp, log=print):
    """{app: (version, [(source file, its path on the board)])} for the peers, unpacked from the tarballs; a
    peer that cannot be had is left out with a line saying so."""
    out = {}
    try:
        shared = mp32.shared_dir()
    except mp32.Missing as e:
        log("realistic: %s: the peers are left out" % e)
        return out
    with tarfile.open(os.path.join(shared, "micropython", mp32.LIB_TARBALL)) as t:
        base = "micropython/umqtt.simple/"
        names = {m.name.split("/", 1)[1]: m for m in t.getmembers() if "/" in m.name}
        t.extractall(os.path.join(tmp, "umqtt"), members=[names[base + "umqtt/simple.py"], names[base + "manifest.py"]])
        root = os.path.join(tmp, "umqtt", names[base + "manifest.py"].name.rsplit("/", 1)[0])
    with open(os.path.join(root, "manifest.py")) as f:
        version = re.search(r'version="([^"]+)"', f.read()).group(1)
    out["real_umqtt.py"] = ("umqtt.simple %s" % version, [(os.path.join(root, "umqtt", "simple.py"), "umqtt/simple.py")])
    path = os.path.join(shared, "peers", MQTT_AS)
    if not os.path.exists(path):
        log("realistic: no %s: mqtt_as is left out" % path)
        return out
    with tarfile.open(path) as t:
        member = next(m for m in t.getmembers() if m.name.endswith("mqtt_as/__init__.py"))
        t.extractall(os.path.join(tmp, "mqtt_as"), members=[member])
    src = os.path.join(tmp, "mqtt_as", member.name)
    with open(src) as f:
        version = ".".join(re.search(r"VERSION = \((\d+), (\d+), (\d+)\)", f.read()).groups())
    out["real_mqtt_as.py"] = ("mqtt_as %s" % version, [(src, "mqtt_as/__init__.py")])
    return out


def make_tree(dest, profile, app, buffers, host, port, peer_files=()):
    """The linux board's tree (footprint.tree: portable .mpy, the esp32's short errors and buffers) for the app,
    with real_common and the peer's modules as .mpy and, for mqtt_as, the network / machine stand-ins."""
    modules = [(os.path.join(FP, "real_common.py"), "real_common.py")] + list(peer_files)
    if app == "real_mqtt_as.py":  # (a board has these built in)
        modules += [(os.path.join(FP, "network.py"), "network.py"),
                    (os.path.join(footprint.ROOT, "tests", "fakes", "machine.py"), "machine.py")]
    extra = []
    for src, member in modules:  # .mpy, as a board gets them: a .py is compiled on the board, in its heap
        mpy = os.path.join(os.path.dirname(dest), "%s-%s.mpy" % (os.path.basename(dest), member.replace("/", "-")[:-3]))
        with open(mpy, "wb") as f:
            f.write(deploy.compile_mpy(src, member, [], os.path.dirname(dest)))
        extra.append((mpy, "lib/" + member[:-3] + ".mpy"))
    footprint.tree(dest, profile or "mqtt311", app, 4, host, port, extra=extra)
    with open(os.path.join(dest, "config.py"), "a") as f:
        f.write("PERIOD_MS = %d\nMEASURE = 0\n" % PERIOD_MS)
        if buffers:
            f.write("SESSION = %r\n" % buffers)
    return dest


def run(exe, dest, heapsize, broker, measure=False, timeout=60, out=None):
    """One run of the tree's main.py: its RESULT (a dict) if it ran to the end, else None (its output goes
    into the list `out`). The broker is restarted when the program says RESTART."""
    out = [] if out is None else out
    env = {"MICROPYPATH": ":".join([".frozen", os.path.join(dest, "lib"), dest]), "PATH": os.environ.get("PATH", "")}
    if measure:
        with open(os.path.join(dest, "config.py"), "a") as f:
            f.write("MEASURE = 1\n")
    try:
        p = subprocess.Popen([exe, "-X", "heapsize=%d" % heapsize, "main.py"], cwd=dest, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        # Lines come through a thread: select() on the pipe beside a buffered readline() would miss a line that
        # arrived in the same read as the one before (RESTART right after READY: the run then waits for ever).
        lines = queue.Queue()
        threading.Thread(target=_lines, args=(p.stdout, lines), daemon=True).start()
        deadline, result = time.monotonic() + timeout, None
        while True:
            try:
                line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
            if line is None:
                break
            out.append(line.rstrip())
            if line.startswith("RESTART"):
                broker.restart()
            elif line.startswith("RESULT "):
                result = json.loads(line[7:])
        if p.poll() is None:
            p.kill()
        rc = p.wait()
    finally:
        if measure:
            with open(os.path.join(dest, "config.py"), "a") as f:
                f.write("MEASURE = 0\n")
    return result if rc == 0 else None


def _lines(stream, into):
    for line in stream:
        into.put(line)
    into.put(None)


def smallest(exe, dest, connected, step=1024, timeout=60):
    """The smallest -X heapsize (to `step` bytes) with which the program runs to its end, by bisection between
    the connected heap (less cannot work) and a heap that works; None if 1 MB does not. Each run has its own
    broker, restarted in the middle."""
    broker = BenchBroker().start()
    _retarget(dest, broker)
    try:
        lo, hi = connected // step * step, max(64 * 1024, 4 * connected) // step * step
        while run(exe, dest, hi, broker, timeout=timeout) is None:
            lo, hi = hi, hi * 2
            if hi > 1024 * 1024:
                return None
        while hi - lo > step:
            mid = (lo + hi) // 2 // step * step
            if run(exe, dest, mid, broker, timeout=timeout) is not None:
                hi = mid
            else:
                lo = mid
        return hi
    finally:
        broker.close()


def _retarget(dest, broker):
    with open(os.path.join(dest, "config.py"), "a") as f:
        f.write("BROKER_HOST = %r\nBROKER_PORT = %d\n" % (broker.host, broker.port))


def measure(quick=False, log=print, workers=2):
    """{"rows": [{client, build, mpy, connected, pub q0, pub q1, rx q1, smallest, ...}], "builds": {...}}"""
    exes = {"64-bit": footprint.micropython()}
    try:
        exes["32-bit"] = mp32.port() or mp32.build(log)
    except (mp32.Missing, RuntimeError) as e:
        log("realistic: no 32-bit port (%s): its rows are left out" % e)
    res = {"rows": [], "builds": {}, "period_ms": PERIOD_MS}
    for b, exe in exes.items():
        if exe:
            res["builds"][b] = subprocess.run([exe, "-c", "import sys; print(sys.version.split('; ')[-1])"],
                                              capture_output=True, text=True).stdout.strip()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="tinymqtt-real-") as tmp:
        got = peers(tmp, log)
        broker = BenchBroker().start()
        jobs = []
        try:
            for client, profile, app, buffers in ROWS:
                if profile is None and app not in got:
                    continue
                label, files = (client, []) if profile else got[app]
                name = "%s-%s%s" % (app[5:-3], profile or "peer", "-small" if buffers else "")
                dest = make_tree(os.path.join(tmp, name), profile, app, buffers, broker.host, broker.port, files)
                if profile:
                    mpy = sum(footprint.size.profile_sizes("esp32", profile).get(m, 0)
                              for m in footprint._loaded(profile, "aio" if "aio" in app else "blocking", 4))
                else:
                    esp = boards_mod.get("esp32").mpy_cross
                    mpy = sum(len(deploy.compile_mpy(src, member, esp, tmp)) for src, member in files)
                for build in BUILDS:
                    exe, tree = exes.get(build.split()[0]), dest
                    if build.endswith("frozen"):
                        if not profile or not exe:
                            continue
                        exe, tree = mp32.frozen(profile, log), footprint.frozen_tree(dest)
                    if not exe:
                        continue
                    row = {"client": label, "profile": profile or "-", "build": build,
                           "mpy": None if build.endswith("frozen") else mpy}
                    t = time.monotonic()
                    out = []
                    r = run(exe, tree, 1024 * 1024, broker, measure=True, out=out)
                    row["seconds"] = round(time.monotonic() - t, 1)
                    if r is None:
                        log("realistic: %s (%s) did not run to the end on %s within 60 s; its output:\n%s"
                            % (label, row["profile"], build, "\n".join(out[-30:])))
                    row.update(r or {})
                    log("realistic: %r" % row)
                    res["rows"].append(row)
                    if r and not quick:  # a copy: each bisection points its tree at a broker of its own
                        jobs.append((row, exe, shutil.copytree(tree, tree + "-" + build.replace(" ", "-"))))
        finally:
            broker.close()
        with concurrent.futures.ThreadPoolExecutor(workers) as pool:  # each bisection has its own broker
            futures = {pool.submit(smallest, exe, tree, row["connected"], timeout=3 * row["seconds"] + 15): row
                       for row, exe, tree in jobs}
            for f in concurrent.futures.as_completed(futures):
                row = futures[f]
                row["smallest"] = f.result()
                log("realistic: smallest heap, %s (%s), %s: %s" % (row["client"], row["profile"], row["build"],
                                                                    row["smallest"]))
    res["seconds"] = round(time.monotonic() - started)
    return res


def kb(n):
    return "-" if n is None else "%.1f" % (n / 1024)


def table(res):
    lines = ["| client | profile | build | `.mpy` (esp32, KB) | heap connected (KB) | smallest heap (KB) | "
             "B per publish QoS 0 / 1 | B per QoS 1 round trip (publish + its echo received) | B per received "
             "QoS 1 (round trip - publish) | run (s) |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in res["rows"]:
        rx = r.get("rx q1")
        lines.append("| %s | %s | %s | %s | %s | %s | %s / %s | %s | %s | %s |" % (
            r["client"], r["profile"], r["build"], kb(r.get("mpy")), kb(r.get("connected")), kb(r.get("smallest")),
            r.get("pub q0", "-"), r.get("pub q1", "-"), "-" if rx is None else rx + r["pub q1"],
            "-" if rx is None else rx if rx >= 0 else "n/a", r.get("seconds", "-")))
    lines += ["", "Builds: %s." % "; ".join("%s: %s" % kv for kv in res["builds"].items()),
              "The program (tools/bench/fp/real_*.py, MQTT 3.1.1): connect with a will, subscribe with a callback "
              "to its own readings, publish a QoS 1 reading every %d ms; once one came back the bench restarts "
              "mosquitto (it forgets the session); the run ends when the client has connected again and two "
              "more readings came back. Heap connected: after connect + subscribe and gc.collect(), from before "
              "the client's import. Bytes per message: gc.mem_alloc() over 20 at steady state, after the run "
              "(received: a publish to its own subscription until it returns, less the publish; n/a where the "
              "client allocates with time rather than per message, as mqtt_as's tasks do while they poll: every "
              "5 ms, and every 100 ms for a PUBACK). Smallest heap: "
              "the least -X heapsize (1 KB steps) with which the whole program runs, restart included. The "
              "frozen rows: tinymqtt and ports/linux frozen into the 32-bit firmware through manifest.py "
              "(tools/mp32.py); small buffers: %r." % (res["period_ms"], SMALL)]
    return "\n".join(lines)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    res = measure("--quick" in argv)
    print(table(res))
    print("\nrealistic: %d s" % res["seconds"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
