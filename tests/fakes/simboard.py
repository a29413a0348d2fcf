# Host side of the board tests: builds a board's file tree with tools/deploy (--target), adds the fake
# board modules of this folder to its /lib, and runs it on the simulated board (real MicroPython 1.27,
# WebAssembly on Node: tools/sim/run.mjs). TINYMQTT_RUN_MJS may name another copy of run.mjs (one that
# imports the npm package by absolute path, while node_modules is not installed).
import io
import json
import os
import shutil
import subprocess
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
RUN_MJS = os.environ.get("TINYMQTT_RUN_MJS") or os.path.join(REPO, "tools", "sim", "run.mjs")
PACKAGE = os.path.join(REPO, "node_modules", "@micropython", "micropython-webassembly-pyscript")


def available():
    return shutil.which("node") is not None and (bool(os.environ.get("TINYMQTT_RUN_MJS")) or os.path.isdir(PACKAGE))


def deploy(board, app, target, *args, env=None):
    """python -m tools.deploy --board BOARD --app APP --target TARGET ARGS...; returns (exit code, out, err)."""
    from tools.deploy.__main__ import main
    out, err = io.StringIO(), io.StringIO()
    argv = ["--board", board, "--app", app, "--target", str(target), "--secrets", os.devnull] + list(args)
    rc = main(argv, env=env or {}, out=out, err=err)  # never the developer's own secrets.toml
    return rc, out.getvalue(), err.getvalue()


def add_fakes(root, *names, board=None):
    """Copies fake modules (socket, ssl, machine, jsstream; board: that board's network) into root/lib."""
    lib = os.path.join(str(root), "lib")
    if board:
        shutil.copy(os.path.join(HERE, board, "network.py"), os.path.join(lib, "network.py"))
    for n in names:
        shutil.copy(os.path.join(HERE, n + ".py"), os.path.join(lib, n + ".py"))


def command(root, main="main.py", heap=None):
    argv = ["node", RUN_MJS, str(root), main]
    if heap:
        argv += ["--heap", str(heap)]
    return argv


def run(root, main="main.py", timeout=30, heap=None):
    """Runs the tree to its end: CompletedProcess with text stdout/stderr."""
    return subprocess.run(command(root, main, heap), cwd=str(root), capture_output=True, text=True, timeout=timeout)


def results(text):
    """The JSON values of every "RESULT {json}" line."""
    return [json.loads(line[7:]) for line in text.splitlines() if line.startswith("RESULT ")]


class Running:
    """A board program running in the background: expect() its stdout lines, wait() for its exit."""

    def __init__(self, root, main="main.py"):
        self.proc = subprocess.Popen(command(root, main), cwd=str(root), stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, bufsize=1)
        self.lines, self.errors, self._seen = [], [], 0
        self._cv = threading.Condition()
        self._threads = [threading.Thread(target=self._pump, args=(s, l), daemon=True)
                         for s, l in ((self.proc.stdout, self.lines), (self.proc.stderr, self.errors))]
        for t in self._threads:
            t.start()

    def _pump(self, stream, into):
        for line in stream:
            with self._cv:
                into.append(line.rstrip("\n"))
                self._cv.notify_all()
        with self._cv:
            self._cv.notify_all()

    def expect(self, prefix, timeout=15.0):
        end = time.monotonic() + timeout
        with self._cv:
            while True:
                for i in range(self._seen, len(self.lines)):
                    if self.lines[i].startswith(prefix):
                        self._seen = i + 1
                        return self.lines[i][len(prefix):].strip()
                left = end - time.monotonic()
                done = self.proc.poll() is not None and not any(t.is_alive() for t in self._threads)
                if left <= 0 or done:
                    raise AssertionError("no %r line from the board within %.0f s\n%s" % (prefix, timeout, self))
                self._cv.wait(min(left, 0.1))

    def wait(self, timeout=15.0):
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.close()
            raise AssertionError("the board did not finish within %.0f s\n%s" % (timeout, self))
        for t in self._threads:
            t.join(2)
        return rc

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for t in self._threads:
            t.join(2)

    def __str__(self):
        with self._cv:
            return "--- board stdout:\n%s\n--- board stderr:\n%s" % ("\n".join(self.lines), "\n".join(self.errors))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
