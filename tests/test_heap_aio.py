# The asyncio client's heap cost through its public API on real MicroPython over real sockets against a real
# mosquitto (tests/sim_apps/heap_aio.py): the 32-bit WebAssembly build (simulated board), the 64-bit unix
# port and the 32-bit unix port (tools/mp32.py: real sockets). publish_nowait() allocates nothing (heap_lock()
# proves it), nor does `await publish()` at QoS 0 on the unix port (publish() is no coroutine: it returns an
# awaitable already done, or the stream's own yield; the WebAssembly build's asyncio allocates 16 B for that yield
# itself). At QoS 1/2 it costs one object of ours per flow, its coroutine (_result: 112 / 224 B on 32 / 64-bit): the
# waits make none (aio._Changes, aio.SocketStream's SocketWait). The rest is asyncio's, at each wait of the reader
# task for the socket: MicroPython's IO queue makes a list and a poll registration (112 B / 96 B) and, on the 32-bit
# unix port, whose heap lies above 1 GiB, four id() big ints (128 B; an ESP32's or RP2040's fit small ints); on the
# simulated board the read's coroutine and the bridge to Node (~276 B). QoS 2 waits twice. The reader reads what came
# before it waits, so an ack that arrived while the publisher ran costs no wait: on loopback most do (measured 0 /
# 112-184 / 112-234 B on the 32-bit unix port, 0 / 224-260 / 225 B on 64-bit, four runs); over a slower link each ack
# waits. Since each of the client's waits is woken only when its condition may have become true (aio.py: _changed,
# _ended, _room; before, every ack woke every waiter), QoS 1 costs the coroutine alone on the unix ports: measured
# 0 / 112-114 / 112-592 B on the 32-bit unix port, 0 / 224-227 / 224-274 B on 64-bit (three runs; 0 / 128-363 /
# 128-133 and 0 / 256-257 / 258-434 B before). The pins below allow a wait per ack (were 144 / 520-614 / 918-968 B
# and 256 / 928 / 1344 B before publish() stopped being a coroutine, 2 / 446 / 807 B on the 32-bit unix port before
# the waits stopped making objects, 0 / 352 / 592 B there and 0 / 320 / 416 B on 64-bit before the reader read
# first). `async for` over messages() is measured and reported (its coroutine, the Message and its payload copy).
import os

import pytest

import tools.sim
from tests.support import unixport
from tests.support.report import record

APP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sim_apps", "heap_aio.py")


def run_board(board, broker):
    # (warm-up: 40 calls, so that the writer task, which runs once per half-full `out` at QoS 0, has made its
    # first-time objects before the count starts)
    env = dict(BROKER_HOST=broker.host, BROKER_PORT=broker.port, PREFIX="ha/%s/" % board, WARMUP=40, N=100)
    p = tools.sim.run_app(APP, env=env, board=board, timeout=120)
    res = tools.sim.results(p.stdout)
    assert p.returncode == 0 and len(res) == 1, "exit %d\n%s\n%s" % (p.returncode, p.stdout[-3000:], p.stderr[-3000:])
    return res[0]


@pytest.mark.parametrize("board,label", [("sim", "32-bit"), ("unix", "64-bit"), ("unix32", "32-bit unix")])
def test_asyncio_publish_nowait_allocates_nothing_and_the_rest_is_measured(broker, board, label):
    if board == "unix" and not os.path.exists(tools.sim.MICROPYTHON):
        pytest.skip("no MicroPython unix port")
    if board == "unix32":
        unixport.need32()
    res = run_board(board, broker)
    assert res["connected"], res
    for what in ("await publish", "publish_nowait + async for"):
        record("MicroPython heap (%s): asyncio %s q0/q1/q2 (B/msg)" % (label, what),
               " / ".join("%.0f" % res["q%d %s" % (q, what)] for q in range(3)))
    for q in range(3):
        assert res["q%d publish_nowait locked" % q], res
    # B per `await publish()` at QoS 0/1/2, at most: a wait per ack (measured 2 / 362-434 / 787-821 on 32-bit: the
    # bridge to Node varies; 0 / 224-260 / 225 on 64-bit, 0 / 112-184 / 112-234 on the 32-bit unix port, where most
    # acks came while the publisher ran)
    most = {"32-bit": (16, 480, 880), "64-bit": (0, 336, 448), "32-bit unix": (0, 368, 608)}[label]
    assert all(res["q%d await publish" % q] <= most[q] for q in range(3)), res
    record("MicroPython heap (%s): asyncio client idle for 1 s (B)" % label, "%.0f" % res["idle 1 s"])
    if board in ("unix", "unix32"):
        assert res["q0 await publish locked"], res  # nothing at all: heap_lock() proves it
        assert res["idle 1 s"] == 0, res  # no polling: the tasks wait on the socket and the clock
