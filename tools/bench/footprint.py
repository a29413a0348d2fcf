# What each profile costs a board, measured on real MicroPython in one run: .mpy bytes as deploy writes them
# for the esp32 board (tools.size); heap after import and when connected on the 64-bit unix port (PyPI) and the
# 32-bit unix port (tools/mp32.py, built from ../shared/micropython: the boards' 31-bit small ints), both with
# real sockets against a real mosquitto, and on the WebAssembly build (32-bit, no sockets: a link scripted
# inside the interpreter answers, fp/scripted_port.py); the smallest `-X heapsize` with which each unix port
# connects, subscribes, publishes and receives; the heap when the library runs from ROMFS (the image `deploy
# --romfs` writes, mounted by VfsRom: bytecode stays in the image, the heap keeps the objects), on both unix
# ports; and on the 32-bit firmware with the library frozen through manifest.py (tools/mp32.py). umqtt.simple
# (PyPI micropython-umqtt.simple via tools/bench/mp_unix.py) and PyPI's micropython-mqtt (mqtt_async, an mqtt_as
# derivative) go through the same steps on both unix ports, versions printed. tools/bench/realistic.py measures
# one realistic program per client, mqtt_as 0.8.3 and umqtt.simple 1.7.0 from the source tarballs included.
#   python -m tools.bench.footprint [--quick]     (make bench runs it as its "footprint" section)
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from tools import boards as boards_mod, deploy, mp32, size
from tools.bench import mp_unix
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
    """A copy of the tree for the WebAssembly build, which has no sockets: its tinymqtt_port is
    fp/scripted_port.py (a server scripted inside the interpreter, imported before the baseline, as a board's
    port: its .mpy is listed apart, port_mpy()); fp32.py is SCRIPT32 as a unix port runs it (tests/
    test_bench_smoke.py checks the scripted link with it)."""
    d32 = dest + "-u32"
    shutil.copytree(dest, d32)
    with open(os.path.join(d32, "lib", "tinymqtt_port.mpy"), "wb") as f:
        f.write(deploy.compile_mpy(os.path.join(FP, "scripted_port.py"), "tinymqtt_port.py", [], os.path.dirname(d32)))
    with open(os.path.join(d32, "fp32.py"), "w") as f:
        f.write(script32(app, version, opts, wasm=False))
    return d32


def frozen_tree(dest):
    """A copy of a tree without tinymqtt and its port, for the firmware that has them frozen (tools/mp32.py)."""
    out = dest + "-frozen"
    shutil.copytree(dest, out)
    lib = os.path.join(out, "lib")
    for name in os.listdir(lib):
        if name.startswith("tinymqtt"):
            path = os.path.join(lib, name)
            shutil.rmtree(path) if os.path.isdir(path) else os.remove(path)
    return out


