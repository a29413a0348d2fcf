# The MicroPython row: the same measurements on real MicroPython, in the same run. Throughput on the unix port
# (its publishers are tools/bench/mp_workers.py, driven by throughput.py like the CPython ones); heap bytes
# per publish / per received message through each public API on the 32-bit WebAssembly build and the 64-bit
# unix port (tinymqtt: the heap apps of tests/sim_apps/; umqtt.simple: mp_workers.py's alloc mode); the peers'
# .mpy sizes compiled here. umqtt.simple comes from PyPI (micropython-umqtt.simple): its sdist has no setup.py,
# so pip cannot install it; pip's own finder and session fetch it into a cache folder instead.
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
CLIENTS = ("mp-raw", "mp-tinymqtt", "mp-tinymqtt-aio", "mp-tinymqtt-aio-nowait", "mp-umqtt", "mp-umqtt-nodelay")
LABELS = {"mp-raw": "ceiling (raw socket)", "mp-tinymqtt": "tinymqtt, blocking", "mp-tinymqtt-aio": "tinymqtt, asyncio",
          "mp-tinymqtt-aio-nowait": "tinymqtt, asyncio publish_nowait + flush",
          "mp-umqtt": "umqtt.simple", "mp-umqtt-nodelay": "umqtt.simple + TCP_NODELAY"}
# (n, cap) at QoS 1/2. umqtt.simple waits for each PUBACK inside publish(), and Nagle delays those; and it
# never wraps its packet id, so message 65,536 carries id 0 and mosquitto closes the connection (measured
# with 1.3.4): one connection sends at most 65,535 QoS 1 messages.
SLOW = {"mp-umqtt": (20, 5), "mp-umqtt-nodelay": (65535, 20)}


def available():
    return os.path.exists(MICROPYTHON)


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


PEER_PATH = []  # folders with more peers' modules (mqtt_as and its stand-ins: tools/bench/realistic.py)


def command(client, args, umqtt_dir=None):
    """(argv, env) of a MicroPython publisher: the library from lib/ with the Linux port, umqtt.simple from
    the cache. MICROPYPATH keeps .frozen, where the unix port's asyncio lives. A client mp32-NAME is mp-NAME on
    the 32-bit unix port (tools/mp32.py)."""
    exe = MICROPYTHON
    if client.startswith("mp32-"):
        from tools import mp32
        exe, client = mp32.port(), "mp-" + client[len("mp32-"):]
    path = [".frozen", os.path.join(ROOT, "lib"), os.path.join(ROOT, "ports", "linux")]
    path += ([umqtt_dir] if umqtt_dir else []) + PEER_PATH
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


def alloc(broker, umqtt_dir, n, log=print):
    """{"API (bits)": {"pub q0": B, ..., "rx q0": B, ...}} through each public API against `broker`."""
    out = {}
    env = {"WARMUP": 20, "N": n}
    for board, bits in (("sim", "32-bit"), ("unix", "64-bit")):
        if board == "unix" and not available():
            continue
        r = _app("heap_blocking.py", board, broker, dict(env, PREFIX="bench/hb%s/" % board))
        d = out["tinymqtt blocking (%s)" % bits] = {}
        for q in range(3):
            d["pub q%d" % q] = r["v5 q%d publish" % q][0]
            d["rx q%d" % q] = r["v5 q%d receive" % q]
        r = _app("heap_aio.py", board, broker, dict(env, PREFIX="bench/ha%s/" % board))
        out["tinymqtt publish_nowait (%s)" % bits] = {
            "pub q%d" % q: 0 if r["q%d publish_nowait locked" % q] else None for q in range(3)}
        d = out["tinymqtt await publish / async for (%s)" % bits] = {}
        for q in range(3):
            d["pub q%d" % q] = r["q%d await publish" % q]
            d["rx q%d" % q] = r["q%d publish_nowait + async for" % q]
    if umqtt_dir and available():
        argv, penv = command("mp-umqtt-nodelay", ["alloc", 1, n, broker.port, 30, 1, 64, "bench/umqtt"], umqtt_dir)
        p = subprocess.run(argv, env=penv, capture_output=True, text=True, timeout=120)
        res = [json.loads(x[7:]) for x in p.stdout.splitlines() if x.startswith("RESULT ")]
        if p.returncode or not res:
            log("bench: umqtt.simple alloc run failed: %s %s" % (p.stdout[-1000:], p.stderr[-1000:]))
        else:
            out["umqtt.simple (64-bit)"] = {k: v for k, v in res[0].items() if k != "received"}
    return out


def peer_sizes(python, umqtt_dir, log=print):
    """{"umqtt.simple X": bytes, ...}: the peers' .mpy, compiled here like our modules (portable bytecode)."""
    from tools.bench.mp import compile_mpy
    out = {}
    if umqtt_dir:
        out["umqtt.simple"] = len(compile_mpy(os.path.join(umqtt_dir, "umqtt", "simple.py"), name="umqtt/simple.py"))
    p = subprocess.run([python, "-c", "import adafruit_minimqtt.adafruit_minimqtt as m; print(m.__file__)"],
                       capture_output=True, text=True)
    if p.returncode == 0:
        path = p.stdout.strip()
        out["Adafruit MiniMQTT"] = len(compile_mpy(path, name="adafruit_minimqtt.py"))
    return out
