# The keep-alive board program (three clients, 3.1 / 3.1.1 / 5.0, keepalive 2 s, idle 5 s) on every board kind
# the suite knows (the unix ports: 64-bit and 32-bit), started together against one mosquitto that logs every
# packet, the first time any of test_sim_board / test_aio_cpython / test_unix_aio / test_unix_blocking asks: the
# boards only wait, so they share the 5 s instead of taking it in turn. result(kind) -> (RESULT, client id, broker log) for that board.
import os

import tools.sim
from tests.support import micropython, unixport
from tests.support.broker import Mosquitto

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
AIO_APP = os.path.join(TESTS, "sim_apps", "keepalive.py")
BLOCKING_APP = os.path.join(TESTS, "unix_apps", "blocking", "keepalive.py")
CONFIG = {"VERSIONS": [3, 4, 5], "KEEPALIVE": 2, "IDLE": 5}
_results = {}


def _start(kind, env):
    if kind in ("unix-blocking", "unix32-blocking"):  # the blocking twin on a unix port (ports/linux)
        return unixport.Board(BLOCKING_APP, "linux", env, bits=32 if kind == "unix32-blocking" else 64)
    return tools.sim.start_app(AIO_APP, env=env, board=kind)  # sim, linux (CPython), unix, unix32


def _kinds():
    return (["sim"] if micropython.available() else []) + ["linux"] + (
        ["unix", "unix-blocking"] if unixport.available() else []) + (
        ["unix32", "unix32-blocking"] if tools.sim.micropython32() else [])


def _run_all():
    with Mosquitto(extra_conf="log_type all") as b:
        boards = {}
        try:
            for i, kind in enumerate(_kinds()):
                env = dict(CONFIG, BROKER_HOST=b.host, BROKER_PORT=b.port, CLIENT_ID="k%d%s" % (i, os.urandom(3).hex()))
                boards[kind] = (_start(kind, env), env["CLIENT_ID"])
            for kind, (board, cid) in boards.items():
                try:
                    rc = board.wait(30)
                    assert rc == 0, "the %s board failed (exit %d)\n%s" % (kind, rc, board)
                    res, = board.results()
                    _results[kind] = (res, cid)
                except AssertionError as e:
                    _results[kind] = e
        finally:
            for board, _ in boards.values():
                board.close()
        log = b.log_text()
    for kind, got in _results.items():
        if not isinstance(got, Exception):
            _results[kind] = got + (log,)


def result(kind):
    if not _results:
        _run_all()
    got = _results.get(kind) or AssertionError("no %s board on this machine (node / .venv/bin/micropython / "
                                               "python -m tools.mp32)" % kind)
    if isinstance(got, Exception):
        raise got
    return got