def run_unix(dest, heapsize, timeout=60, main="main.py", path=None, exe=None):
    """{"import", "connected", "received"} from one run on the unix port (the 64-bit one, or exe: the 32-bit one
    or a firmware), or None when it failed. path: the folders on MICROPYPATH after .frozen (default: the tree's
    lib/ and the tree)."""
    path = path or [os.path.join(dest, "lib"), dest]
    env = {"MICROPYPATH": ":".join([".frozen"] + path), "PATH": os.environ.get("PATH", "")}
    try:
        p = subprocess.run([exe or micropython(), "-X", "heapsize=%d" % heapsize, main], cwd=dest, env=env,
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
    if os.path.exists(os.path.join(rom, "boot_romfs.py")):  # made for the other unix port already
        return rom
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


def run_unix_romfs(dest, heapsize=512 * 1024, exe=None, rom=None):
    """run_unix() with the tree's lib/ in a ROMFS image mounted by VfsRom (rom: romfs_tree(dest) if made
    already), or None."""
    rom = rom or romfs_tree(dest)
    return rom and run_unix(rom, heapsize, main="boot_romfs.py", path=[rom], exe=exe)  # only the image's lib/


def smallest_heap(dest, hi=512 * 1024, step=1024, exe=None):
    """The smallest -X heapsize (to `step` bytes) with which the app runs to the end; None if hi fails.
    Near the edge success is uneven (fragmentation: the asyncio row ran with 82,120 and 83,144 B but not with
    82,632), so the bisection lands within ~1.5 KB of it: differences smaller than that are noise."""
    if run_unix(dest, hi, exe=exe) is None:
        return None
    lo = 0  # a heap of lo bytes fails (or is untried), hi works
    while hi - lo > step:
        mid = (lo + hi) // 2 // step * step or step
        if run_unix(dest, mid, exe=exe) is not None:
            hi = mid
        else:
            lo = mid
    return hi


# The script for the WebAssembly build, which has no sockets (run in a tree32() tree: its scripted server
# answers): heap after import and when connected, then subscribe + publish + receive one message, after the
# last collection (so a heap the collector damaged shows as a failed run). That build frees garbage only once
# Python has returned to JS: it awaits (SETTLE) before each gc.collect(); every gc.collect() runs at module
# level and the deep calls are in functions that return before the next one.
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
    u32, u32_s = port32(log), 0.0
    broker = BenchBroker().start()
    try:
        with tempfile.TemporaryDirectory(prefix="tinymqtt-fp-") as tmp:
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
                    row.update(measure_u32(dest, u32, quick, profile))
                    if not row["u32"] or not row["u32_romfs"] or not row["frozen"]:
                        log("footprint: a 32-bit unix port run failed: its figures are left out")
                    u32_s += time.monotonic() - t
                log("footprint: %s (%s): %r" % (label, profile, row))
                res["rows"].append(row)
            for row in peer_rows(tmp, broker, quick, log, u32):
                log("footprint: %s: %r" % (row["client"], row))
                res["rows"].append(row)
            res["parts"] = heap_parts(tmp, log)
    finally:
        broker.close()
    if u32:
        res["u32"] = subprocess.run([u32, "-c", "import sys; print(sys.version.split('; ')[-1])"],
                                    capture_output=True, text=True).stdout.strip()
        log("footprint: the 32-bit unix port rows took %.1f s" % u32_s)
    return res


def port32(log=print):
    """The 32-bit unix port (tools/mp32.py builds it once; the bootstrap does), or None after a line saying why."""
    try:
        return mp32.port() or mp32.build(log)
    except (mp32.Missing, RuntimeError) as e:
        log("footprint: no 32-bit unix port (%s): its rows are left out" % e)
        return None


def heap_parts(tmp, log=print):
    """tools/bench/heap_parts.py's rows (where the 32-bit heap from .mpy goes), or None without node."""
    from tools.bench import heap_parts as parts
    if not wasm_available():
        return None
    rows = [parts.measure(row, os.path.join(tmp, "parts")) for row in ROWS if "3.1.1" not in row[0]]
    for r in rows:
        log("footprint: heap parts: %r" % r)
    return rows


def measure_u32(dest, exe, quick=False, profile=None):
    """The tree on the 32-bit unix port (exe): heap after import and connected from .mpy ("u32") and from ROMFS
    ("u32_romfs"), its smallest heap (not in a quick run); for a tinymqtt row (profile) the same on the firmware
    with that profile frozen ("frozen", "frozen_smallest")."""
    out = {"u32": run_unix(dest, 512 * 1024, exe=exe), "u32_romfs": run_unix_romfs(dest, exe=exe)}
    out["u32_smallest"] = None if quick or not out["u32"] else smallest_heap(dest, exe=exe)
    if profile:
        fw, frozen = mp32.frozen(profile), frozen_tree(dest)
        out["frozen"] = run_unix(frozen, 512 * 1024, exe=fw)
        out["frozen_smallest"] = None if quick or not out["frozen"] else smallest_heap(frozen, exe=fw)
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
NO_MQTT_AS = ("mqtt_as (Peter Hinch's) is shipped by no package on PyPI or npm: it has no row here; "
              "tools/bench/realistic.py measures it from its source tarball (../shared/peers).")


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
        if u32:
            row.update(measure_u32(dest, u32, quick))
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
             "32 / 64-bit (KB) | smallest heap 32 / 64-bit (KB) | from ROMFS, 32 / 64-bit: heap after import / "
             "connected (KB) | frozen, 32-bit: heap after import / connected / smallest heap (KB) | WebAssembly "
             "build, scripted link: heap after import / connected (KB) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in res["rows"]:
        u, w, rom = r["unix"] or {}, r["wasm"] or {}, r.get("romfs") or {}
        u32, rom32, fz = r.get("u32") or {}, r.get("u32_romfs") or {}, r.get("frozen") or {}
        lines.append("| %s | %s | %s | %s / %s | %s / %s | %s / %s | %s / %s, %s / %s | %s | %s / %s |" % (
            r["client"], r["profile"], kb(r["mpy"]), kb(u32.get("import")), kb(u.get("import")),
            kb(u32.get("connected")), kb(u.get("connected")), kb(r.get("u32_smallest")), kb(r["smallest"]),
            kb(rom32.get("import")), kb(rom32.get("connected")), kb(rom.get("import")), kb(rom.get("connected")),
            "-" if "frozen" not in r else "%s / %s / %s" % (kb(fz.get("import")), kb(fz.get("connected")),
                                                             kb(r.get("frozen_smallest"))),
            kb(w.get("import")), kb(w.get("connected"))))
    lines += ["", "32-bit: %s (tools/mp32.py: -m32, real socket and select, no TLS); 64-bit: %s. Frozen: "
              "tinymqtt and ports/linux frozen into that 32-bit firmware through manifest.py, as a board user "
              "includes it; the tree keeps only the app and config.py." % (res.get("u32", "not built"),
                                                                          res.get("micropython", "?")),
              "", NO_MQTT_AS]
    port = res.get("port_mpy")
    if port:
        lines.append("")
        lines.append("The WebAssembly rows use a scripted link as their port, the unix ports' rows ports/linux; a "
                     "real esp32 loads its own: %s (.mpy, KB)."
                     % ", ".join("%s %s" % (m[:-3], kb(n)) for m, n in sorted(port.items())))
    lines += ["", "The WebAssembly build's figures (npm, MicroPython 1.27, no sockets): it frees garbage once Python returns to JS, so the script awaits before each gc.collect(), and imports "
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
    return "\n".join(lines)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    res = measure("--quick" in argv)
    print(table(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
