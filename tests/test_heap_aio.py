# The asyncio client's heap cost through its public API on real MicroPython over real sockets against a real
# mosquitto (tests/sim_apps/heap_aio.py): the 32-bit WebAssembly build (simulated board) and the 64-bit unix
# port. publish_nowait() allocates nothing (heap_lock() proves it); await publish() and `async for` over
# messages() are measured and reported (coroutines the language allocates, the stream's read and drain, and
# for messages() the Message and its payload copy; on the simulated board its bridge to Node adds ~276 B a read).
import os

import pytest

import tools.sim
from tests.support.report import record

APP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sim_apps", "heap_aio.py")


def run_board(board, broker):
    env = dict(BROKER_HOST=broker.host, BROKER_PORT=broker.port, PREFIX="ha/%s/" % board, WARMUP=20, N=100)
    p = tools.sim.run_app(APP, env=env, board=board, timeout=120)
    res = tools.sim.results(p.stdout)
    assert p.returncode == 0 and len(res) == 1, "exit %d\n%s\n%s" % (p.returncode, p.stdout[-3000:], p.stderr[-3000:])
    return res[0]


@pytest.mark.parametrize("board,label", [("sim", "32-bit"), ("unix", "64-bit")])
def test_asyncio_publish_nowait_allocates_nothing_and_the_rest_is_measured(broker, board, label):
    if board == "unix" and not os.path.exists(tools.sim.MICROPYTHON):
        pytest.skip("no MicroPython unix port")
    res = run_board(board, broker)
    assert res["connected"], res
    for what in ("await publish", "publish_nowait + async for"):
        record("MicroPython heap (%s): asyncio %s q0/q1/q2 (B/msg)" % (label, what),
               " / ".join("%.0f" % res["q%d %s" % (q, what)] for q in range(3)))
    for q in range(3):
        assert res["q%d publish_nowait locked" % q], res
