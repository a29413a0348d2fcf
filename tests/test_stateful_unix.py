# The stateful test of tests/test_stateful_api.py, shorter, on MicroPython's unix port (real sockets, real
# mosquitto): hypothesis does not run on MicroPython, so it generates the call sequences here and
# tests/unix_apps/stateful.py replays each on the board, with the same invariants (checked there: an invalid call
# raises at the call with its reason code and leaves the session as it was, the next call works, one reconnect per
# broker restart); the counting subscriber runs here: every accepted QoS 1/2 message arrives, QoS 2 once.
import os
import threading

import pytest
from hypothesis import HealthCheck, Phase, given, settings, strategies as st

from tests.support import report, unixport
from tests.test_stateful_api import BAD_PUBLISH, BAD_SUBSCRIBE, BAD_UNSUBSCRIBE, Subscriber, uid

pytestmark = pytest.mark.skipif(not unixport.available(), reason="needs .venv/bin/micropython")
APP = os.path.join(os.path.dirname(__file__), "unix_apps", "stateful.py")

STEP = st.one_of(
    st.tuples(st.just("pub"), st.sampled_from([0, 1, 2]), st.booleans(), st.sampled_from([1, 100, 3000])),
    st.sampled_from(BAD_PUBLISH).map(lambda b: ("pub_bad",) + list(b[0].items())[0] + (b[1],)),
    st.tuples(st.just("sub"), st.integers(0, 3), st.sampled_from([0, 1, 2])),
    st.sampled_from(BAD_SUBSCRIBE).map(lambda b: ("sub_bad", b[0], b[1])),
    st.tuples(st.just("unsub"), st.integers(0, 3)),
    st.sampled_from(BAD_UNSUBSCRIBE).map(lambda b: ("unsub_bad", b[0], b[1])),
    st.tuples(st.just("loop"), st.sampled_from([0.01, 0.1])),
    st.just(("disconnect",)), st.just(("connect",)), st.just(("restart",)))
FIGURES = {}


@pytest.mark.parametrize("api", ["blocking", "aio"])
@settings(max_examples=int(os.environ.get("STATEFUL_EXAMPLES", 3)), deadline=None, derandomize=True, phases=[Phase.explicit, Phase.generate],
          suppress_health_check=list(HealthCheck))  # (no shrinking: each run takes seconds; the failure names its steps)
@given(version=st.sampled_from([4, 5]), steps=st.lists(STEP, min_size=12, max_size=30))
def test_public_api_stateful_on_the_unix_port(make_broker, api, version, steps):
    steps = [s for i, s in enumerate(steps) if s[0] != "restart" or [t[0] for t in steps[:i]].count("restart") < 2]
    broker = make_broker(persistence=True)
    prefix = uid("u" + api)
    sub = Subscriber(broker, prefix)
    stop = threading.Event()

    def drive():  # the subscriber counts in the background while the board runs (only this thread uses it)
        while not stop.is_set():
            try:
                sub.loop(0.02)
            except Exception:  # noqa: BLE001 (a restart: the next loop reconnects)
                pass
    t = threading.Thread(target=drive, daemon=True)
    t.start()
    env = dict(BROKER_HOST=broker.host, BROKER_PORT=broker.port, CLIENT_ID=uid("c"), VERSION=version, API=api,
               PREFIX=prefix, STEPS=steps)
    try:
        with unixport.Board(APP, "linux", env) as b:
            for i in range(sum(1 for s in steps if s[0] == "restart")):
                b.expect("RESTART", 60)
                broker.restart()
                open(os.path.join(b._tmp, "restarted%d" % i), "w").close()  # (the board waits for it)
            assert b.wait(90) == 0, "steps %r\n%s" % (steps, "\n".join(b.lines + b.errors))
            res = b.results()[-1]
        restarts = sum(1 for s in steps if s[0] == "restart")
        assert not res["failures"], (res["failures"], steps)
        # no reconnect loop: once the steps are done, the link stays up (a restart costs a few refused attempts)
        assert res["inflight"] == 0 and res["quiet_drops"] == 0 and res["drops"] <= 12 * restarts, (res, steps)
        want = {p.encode(): q for p, q in res["expected"]}
        end = threading.Event()
        for _ in range(300):
            if all(p in sub.count for p in want):
                break
            end.wait(0.05)
    finally:
        stop.set()
        t.join(5)
    missing = [p for p in want if p not in sub.count]
    assert not missing, "%d of %d never arrived" % (len(missing), len(want))
    twice = [(p, sub.count[p]) for p, q in want.items() if q == 2 and sub.count[p] != 1]
    assert not twice, twice
    sub.c.disconnect()
    f = FIGURES.setdefault(api, [0, 0, 0, 0])
    f[0] += 1
    f[1] += len(steps)
    f[2] += sum(1 for s in steps if s[0].endswith("_bad"))
    f[3] += len(want)
    report.record("stateful API test on the unix port, %s client" % api,
                  "%d sequences, %d calls, %d invalid ones refused, %d QoS 1/2 messages counted" % tuple(f))
