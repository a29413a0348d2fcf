# Section 3 (and MicroPython's half of 5): .mpy sizes from mpy-cross 1.27, and what the library costs under
# the real MicroPython 1.27 (WebAssembly build on Node): heap bytes per publish / per received message at
# steady state, the heap of a connected client with each board's buffers, codec speed. The library is
# imported from .mpy files, as tools/deploy puts it on a board.
import json
import os
import re
import shutil
import subprocess
import tempfile

from tools.bench.workers import ROOT

LIB = os.path.join(ROOT, "lib", "tinymqtt")
HOST = os.path.join(ROOT, "host", "tinymqtt_cli")  # (the codec's server half: cycles.py's CONNACK)
MP_RUN = os.path.join(ROOT, "tests", "support", "mp_run.mjs")
MP_PACKAGE = os.path.join(ROOT, "node_modules", "@micropython", "micropython-webassembly-pyscript")
# The brief's definition of the full client: the codec, the session and one driver (see full_client()).
CORE = ("errors", "wire", "props", "packets", "topic", "inflight", "aliases", "session", "session5")
V5_ONLY = ("session5", "props", "aliases", "reasons")  # modules a 3.1.1 client never imports


def mpy_cross():
    from tools.deploy import mpy_cross_command
    return mpy_cross_command()


def mpy_version():
    p = subprocess.run(mpy_cross() + ["--version"], capture_output=True, text=True)
    return (p.stdout or p.stderr).strip()


def compile_mpy(path, flags=(), name=None):
    with tempfile.TemporaryDirectory(prefix="tinymqtt-bench-") as tmp:
        out = os.path.join(tmp, "out.mpy")
        p = subprocess.run(mpy_cross() + list(flags) + ["-s", name or os.path.basename(path), "-o", out, path],
                           capture_output=True, text=True)
        if p.returncode:
            raise RuntimeError("mpy-cross failed on %s: %s" % (path, p.stderr or p.stdout))
        with open(out, "rb") as f:
            return f.read()


def modules():
    return sorted(f[:-3] for f in os.listdir(LIB) if f.endswith(".py"))


def top_level_imports(mod):
    """The tinymqtt modules `mod` imports when it is imported (column-0 imports; lazy ones inside functions,
    like errors.py's optional reasons table, do not count)."""
    with open(os.path.join(LIB, mod + ".py")) as f:
        src = f.read()
    found = set()
    for m in re.finditer(r"^(?:from tinymqtt\.(\w+) import|from tinymqtt import ([\w, ]+)|import tinymqtt\.(\w+))",
                         src, re.M):
        if m.group(1):
            found.add(m.group(1))
        elif m.group(2):
            found.update(x.strip().split(" as ")[0] for x in m.group(2).split(","))
        else:
            found.add(m.group(3))
    return found


def closure(start):
    todo, seen = list(start), set()
    while todo:
        m = todo.pop()
        if m in seen or not os.path.exists(os.path.join(LIB, m + ".py")):
            continue
        seen.add(m)
        todo += top_level_imports(m)
    return seen


def sizes(boards=None):
    """{"modules": {name: bytes}, "sets": [(label, [modules], bytes)], "boards": {name: {...}}} from mpy-cross
    with portable bytecode (no -march); board sets use the board's flags and include its port modules."""
    per = {m: len(compile_mpy(os.path.join(LIB, m + ".py"), name="tinymqtt/%s.py" % m)) for m in modules()}
    sets = []
    for driver in ("client", "aio"):
        mods = sorted(closure([driver]) | set(CORE) | {driver})
        sets.append(("full client, %s" % ("blocking" if driver == "client" else "asyncio"), mods,
                     sum(per[m] for m in mods)))
    core = sorted(closure(["session"]) | set(CORE))
    sets.append(("core (session, session5 + codec)", core, sum(per[m] for m in core)))
    no_v5 = [m for m in core if m not in V5_ONLY]
    sets.append(("3.1.1 core (what profile mqtt311 loads besides driver and client)", no_v5,
                 sum(per[m] for m in no_v5)))
    out = {"modules": per, "sets": sets, "boards": {}}
    from tools.deploy import library_mpy  # (deploy is imported only when boards are measured)
    for name, b in (boards or {}).items():
        files = [(os.path.join(ROOT, "lib", m), m) for m in b.lib]
        files.append((os.path.join(ROOT, b.port_module), "tinymqtt_port.py"))
        files += [(os.path.join(ROOT, p), os.path.basename(p)) for p in b.support]
        lib = port = 0
        with tempfile.TemporaryDirectory(prefix="tinymqtt-bench-size-") as tmp:
            for path, dest in files:
                if dest.startswith("tinymqtt/"):  # as deploy compiles it (short error text, -O3 where asked)
                    lib += len(library_mpy(b, path, dest, tmp))
                else:
                    port += len(compile_mpy(path, b.mpy_cross, dest))
        out["boards"][name] = {"flags": " ".join(b.mpy_cross) or "portable", "lib": lib, "port": port,
                               "files": len(files), "heap_budget": b.heap_budget}
    return out


def available():
    return shutil.which("node") is not None and os.path.isdir(MP_PACKAGE)


def run(parts, iterations, boards=None, timeout=300):
    """Runs mp_script.py under MicroPython with lib/tinymqtt compiled to .mpy; returns {key: value}."""
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "mp_script.py")) as f:
        script = f.read()
    board_opts = {n: b.session_options() for n, b in (boards or {}).items() if n != "linux"}
    settings = "ITER = %d\nBOARDS = %r\nPARTS = %r\n" % (iterations, board_opts, list(parts))
    with tempfile.TemporaryDirectory(prefix="tinymqtt-bench-mp-") as root:
        lib = os.path.join(root, "lib", "tinymqtt")
        os.makedirs(lib)
        for m in modules():
            with open(os.path.join(lib, m + ".mpy"), "wb") as f:
                f.write(compile_mpy(os.path.join(LIB, m + ".py"), name="tinymqtt/%s.py" % m))
        host = os.path.join(root, "lib", "tinymqtt_cli")  # the codec's server half, for cycles.py's CONNACK
        os.makedirs(host)
        for m in ("__init__", "server_codec"):
            with open(os.path.join(host, m + ".mpy"), "wb") as f:
                f.write(compile_mpy(os.path.join(HOST, m + ".py"), name="tinymqtt_cli/%s.py" % m))
        shutil.copy(os.path.join(os.path.dirname(os.path.abspath(__file__)), "cycles.py"),
                    os.path.join(root, "lib", "benchcycles.py"))
        p = subprocess.run(["node", MP_RUN, "--root", root], input=settings + script, capture_output=True,
                           text=True, timeout=timeout, cwd=ROOT)
    res = {}
    for line in p.stdout.splitlines():
        if line.startswith("BENCH "):
            d = json.loads(line[6:])
            res[d["k"]] = d["v"]
    if p.returncode or "done" not in res:
        raise RuntimeError("MicroPython run failed (exit %s)\n%s\n%s" % (p.returncode, p.stdout[-3000:],
                                                                        p.stderr[-3000:]))
    return res
