# Runs board programs under MicroPython's unix port (.venv/bin/micropython: real socket, select, ssl; or, with
# bits=32, the 32-bit build of tools/mp32.py: real socket and select, no ssl, the boards' 31-bit small ints) with
# the file tree a board gets: lib/tinymqtt, lib/tinymqtt_port.py and config.py (tools.sim.assemble); for
# "esp32" / "picow" also ports/common's tinymqtt_board.py and a fake `network` (tests/fakes/BOARD), never a
# fake socket. Programs print "RESULT {json}" lines; tracebacks come on stdout (the unix port's habit).
import os
import shutil
import subprocess
import tempfile

import tools.sim
from tools.sim import MICROPYTHON, results  # noqa: F401 (results: re-exported for the tests)

REPO = tools.sim.REPO
FAKES = os.path.join(REPO, "tests", "fakes")
BOARDS = ("linux", "esp32", "picow")
WIFI = {"WIFI_SSID": "home", "WIFI_PASSWORD": "secret"}


def available():
    return os.access(MICROPYTHON, os.X_OK)


def need32():
    """Skips the calling test when the 32-bit port is left out on purpose (TINYMQTT_NO_MP32=1); fails it when the
    port is missing otherwise (the bootstrap builds it: a missing build is a broken set-up, not a reason to skip)."""
    import pytest
    from tools import mp32
    if os.environ.get(mp32.OFF):
        pytest.skip("%s is set: no 32-bit MicroPython port" % mp32.OFF)
    if tools.sim.micropython32() is None:
        pytest.fail("no 32-bit MicroPython port: run python -m tools.mp32 (tools/bootstrap.sh does)", pytrace=False)


def split(layer):
    """A layer of the tests' parameters, "esp32-mpy" (64-bit) or ("esp32-mpy", 32): (name, bits)."""
    return layer if isinstance(layer, tuple) else (layer, 64)


_LIBRARIES = {}


def library(board):
    """tools.deploy.library_files(board) built once a process for the same build inputs (tests/conftest.py's key):
    seconds on the esp32 (every module shortened, renamed and through mpy-cross), and some forty programs here run
    on that library; the same inputs give the same files."""
    import tools.deploy as deploy
    key = (board.name, board.profile, tuple(board.lib), tuple(board.bundle), board.short_errors,
           tuple(board.mpy_cross), tuple(sorted(deploy.WITHOUT)))
    if key not in _LIBRARIES:
        with tempfile.TemporaryDirectory() as tmp:
            _LIBRARIES[key] = deploy.library_files(board, tmp)
    return _LIBRARIES[key]


def tree(app, dst, board="linux", env=None):
    """Writes the tree for board into dst (the app becomes main.py); returns dst. "esp32-mpy": the esp32 layer
    with the library as tools/deploy compiles it for the esp32 (bundles, short errors and names,
    hooks compiled out); "esp32-mqtt311": the same for profile mqtt311."""
    config = dict(env or {})
    if board != "linux":
        config.update(WIFI)
    tools.sim.assemble(app, dst, "unix", config)
    if board in ("esp32-mpy", "esp32-mqtt311"):
        profile = "mqtt311" if board == "esp32-mqtt311" else None
        board = "esp32"
        from tools import boards
        shutil.rmtree(os.path.join(dst, "lib", "tinymqtt"))
        for dest, data, _ in library(boards.get("esp32", profile=profile)):
            os.makedirs(os.path.dirname(os.path.join(dst, dest)), exist_ok=True)
            with open(os.path.join(dst, dest), "wb") as f:
                f.write(data)
    if board != "linux":
        lib = os.path.join(dst, "lib")
        shutil.copy(os.path.join(REPO, "ports", board, "tinymqtt_port.py"), os.path.join(lib, "tinymqtt_port.py"))
        for name in ("tinymqtt_board.py", "tinymqtt_tls.py", "tinymqtt_stream.py"):
            shutil.copy(os.path.join(REPO, "ports", "common", name), lib)
        with open(os.path.join(FAKES, board, "network.py")) as f:
            fake = f.read()
        with open(os.path.join(lib, "network.py"), "w") as f:  # the access point config.py names is in range
            f.write(fake + "\nworld.air = {%r: %r}\n" % (WIFI["WIFI_SSID"], WIFI["WIFI_PASSWORD"]))
    return dst


class Board(tools.sim.Board):
    """A program running in the background on the unix port (expect(), wait(), results(), close()); board
    "cpython" runs it under CPython with ports/linux instead; bits=32 on the 32-bit port; frozen=PROFILE on the
    32-bit firmware with that profile and ports/linux frozen in (tools/mp32.py), the tree without its lib/."""

    def __init__(self, app, board="linux", env=None, heap=None, bits=64, frozen=None):
        if board == "cpython":  # the same tree and program under CPython (ports/linux), for comparison
            super().__init__(app, env, heap, board="linux")
            return
        exe = None
        if bits == 32 or frozen:
            need32()
            bits = 32
        if frozen:
            from tools import mp32
            exe = mp32.frozen(frozen)  # built now if this checkout's library changed since the last build
        tmp = tempfile.mkdtemp(prefix="tinymqtt-unix-")
        root = tree(app, tmp, board, env)
        if frozen:  # only main.py and config.py: the library and the port come from the firmware
            shutil.rmtree(os.path.join(root, "lib"))
        super().__init__(board="unix32" if bits == 32 else "unix", root=root, heap=heap, exe=exe)
        self._tmp = tmp  # removed by close()


def run(app, board="linux", env=None, heap=None, timeout=60, bits=64, frozen=None):
    """Runs a program to its end: (exit code, stdout, the RESULT values). A timeout kills it (exit -9)."""
    with Board(app, board, env, heap, bits, frozen) as b:
        try:
            rc = b.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            b.proc.kill()
            rc = -9
        b.wait(5)
        return rc, "\n".join(b.lines + b.errors), b.results()
