# Faults on MicroPython's unix port with real sockets, blocking and asyncio clients (ports/linux): random cuts
# through tests/support/faultproxy.py both ways (QoS 1: none lost; QoS 2: none lost, none twice), a broker
# that pauses between reads (no data lost at QoS 0: the send timeout must not fire), a broker that goes
# silent (SIGSTOP) found by keep-alive at 2 s, a broker restart that forgot the client (reconnect,
# resubscribe, resend), and TLS with the test CA (valid, wrong CA, wrong host, no CA). The apps are in
# tests/unix_apps/; the CPython side reuses tests/test_faults.py's Watcher / Feeder and its delivery check.
# All but TLS (that build has no ssl) run on the 32-bit port too (tools/mp32.py), ports/linux.
import collections
import os
import random
import signal

import pytest

from tests.support import report, unixport
from tests.support.faultproxy import FaultProxy, Plan, RandomPlans, PUBLISHER_CUTS, SUBSCRIBER_CUTS
from tests.test_faults import Watcher, Feeder, broker_resends, check_delivery, uid
from tests.test_sim_board import Peer, peers, until  # noqa: F401 (peers: a fixture)
from tests.test_tls import pki, tls_broker, USER, SECRET  # noqa: F401 (fixtures)

pytestmark = pytest.mark.skipif(not unixport.available(), reason="needs .venv/bin/micropython")
APPS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "unix_apps")
APIS = ["blocking", "aio"]
BITS = [pytest.param(64, id="64bit"), pytest.param(32, id="32bit")]
N, CUTS, SEED = 1000, 20, 20261122


def app(name):
    return os.path.join(APPS, name)


def only_result(b, timeout):
    rc = b.wait(timeout)
    assert rc == 0, "the app failed (exit %d)\n%s" % (rc, b)
    res = b.results()
    assert len(res) == 1, b
    return res[0]


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("role", ["publisher", "subscriber"])
# esp32-mpy: the library as deploy builds it (unixport)
@pytest.mark.parametrize("layer", ["linux", "esp32-mpy", pytest.param(("linux", 32), id="linux-32bit")])
def test_random_cuts_lose_nothing(make_broker, api, role, layer):
    layer, bits = unixport.split(layer)
    br = make_broker()
    topic, seed = "uf/" + uid(), SEED + len(api) + len(role)
    env = dict(BROKER_HOST="127.0.0.1", CLIENT_ID="u" + uid(), VERSION=5, N=N, TOPIC=topic, API=api, ROLE=role)
    with FaultProxy(br.host, br.port, seed=seed, record=True) as px:
        px.plan = RandomPlans(random.Random(seed), CUTS, PUBLISHER_CUTS if role == "publisher" else SUBSCRIBER_CUTS)
        env["BROKER_PORT"] = px.port
        if role == "publisher":
            w = Watcher(br, topic, 5)
            with unixport.Board(app("faults.py"), layer, env, bits=bits) as b:
                res = only_result(b, 120)
            assert until(lambda: all(w.got[b"q%d-%06d" % (q, i)] for q in (1, 2) for i in range(N)), 30), \
                "not all arrived: %d distinct" % len(w.got)
            w.close()
            got = w.got
        else:
            with unixport.Board(app("faults.py"), layer, env, bits=bits) as b:
                b.expect("READY", 15)
                f = Feeder(br, topic, N, 5)
                res = only_result(b, 120)
                f.join(60)
                assert f.error is None, f.error
            got = collections.Counter({k.encode(): v for k, v in res["got"].items()})
        assert not res["lost"], res["lost"][:3]
        excused = broker_resends(px)  # mosquitto 2.0.11 re-sends some QoS 2 PUBLISHes after their PUBREL
        dups = check_delivery(got, N, "unix %s %s" % (api, role), excused)
        assert len(px.cuts) >= CUTS // 4, px.cuts  # the traffic may end before every planned cut
    report.record("unix port faults: %s %s%s%s" % (api, role, "" if layer == "linux" else " (" + layer + ")",
                                                   " (32-bit)" if bits == 32 else ""),
                  "%d QoS 1 + %d QoS 2 msgs, %d cuts, 0 lost, 0 QoS 2 twice, %d QoS 1 dups, "
                  "%d broker re-sends after PUBREL" % (N, N, len(px.cuts), dups, len(excused)))


@pytest.mark.parametrize("bits", BITS)
@pytest.mark.parametrize("api", APIS)
def test_a_broker_that_pauses_between_reads_loses_no_qos0_message(broker, peers, api, bits):
    n = 400
    topic = "up/" + uid()
    peer = peers(broker, 5)
    peer.c.subscribe(topic, 0)
    env = dict(BROKER_HOST="127.0.0.1", CLIENT_ID="u" + uid(), VERSION=5, N=n, TOPIC=topic, API=api,
               ROLE="publisher", QOS0=True)
    with FaultProxy(broker.host, broker.port) as px:
        px.plan = lambda number: Plan(delay=0.4)  # holds each chunk 0-400 ms before reading the next
        env["BROKER_PORT"] = px.port
        with unixport.Board(app("qos0.py"), "linux", env, bits=bits) as b:
            assert until(lambda: b.proc.poll() is not None, 60, [peer]), b
            res = only_result(b, 5)
        assert until(lambda: len(peer.msgs) >= n, 60, [peer]), "%d of %d arrived" % (len(peer.msgs), n)
    assert res["errors"] == [], res
    assert [m.payload for m in peer.msgs] == [b"%04d" % i + b"." * 1020 for i in range(n)]


