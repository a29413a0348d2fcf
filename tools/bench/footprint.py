# What each profile costs a board, measured on real MicroPython in one run: .mpy bytes as deploy writes them
# for the esp32 board (tools.size); heap after import and when connected on the 32-bit WebAssembly build (a
# transport that only answers the CONNACK: it has no sockets) and on the 64-bit unix port (real sockets,
# real mosquitto); and the smallest `-X heapsize` with which the unix port connects, subscribes, publishes
# and receives; and the heap when the library and port run from ROMFS (the image `deploy --romfs` writes,
# mounted by the unix port's VfsRom: bytecode stays in the image, the heap keeps the objects). umqtt.simple
# (PyPI micropython-umqtt.simple via tools/bench/mp_unix.py) and PyPI's micropython-mqtt (mqtt_async, an
# mqtt_as derivative) go through the same steps on the unix port, versions printed; mqtt_as itself is on no
# registry this machine reaches, and the bench says so.
#   python -m tools.bench.footprint [--quick]     (make bench runs it as its "footprint" section)
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile

from tools import boards as boards_mod, deploy, size
from tools.bench import mp_unix
from tools.bench.broker import BenchBroker

ROOT = boards_mod.REPO
FP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fp")
MP_RUN = os.path.join(ROOT, "tests", "support", "mp_run.mjs")
# (label, profile, app, MQTT version): the clients of the closing table
ROWS = (("tinymqtt blocking", "mqtt311", "fp_blocking.py", 4),
        ("tinymqtt blocking", "full", "fp_blocking.py", 5),
        ("tinymqtt asyncio", "full", "fp_aio.py", 5))


def micropython():
    for exe in (os.path.join(os.path.dirname(sys.executable), "micropython"), shutil.which("micropython"),
                os.path.join(ROOT, ".venv", "bin", "micropython")):
        if exe and os.access(exe, os.X_OK):
            return exe
    return None


def tree(dest, profile, app, version, host="127.0.0.1", port=1883, extra=()):
    """The linux board's tree for profile (what deploy --target writes: portable bytecode), with the esp32's
    short error text."""
    esp = boards_mod.get("esp32", profile=profile)
    board = dataclasses.replace(boards_mod.get("linux", profile=profile), short_errors=esp.short_errors)
    values = deploy.config_values(board, host, port, client_id="fp-%s-%s-%d" % (profile, app[3:-3], os.getpid()))
    values["SESSION"] = deploy.session_for(esp)  # the esp32 buffers, as the table asks
    values["VERSION"] = version
    with open(os.devnull, "w") as quiet:
        deploy.write_target(deploy.build(board, os.path.join(FP, app), values, extra_files=extra), dest, quiet)
    return dest


