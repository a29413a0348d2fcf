# The device side of deploy: every board operation is one mpremote command run through `runner`, so tests
# hand in a fake runner (a callable) instead of a serial port. runner(args, follow=False) -> (exit code,
# output text); with follow=True the output goes straight to the terminal and "" comes back.
import json
import os
import re
import shutil
import subprocess
import sys

MANIFEST = ".tinymqtt.json"  # on the board: {path: [size, sha256]} of every file the last deploy wrote

# Runs on the board (and, in the tests, under CPython against a folder). ROOT is "" on a board; on the unix
# port (the linux board) it is the process's working directory, never the host's own /.
PROBE = '''ROOT = ""
import sys, os, json
ROOT = ROOT or os.getcwd().rstrip("/")
try:
    import hashlib, binascii
except ImportError:
    hashlib = None
def _hash(p):
    d = hashlib.sha256()
    with open(p, "rb") as f:
        while True:
            b = f.read(512)
            if not b:
                break
            d.update(b)
    return binascii.hexlify(d.digest()).decode()
r = {"version": list(sys.implementation.version[:3]), "name": sys.implementation.name,
     "platform": sys.platform, "files": {}, "manifest": {}}
s = os.statvfs(ROOT + "/")
r["block"], r["free"] = s[0], s[0] * s[4]
try:
    with open(ROOT + "/%(manifest)s") as f:
        r["manifest"] = json.load(f)
except (OSError, ValueError):
    pass
for p in %(paths)r + list(r["manifest"]):
    try:
        size = os.stat(ROOT + "/" + p)[6]
    except OSError:
        continue
    r["files"][p] = [size, _hash(ROOT + "/" + p) if hashlib else None]
print("TINYMQTT-PROBE " + json.dumps(r))
'''

# Removes files and makes folders (parents first); a folder that exists already is fine.
PREPARE = '''ROOT = ""
import os
ROOT = ROOT or os.getcwd().rstrip("/")
for p in %(remove)r:
    try:
        os.remove(ROOT + "/" + p)
    except OSError:
        pass
for d in %(dirs)r:
    try:
        os.mkdir(ROOT + "/" + d)
    except OSError:
        pass
print("TINYMQTT-READY")
'''


# Without a soft reset the modules of the last run stay imported: forget them, so the new files load.
RERUN = '''import sys
for m in list(sys.modules):
    del sys.modules[m]
import main
'''


class DeviceError(Exception):
    """A one-line reason the device step failed."""