@pytest.mark.parametrize("bits", BITS)
@pytest.mark.parametrize("api", APIS)
def test_keepalive_finds_a_silent_broker(make_broker, api, bits):
    br = make_broker()
    env = dict(BROKER_HOST=br.host, BROKER_PORT=br.port, CLIENT_ID="u" + uid(), VERSION=5, KEEPALIVE=2, API=api)
    with unixport.Board(app("silent.py"), "linux", env, bits=bits) as b:
        b.expect("READY", 15)
        os.kill(br.proc.pid, signal.SIGSTOP)
        try:
            res = only_result(b, 30)
        finally:
            os.kill(br.proc.pid, signal.SIGCONT)
    assert res["lost"], res
    assert "0x8D" in res["error"] or "keep" in res["error"].lower(), res["error"]  # Keep Alive timeout
    report.record("unix port keep-alive 2 s, silent broker (%s%s): found after (ms)"
                  % (api, ", 32-bit" if bits == 32 else ""), res["ms"])


@pytest.mark.parametrize("bits", BITS)
@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("version", [4, 5], ids=["v3.1.1", "v5"])
def test_broker_restart_reconnect_resubscribe_resend(make_broker, api, version, bits):
    n = 10
    br = make_broker(persistence=True)
    prefix = "ur/%s/" % uid()
    watch = Peer(br, 4, clean=False, backoff_min_ms=100, backoff_max_ms=200)
    watch.c.reconnect = True
    watch.c.subscribe(prefix + "data", 2)
    env = dict(BROKER_HOST=br.host, BROKER_PORT=br.port, CLIENT_ID="u" + uid(), VERSION=version, N=n,
               PREFIX=prefix, API=api)
    with unixport.Board(app("restart.py"), "linux", env, bits=bits) as b:
        b.expect("READY", 15)
        br.stop()
        b.expect("QUEUED", 30)
        br.start()
        assert until(lambda: len(watch.msgs) >= 2 * n, 30, [watch]), (watch.msgs, b)
        # Retained: it reaches the board whether its SUBSCRIBE comes before or after this PUBLISH.
        watch.publish(prefix + "cmd", b"end", 1, retain=True)
        assert until(lambda: b.proc.poll() is not None, 20, [watch]), b
        res = only_result(b, 5)
    watch.publish(prefix + "cmd", b"", 1, retain=True)
    watch.close()
    assert res["connects"][0] is False and False in res["connects"][1:], "the broker forgot the session"
    assert res["got"] == ["end"], "resubscribed: the command after the restart arrived"
    assert res["inflight"] == 0
    data = [m.payload for m in watch.msgs]
    for i in range(n):
        assert data.count(b"q1-%d" % i) >= 1 and data.count(b"q2-%d" % i) == 1, data


def tls_cases(pki, tb):
    ca, other = pki.path("ca.pem"), pki.path("other-ca.pem")
    return [
        ["valid, by name", tb.port, {"cafile": ca}, True],
        ["valid, by IP", tb.port, {"cafile": ca, "server_hostname": "127.0.0.1"}, True],
        ["wrong CA", tb.port, {"cafile": other}, True],
        ["wrong host", tb.wronghost_port, {"cafile": ca}, False],
        ["expired", tb.expired_port, {"cafile": ca}, False],
        ["no CA given", tb.port, {}, True],
    ]


@pytest.mark.parametrize("layer", unixport.BOARDS)
@pytest.mark.parametrize("api", APIS)
def test_tls_with_the_test_ca(tls_broker, pki, api, layer):
    env = dict(HOST="localhost", CLIENT_ID="u" + uid(), VERSION=5, API=api, USER=USER, SECRET=SECRET,
               TOPIC="ut/" + uid(), CASES=tls_cases(pki, tls_broker))
    rc, out, res = unixport.run(app("tls.py"), layer, env, timeout=60)
    assert rc == 0, out
    r = {x["case"]: x for x in res}
    assert r["valid, by name"]["ok"] and r["valid, by IP"]["ok"], r
    for bad in ("wrong CA", "wrong host", "expired", "no CA given"):
        assert not r[bad]["ok"] and r[bad]["error"].startswith(("OSError", "NetworkError", "ValueError")), r[bad]
    words = "certificate verify failed" if layer == "linux" else "certificate did not verify"
    for bad in ("wrong CA", "wrong host", "expired"):
        assert words in r[bad]["error"], r[bad]
    assert "not correctly signed by the trusted CA" in r["wrong CA"]["error"], r["wrong CA"]
    assert "(CN) does not match" in r["wrong host"]["error"], r["wrong host"]
    assert "expired" in r["expired"]["error"], r["expired"]
    if layer == "linux":  # no CA named: the system's CAs, which do not know the test CA
        assert words in r["no CA given"]["error"], r["no CA given"]
    else:  # a board has no CA store
        assert "needs the broker's CA" in r["no CA given"]["error"], r["no CA given"]
    assert SECRET not in out