def run_unix(dest, heapsize, timeout=60, main="main.py", path=None):
    """{"import", "connected", "received"} from one run on the unix port, or None when it failed. path: the
    folders on MICROPYPATH after .frozen (default: the tree's lib/ and the tree)."""
    path = path or [os.path.join(dest, "lib"), dest]
    env = {"MICROPYPATH": ":".join([".frozen"] + path), "PATH": os.environ.get("PATH", "")}
    try:
        p = subprocess.run([micropython(), "-X", "heapsize=%d" % heapsize, main], cwd=dest, env=env,
                           capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None
    for line in p.stdout.splitlines():
        if line.startswith("FOOTPRINT "):
            r = json.loads(line[10:])
            return r if p.returncode == 0 and r["received"] else None
    return None


ROMFS_BOOT = '''import sys, vfs
f = open("romfs.img", "rb")
img = f.read()  # the image stands in for flash: it is on the heap before the app's baseline
f.close()
vfs.mount(vfs.VfsRom(img), "/rom")
sys.path.insert(0, "/rom/lib")
import main
'''


def run_unix_romfs(dest, heapsize=512 * 1024):
    """run_unix() with the tree's lib/ in a ROMFS image (mpremote romfs build) mounted by VfsRom, or None."""
    mpremote = os.path.join(os.path.dirname(micropython()), "mpremote")
    src, rom = dest + "-romsrc", dest + "-rom"
    shutil.copytree(os.path.join(dest, "lib"), os.path.join(src, "lib"))
    shutil.copytree(dest, rom, ignore=lambda d, names: ["lib"] if d == dest else [])  # the image holds lib/
    img = os.path.join(rom, "romfs.img")
    p = subprocess.run([mpremote, "romfs", "--no-mpy", "-o", img, "build", src], capture_output=True, text=True,
                       timeout=60)
    if p.returncode or not os.path.exists(img):
        return None
    with open(os.path.join(rom, "boot_romfs.py"), "w") as f:
        f.write(ROMFS_BOOT)
    return run_unix(rom, heapsize, main="boot_romfs.py", path=[rom])  # no lib/ on the path: only the image


def smallest_heap(dest, hi=512 * 1024, step=1024):
    """The smallest -X heapsize (to `step` bytes) with which the app runs to the end; None if hi fails.
    Near the edge success is uneven (fragmentation: the asyncio row ran with 82,120 and 83,144 B but not with
    82,632), so the bisection lands within ~1.5 KB of it: differences smaller than that are noise."""
    if run_unix(dest, hi) is None:
        return None
    lo = 0  # a heap of lo bytes fails (or is untried), hi works
    while hi - lo > step:
        mid = (lo + hi) // 2 // step * step or step
        if run_unix(dest, mid) is not None:
            hi = mid
        else:
            lo = mid
    return hi


WASM = '''import gc, time, asyncio
await asyncio.sleep_ms(1)  # (this build frees garbage only once Python has returned to JS)
gc.collect()
BASE = gc.mem_alloc()
from tinymqtt.%(module)s import %(cls)s
await asyncio.sleep_ms(1)
gc.collect()
imported = gc.mem_alloc() - BASE
CONNACK = b"\\x20\\x03\\x00\\x00\\x00" if %(version)d == 5 else b"\\x20\\x02\\x00\\x00"
class Link:  # answers the CONNACK, swallows what the client writes: this build has no sockets
    def __init__(self):
        self.connack = CONNACK
    def write(self, buf, n):
        pass
    def readinto(self, buf, off, timeout_ms=0):
        c, self.connack = self.connack, None
        if c is None:
            return 0
        buf[off:off + len(c)] = c
        return len(c)
    def close(self):
        pass
class Stream(Link):
    async def readinto(self, buf, off):
        n = Link.readinto(self, buf, off)
        while not n:
            await asyncio.sleep_ms(1000)
        return n
    async def drain(self):
        pass
class Port:
    def network_up(self, timeout_ms=0):
        return True
    def open(self, host, port, tls=None):
        return Link()
    async def open_stream(self, host, port, tls=None):
        return Stream()
    def ticks_ms(self):
        return time.ticks_ms()
import asyncio
async def main():
    await asyncio.sleep_ms(1)  # (settle again: garbage left from before main() is freed now, not counted)
    gc.collect()
    c = %(cls)s("b", 1883, port_impl=Port(), reconnect=False, client_id="fp", version=%(version)d, **%(opts)r)
    r = c.connect()
    if r is not None and hasattr(r, "send"):
        await r
    await asyncio.sleep_ms(1)
    gc.collect()
    print("FOOTPRINT {\\"import\\": %%d, \\"connected\\": %%d, \\"received\\": 0}" %% (imported, gc.mem_alloc() - BASE))
await asyncio.create_task(main())
'''


def run_wasm(dest, app, version, opts, runs=1):
    """Heap after import and when connected on the 32-bit WebAssembly build (the least of runs), or None."""
    if not shutil.which("node") or not os.path.isdir(os.path.join(ROOT, "node_modules", "@micropython")):
        return None
    module, cls = ("aio", "AsyncClient") if "aio" in app else ("client", "Client")
    code = WASM % {"module": module, "cls": cls, "version": version, "opts": opts}
    best = None
    for _ in range(runs):
        p = subprocess.run(["node", MP_RUN, "--root", dest], input=code, capture_output=True, text=True,
                           timeout=120, cwd=ROOT)
        for line in p.stdout.splitlines():
            if line.startswith("FOOTPRINT "):
                got = json.loads(line[10:])
                best = got if best is None else {k: min(v, got.get(k, v)) for k, v in best.items()}
    return best


# The same tree reads either of two values in this build, ~4 KB apart (e.g. 38.9 or 42.8 KB connected, full
# blocking), about one run in three: memory the conservative collector still finds referenced. The least of a
# few runs is the live heap.
WASM_RUNS = 3


def measure(quick=False, log=print):
    res = {"rows": [], "mpy": {}, "port_mpy": port_mpy()}
    for profile in boards_mod.profiles():
        res["mpy"][profile] = size.profile_sizes("esp32", profile)
    if not micropython():
        log("footprint: no unix-port micropython (pip install -r requirements-test.txt): heap figures left out")
        return res
    res["micropython"] = subprocess.run([micropython(), "-c", "import sys; print(sys.version)"],
                                        capture_output=True, text=True).stdout.strip()
    broker = BenchBroker().start()
    try:
        with tempfile.TemporaryDirectory(prefix="tinymqtt-fp-") as tmp:
            for label, profile, app, version in ROWS:
                dest = tree(os.path.join(tmp, "%s-%s" % (profile, app[:-3])), profile, app, version, broker.host,
                            broker.port)
                opts = deploy.session_for(boards_mod.get("esp32", profile=profile))
                row = {"client": label, "profile": profile, "version": version,
                       "mpy": sum(n for m, n in res["mpy"][profile].items() if m in _loaded(profile, app)),
                       "unix": run_unix(dest, 512 * 1024),
                       "wasm": run_wasm(dest, app, version, opts, 1 if quick else WASM_RUNS),
                       "romfs": run_unix_romfs(dest)}
                row["smallest"] = None if quick or not row["unix"] else smallest_heap(dest)
                log("footprint: %s (%s): %r" % (label, profile, row))
                res["rows"].append(row)
            for row in peer_rows(tmp, broker, quick, log):
                log("footprint: %s: %r" % (row["client"], row))
                res["rows"].append(row)
    finally:
        broker.close()
    return res


# The peers, from PyPI (cached under out/bench-cache; a --quick run never fetches): (label, how to get it,
# its module file in the cache folder, the name it is imported by, the footprint app, what else the app needs).
# micropython-mqtt is mqtt_async.py (Thorsten von Eicken's asyncio client derived from Peter Hinch's mqtt_as);
# it imports `network` and `machine`, which the unix port lacks: fp/network.py and tests/fakes/machine.py.
PEERS = (("umqtt.simple", lambda log, fetch: mp_unix.umqtt(log, fetch), "umqtt/simple.py", "fp_umqtt.py", ()),
         ("micropython-mqtt (mqtt_async)",
          lambda log, fetch: mp_unix.pypi_file("micropython-mqtt", "mqtt_async.py", "micropython-mqtt", log, fetch),
          "mqtt_async.py", "fp_mqtt_async.py",
          ((os.path.join(FP, "network.py"), "lib/network.py"),
           (os.path.join(ROOT, "tests", "fakes", "machine.py"), "lib/machine.py"))))
# Peter Hinch's mqtt_as itself is on no registry this machine reaches (PyPI: no mqtt_as / micropython-mqtt-as;
# npm: none; PyPI's MicroPython MQTT packages ship umqtt or mqtt_async instead): it has no row.
NO_MQTT_AS = "mqtt_as (Peter Hinch's) is shipped by no package on PyPI or npm: it has no row."


def peer_rows(tmp, broker, quick, log=print):
    """The peers' rows, measured as tinymqtt's: .mpy for the esp32, heap after import and connected on the
    unix port (portable .mpy in lib/, the broker on loopback), smallest heap (not in a quick run). A peer that
    cannot be had is left out with a line saying so."""
    rows = []
    for label, get, member, app, extra in PEERS:
        got = get(log, not quick)
        if not got:
            continue
        src, name = os.path.join(got[0], member), member[:-3].replace("/", "-")
        with open(os.path.join(tmp, name + ".mpy"), "wb") as f:  # portable bytecode, as deploy writes ours
            f.write(deploy.compile_mpy(src, member, [], tmp))
        dest = tree(os.path.join(tmp, name), "mqtt311", app, 4, broker.host, broker.port,
                    extra=[(f.name, "lib/" + member[:-3] + ".mpy")] + list(extra))
        row = {"client": "%s %s" % (label, got[1]), "profile": "-", "version": 4,
               "mpy": len(deploy.compile_mpy(src, member, boards_mod.get("esp32").mpy_cross, tmp)),
               "unix": run_unix(dest, 512 * 1024), "wasm": None}
        row["smallest"] = smallest_heap(dest) if row["unix"] and not quick else None
        if not row["unix"]:
            log("footprint: %s did not run on the unix port: its heap figures are left out" % row["client"])
        rows.append(row)
    return rows


def _loaded(profile, app):
    """The profile's files (as deploy writes them: a bundle is tinymqtt/__init__.py) an app of this kind imports
    (the other client's module is not loaded, unless it is in the bundle)."""
    p = boards_mod.profiles()[profile]
    skip = "tinymqtt/client.py" if "aio" in app else "tinymqtt/aio.py"
    return [m for m in p.lib if m != skip and m != "tinymqtt/reasons.py"  # reasons: only when an error is shown
            and m not in p.bundle]


def kb(n):
    return "-" if n is None else "%.1f" % (n / 1024)


def port_mpy(board_name="esp32"):
    """{module: .mpy bytes} of the board's port as deploy compiles it (the 32-bit heap rows use a stub port,
    so this is what a real board loads besides them; tinymqtt_tls / tinymqtt_stream only when used)."""
    board = boards_mod.get(board_name)
    out = {}
    with tempfile.TemporaryDirectory(prefix="tinymqtt-fp-port-") as tmp:
        for path in [board.port_module] + list(board.support):
            name = os.path.basename(path) if path in board.support else "tinymqtt_port.py"
            out[name] = len(deploy.compile_mpy(os.path.join(ROOT, path), name, board.mpy_cross, tmp))
    return out


def table(res):
    lines = ["| client | profile | `.mpy` loaded (esp32, KB) | heap after import 32 / 64-bit (KB) | heap connected "
             "32 / 64-bit (KB) | smallest heap, 64-bit unix port (KB) | from ROMFS, 64-bit: heap after import / "
             "connected (KB) |", "|---|---|---|---|---|---|---|"]
    for r in res["rows"]:
        u, w, rom = r["unix"] or {}, r["wasm"] or {}, r.get("romfs") or {}
        lines.append("| %s | %s | %s | %s / %s | %s / %s | %s | %s / %s |" % (
            r["client"], r["profile"], kb(r["mpy"]), kb(w.get("import")), kb(u.get("import")),
            kb(w.get("connected")), kb(u.get("connected")), kb(r["smallest"]), kb(rom.get("import")),
            kb(rom.get("connected"))))
    lines += ["", NO_MQTT_AS]
    port = res.get("port_mpy")
    if port:
        lines.append("")
        lines.append("The 32-bit heap rows use a stub transport; a real esp32 also loads its port: %s (.mpy, KB)."
                     % ", ".join("%s %s" % (m[:-3], kb(n)) for m, n in sorted(port.items())))
    lines += ["", "The 32-bit rows count live objects only: that build frees garbage once Python returns to JS, "
              "so the script awaits before each gc.collect(), and imports asyncio (which it needs for that) "
              "before its baseline: the asyncio module's own objects are not in the asyncio row. Each figure "
              "is the least of %d runs: about one run in three reads ~4 KB more (memory the conservative "
              "collector still finds referenced)." % WASM_RUNS]
    return "\n".join(lines)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    res = measure("--quick" in argv)
    print(table(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