def subprocess_runner(args, follow=False):
    """The real runner: the mpremote command line tool (pip install mpremote)."""
    exe = shutil.which("mpremote")
    beside = os.path.join(os.path.dirname(sys.executable), "mpremote")  # the venv's, when PATH lacks it
    if not exe and os.access(beside, os.X_OK):
        exe = beside
    if not exe:
        raise DeviceError("mpremote not found: pip install mpremote")
    if follow:
        return subprocess.call([exe] + list(args)), ""
    p = subprocess.run([exe] + list(args), capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


class Probe:
    def __init__(self, d):
        self.version = tuple(d["version"])
        self.name = d.get("name", "micropython")
        self.platform = d["platform"]
        self.files = {k: tuple(v) for k, v in d["files"].items()}  # path -> (size, sha256 or None)
        self.manifest = {k: tuple(v) for k, v in d.get("manifest", {}).items()}
        self.block = d.get("block") or 4096
        self.free = d["free"]

    def same(self, dest, size, sha):
        """Whether the board already holds exactly this file."""
        got = self.files.get(dest)
        if not got or got[0] != size:
            return False
        if got[1] is not None:  # the board hashed it
            return got[1] == sha
        return self.manifest.get(dest) == (size, sha)  # no hashlib there: trust what the last deploy wrote


class Mpremote:
    """reset=False: a device without a soft reset (MicroPython's unix port, the linux board): every command
    resumes the running session, and main.py runs again after its modules are forgotten."""

    def __init__(self, device=None, runner=None, reset=True):
        self.device = device
        self.runner = runner or subprocess_runner
        self.reset = reset

    def _run(self, args, what, follow=False):
        rc, out = self.runner(list(args), follow=follow)
        if rc != 0:
            last = [l for l in (out or "").strip().splitlines() if l.strip()]
            what = what(last) if callable(what) else what
            raise DeviceError("%s failed on %s: %s" % (what, self.device, last[-1] if last else "mpremote exit %d" % rc))
        return out or ""

    def find(self):
        """The device to use: the one asked for if mpremote sees it, else the only (or first) one listed."""
        rc, out = self.runner(["devs"], follow=False)
        listed = [l.split()[0] for l in (out or "").splitlines() if l.strip() and rc == 0]
        d = self.device
        if d and d not in ("auto",):
            if d in listed or "://" in d or d.startswith(("socket:", "port:", "id:")):
                return d
            raise DeviceError("no device found at %s (mpremote devs lists %s)" % (d, ", ".join(listed) or "none"))
        if not listed:
            raise DeviceError("no device found: mpremote devs lists no serial device (plug the board in, or "
                              "pass --device PORT)")
        self.device = listed[0]
        return self.device

    def exec(self, code, what, resume=True):
        args = ["connect", self.device] + (["resume"] if resume or not self.reset else []) + ["exec", code]
        return self._run(args, what)

    def probe(self, paths):
        # The first command of a deploy: connecting stops the running program and soft-resets the board.
        out = self.exec(PROBE % {"paths": list(paths), "manifest": MANIFEST}, "reading the board", resume=False)
        for line in out.splitlines():
            if line.startswith("TINYMQTT-PROBE "):
                return Probe(json.loads(line[15:]))
        raise DeviceError("reading the board failed on %s: no answer (is it running MicroPython?)" % self.device)

    def prepare(self, remove, dirs):
        out = self.exec(PREPARE % {"remove": list(remove), "dirs": list(dirs)}, "preparing folders")
        if "TINYMQTT-READY" not in out:
            raise DeviceError("preparing folders failed on %s: no answer" % self.device)

    def cp(self, local, dest):
        self.cp_all([(local, dest)])

    def cp_all(self, pairs):
        """Copies every (local, dest) in one mpremote run, its commands chained with "+": one connection
        instead of one per file (each costs a process start and a raw-REPL entry). mpremote stops at the first
        copy that fails; what came before it stays, which the next deploy's probe sees."""
        if not pairs:
            return
        args = ["connect", self.device, "resume"]
        for local, dest in pairs:
            args += ["fs", "cp", local, ":" + dest, "+"]

        def what(lines):  # mpremote prints "cp LOCAL :DEST" as each copy starts: the last one is the culprit
            started = [l.rsplit(" :", 1)[1] for l in lines if l.startswith("cp ") and " :" in l]
            return "copying %s" % (started[-1] if started else pairs[0][1])
        self._run(args[:-1], what)

    def run_main(self, follow):
        """Soft-resets the board and runs main.py; follow=True streams its output until it ends (Ctrl-C)."""
        args = ["connect", self.device, "resume"] + (["soft-reset"] if self.reset else []) + ["exec"]
        args += [] if follow else ["--no-follow"]
        self._run(args + ["import main" if self.reset else RERUN], "starting main.py", follow=follow)


    def romfs_size(self):
        """Bytes in the device's first ROMFS partition; 0 when its firmware has none (before MicroPython 1.25,
        or not enabled) or mpremote cannot tell."""
        rc, out = self.runner(["connect", self.device, "resume", "romfs", "query"], follow=False)
        m = re.search(r"ROMFS0 partition has size (\d+) bytes", out or "")
        return int(m.group(1)) if rc == 0 and m else 0

    def romfs_deploy(self, folder):
        """Writes folder as the ROMFS image (mounted at /rom; its files are .mpy already)."""
        self._run(["connect", self.device, "resume", "romfs", "--no-mpy", "deploy", folder], "writing the ROMFS image")


def folders(paths):
    """Every folder the paths need, parents first."""
    out = []
    for p in paths:
        parts = p.split("/")[:-1]
        for i in range(1, len(parts) + 1):
            d = "/".join(parts[:i])
            if d not in out:
                out.append(d)
    return out


def blocks(size, block):
    return (size + block - 1) // block * block if size else block


def local_copy(tmp, f):
    path = os.path.join(tmp, *f.dest.split("/"))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as fh:
        fh.write(f.data)
    return path
