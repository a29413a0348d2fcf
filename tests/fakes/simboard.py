# Host side of the board tests: builds a board's file tree with tools/deploy (--target), adds the fake
# board modules of this folder to its /lib, and runs it on the simulated board (real MicroPython 1.27,
# WebAssembly on Node: tools/sim/run.mjs). TINYMQTT_RUN_MJS may name another copy of run.mjs (one that
# imports the npm package by absolute path, while node_modules is not installed).
import io
import os
import shutil
import subprocess

from tools.sim import Board, results  # noqa: F401 (results: re-exported for the tests)

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
    """Copies fake modules (socket, machine, jsstream; board: that board's network) into root/lib."""
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


def Running(root, main="main.py"):
    """A board program running in the background: tools.sim's Board, on an already deployed tree."""
    return Board(root=str(root), main=main)
