# The asyncio client on the simulated board (real MicroPython 1.27 on Node, ports/sim) against a real mosquitto.
# Each scenario is a board app in tests/sim_apps/ that prints "RESULT {json}"; the CPython end of each
# conversation is the blocking Client (ports/linux), looped by the test. tests/test_aio_cpython.py runs the
# same apps under CPython's asyncio (board "linux"); the heap figures are MicroPython's alone.
import os
import re
import subprocess
import sys
import time
import uuid

import pytest

import tools.sim
from tests.support import keepalive_runs
from tests.support.proxy import Proxy
from tests.support.report import record
from tinymqtt import props as P
from tinymqtt.aliases import TopicAliases
from tinymqtt.client import Client

APPS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sim_apps")
VERSIONS = [pytest.param(3, id="v3.1"), pytest.param(4, id="v3.1.1"), pytest.param(5, id="v5")]


def uid():
    return uuid.uuid4().hex[:8]  # client ids stay within MQTT 3.1's 23 characters


@pytest.fixture(scope="module")
def board_kind():
    return "sim"  # tests/test_aio_cpython.py: "linux"


@pytest.fixture
def board(board_kind):
    """board(app, host, port, **config) -> the running Board; every board is ended after the test."""
    started = []

    def start(app, host, port, **config):
        env = dict(config, BROKER_HOST=host, BROKER_PORT=port, CLIENT_ID="b%d%s" % (config.get("VERSION", 0), uid()))
        b = tools.sim.start_app(os.path.join(APPS, app), env=env, board=board_kind)
        b.config = env
        started.append(b)
        return b

    yield start
    for b in started:
        b.close()


def result(b, timeout=15.0):
    """The board's RESULT, once it has exited cleanly."""
    rc = b.wait(timeout)
    assert rc == 0, "the board failed (exit %d)\n%s" % (rc, b)
    res = b.results()
    assert len(res) == 1, b
    return res[0]


class Msg:
    def __init__(self, p):
        self.topic, self.payload, self.qos, self.retain, self.dup = p.topic, bytes(p.payload), p.qos, p.retain, p.dup
        self.props = dict(p.props or {})

    def __repr__(self):
        return "<%s %r q%d r%d d%d>" % (self.topic, self.payload, self.qos, self.retain, self.dup)


class Peer:
    """The CPython end: the blocking Client, connected, recording what it receives; the test loops it."""

    def __init__(self, broker, version=5, **kw):
        self.msgs = []
        self.c = Client(broker.host, broker.port, client_id="p%d%s" % (version, uid()), version=version,
                        reconnect=False, **kw)
        self.c.on_message = lambda p: self.msgs.append(Msg(p))
        self.c.connect()

    def on(self, topic):
        return [m for m in self.msgs if m.topic == topic]

    def payloads(self, topic):
        return [m.payload for m in self.msgs if m.topic == topic]

    def publish(self, topic, payload, qos=0, retain=False, props=None):
        """Publishes and waits until the flow is complete."""
        pid = self.c.publish(topic, payload, qos, retain, props)
        assert not qos or self.c.wait_for(pid, 5), "no ack for %r" % payload

    def close(self):
        self.c.disconnect()


@pytest.fixture
def peers():
    """peers(broker, version, **options) -> a connected Peer; all are disconnected after the test."""
    made = []

    def make(broker, version=5, **kw):
        made.append(Peer(broker, version, **kw))
        return made[-1]

    yield make
    for p in made:
        p.close()


def until(done, timeout=5.0, peers=()):
    """Loops the peers until done() or the timeout; returns done()."""
    end = time.monotonic() + timeout
    while True:
        ok = done()
        if ok or time.monotonic() > end:
            return ok
        for p in peers:
            p.c.loop(0.005)
        if not peers:
            time.sleep(0.005)


def idle(peers, seconds):
    until(lambda: False, seconds, peers)


def received(log, client_id):
    """What the broker's log says it received from client_id: [(packet name, details)]."""
    return re.findall(r"Received (\w+) from %s(?: \((.*)\))?$" % re.escape(client_id), log, re.M)


@pytest.fixture
def prefix():
    return "sb/%s/" % uid()


# ------------------------------------------------------------------------------------------ will and status

@pytest.mark.parametrize("version", VERSIONS)
def test_will_published_when_the_board_crashes(broker, board, peers, prefix, version):
    watch = peers(broker, version)
    watch.c.subscribe(prefix + "status", 1)
    b = board("status.py", broker.host, broker.port, VERSION=version, PREFIX=prefix, END="crash")
    assert until(lambda: b.line("RESULT") or b.proc.poll() is not None, 10, [watch]), b
    late = peers(broker, version)  # a subscriber that comes later gets the retained status
    late.c.subscribe(prefix + "status", 1)
    assert until(lambda: late.msgs, 5, [late])
    assert [(m.payload, m.retain) for m in late.msgs] == [(b"online", True)]
    watch.publish(prefix + "ctl", b"end", 1)
    res = result(b)
    assert res == {"connected": True, "present": False, "code": 0}
    assert until(lambda: len(watch.msgs) >= 2, 5, [watch]), watch.msgs
    idle([watch], 0.1)
    online, will = watch.msgs
    assert (online.payload, will.payload, will.qos) == (b"online", b"offline", 1)
    if version == 5:
        assert will.props[P.CONTENT_TYPE] == "text/plain"
        assert will.props[P.USER_PROPERTY] == [("board", "sim")]
    again = peers(broker, version)
    again.c.subscribe(prefix + "status", 1)
    assert until(lambda: again.msgs, 5, [again])
    assert [(m.payload, m.retain) for m in again.msgs] == [(b"offline", True)]
    watch.publish(prefix + "status", b"", 1, retain=True)


@pytest.mark.parametrize("version", VERSIONS)
def test_status_offline_published_by_the_board_and_no_will(broker, board, peers, prefix, version):
    watch = peers(broker, version)
    watch.c.subscribe(prefix + "status", 1)
    b = board("status.py", broker.host, broker.port, VERSION=version, PREFIX=prefix, END="graceful")
    assert until(lambda: b.line("RESULT") or b.proc.poll() is not None, 10, [watch]), b
    watch.publish(prefix + "ctl", b"end", 1)
    assert result(b)["code"] == 0
    assert until(lambda: len(watch.msgs) >= 2, 5, [watch])
    idle([watch], 0.2)  # a Will would come now
    assert [m.payload for m in watch.msgs] == [b"online", b"offline"]
    late = peers(broker, version)
    late.c.subscribe(prefix + "status", 1)
    assert until(lambda: late.msgs, 5, [late])
    assert [(m.payload, m.retain) for m in late.msgs] == [(b"offline", True)]
    watch.publish(prefix + "status", b"", 1, retain=True)


# ------------------------------------------------------------------------------------------ QoS both ways

@pytest.mark.parametrize("qos", [0, 1, 2])
@pytest.mark.parametrize("version", VERSIONS)
def test_qos_both_directions(broker, board, peers, prefix, version, qos):
    n = 20
    peer = peers(broker, version)
    peer.c.subscribe(prefix + "out", 2)
    b = board("qos.py", broker.host, broker.port, VERSION=version, PREFIX=prefix, QOS=qos, N=n)
    assert until(lambda: b.line("READY") or b.proc.poll() is not None, 10, [peer]), b
    for i in range(n):
        peer.publish(prefix + "in", b"c%d" % i, qos)
    assert until(lambda: b.proc.poll() is not None and len(peer.msgs) >= n, 10, [peer]), b
    res = result(b)
    # The board received every message once, in order, at the QoS it was published with.
    assert res["got"] == [["c%d" % i, qos, False] for i in range(n)]
    # The board's messages reached the peer once each, in order; every flow completed.
    assert res["inflight"] == 0
    assert res["codes"] == [0] * (n // 2)
    assert [(m.payload, m.qos, m.dup) for m in peer.msgs] == [(b"m%d" % i, qos, False) for i in range(n)]


# ------------------------------------------------------------------------------------------ keep-alive

@pytest.fixture(scope="module")
def keepalive_run(board_kind):
    """Three clients (3.1, 3.1.1, 5.0) on one board, keepalive 2 s, idle 5 s: (RESULT, client id, broker log);
    every board kind runs it at the same time (tests/support/keepalive_runs.py)."""
    return keepalive_runs.result(board_kind)


@pytest.mark.parametrize("version", VERSIONS)
def test_keepalive_pings_while_idle(keepalive_run, version):
    res, cid, log = keepalive_run
    r = res[str(version)]
    assert r["connected"] and not r["pinging"], r
    # Nothing but two PINGREQs in 5 s idle at a 2 s keepalive, each answered.
    me = cid + "v%d" % version
    assert "as %s (p%d, c1, k2)" % (me, {3: 1, 4: 2, 5: 5}[version]) in log  # mosquitto's protocol numbers
    assert [t for t, _ in received(log, me)] == ["PINGREQ", "PINGREQ", "DISCONNECT"]
    assert log.count("Sending PINGRESP to %s" % me) == 2


# ------------------------------------------------------------------------------------------ topic aliases

def test_v5_topic_aliases(broker, board, peers, prefix):
    seq = []
    for r in range(8):  # six hot topics, and a cold one in turn: 13 topics for mosquitto's 10 aliases
        seq += list(range(6)) + [6 + r % 7]
    peer = peers(broker, 5)
    peer.c.subscribe(prefix + "#", 1)
    b = board("aliases.py", broker.host, broker.port, VERSION=5, PREFIX=prefix, SEQ=seq)
    res = result(b)
    assert res["alias_max"] == 10, "mosquitto's default max_topic_alias"
    # What went on the wire is what TopicAliases decides: a new topic with its alias, a known one alone.
    model = TopicAliases(10)
    sent = [prefix + "t%d" % i for i in seq]
    want = [0 if model.lookup(t.encode()) < 0 else len(t) for t in sent]
    assert res["topic_lengths"] == want
    assert want.count(0) >= 6 * 7, "the hot topics went as aliases after the first round"
    assert len(want) - want.count(0) > 10, "aliases were reassigned when they ran out"
    assert res["codes"] == [0] * len(sent)
    # The broker resolved every alias to the right topic.
    assert until(lambda: len(peer.msgs) >= len(sent), 5, [peer])
    assert [(m.topic, m.payload) for m in peer.msgs] == [(t, t[len(prefix):].encode()) for t in sent]


# ------------------------------------------------------------------------------------------ reconnect

@pytest.mark.parametrize("version", VERSIONS)
def test_reconnect_resumes_the_session_and_completes_every_flow(make_broker, board, peers, prefix, version):
    n = 3
    br = make_broker(extra_conf="log_type all")
    watch = peers(br, version)
    watch.c.subscribe([(prefix + "data", 2), (prefix + "will", 1)])
    with Proxy(br.host, br.port) as px:
        b = board("reconnect.py", px.host, px.port, VERSION=version, PREFIX=prefix, N=n, CTRL_PORT=br.port)
        cid = b.config["CLIENT_ID"]
        assert until(lambda: b.line("READY") or b.proc.poll() is not None, 10, [watch]), b
        # 1. The board publishes at QoS 1 and 2; the broker gets it all, its acks are lost on the way back.
        px.silence(up=False, down=True)
        watch.publish(prefix + "ctl", b"pub", 1)
        assert until(lambda: b.seen("SENT") and px.dropped_down >= 2 * n * 4, 5, [watch]), b
        # 2. The broker sends to the board at QoS 1 and 2; the board's acks are lost on the way out.
        px.silence(up=True, down=False)
        for i in range(2):
            watch.publish(prefix + "cmd", b"c1-%d" % i, 1)
            watch.publish(prefix + "cmd", b"c2-%d" % i, 2)
        assert until(lambda: len(b.seen("GOT")) >= 4 and px.dropped_up >= 4 * 4, 5, [watch]), b
        # 3. The link dies without DISCONNECT: the Will goes out; what is published meanwhile waits.
        px.resume()
        px.cut()
        watch.publish(prefix + "cmd", b"c1-late", 1)
        watch.publish(prefix + "cmd", b"c2-late", 2)
        assert until(lambda: watch.on(prefix + "will"), 5, [watch]), "no Will\n%r" % b
        # 4. The board reconnects, resumes the session, resends; every flow completes.
        assert until(lambda: b.seen("DONE") and len(b.seen("GOT")) >= 8, 10, [watch]), b
        assert px.accepted == 2
        watch.publish(prefix + "ctl", b"end", 1)
        res = result(b)
    idle([watch], 0.1)
    log = br.log_text()
    assert len(res["connects"]) == 2 and res["connects"][1], "the second CONNACK has session present"
    assert b.seen("DONE")[0] == "DONE " + str([0] * (2 * n)), "every awaited publish completed"
    # Resent with DUP; at least once at QoS 1 and exactly once at QoS 2, both ways.
    pubs = [d for t, d in received(log, cid) if t == "PUBLISH"]
    assert sum(d.startswith("d1, q1") for d in pubs) == n and sum(d.startswith("d1, q2") for d in pubs) == n, pubs
    data = watch.payloads(prefix + "data")
    for i in range(n):
        assert data.count(b"q1-%d" % i) >= 1 and data.count(b"q2-%d" % i) == 1, data
    assert [m.payload for m in watch.on(prefix + "will")] == [b"lost"]
    got = [p for p, q, dup in res["got"]]
    for p in ("c2-0", "c2-1", "c2-late", "c1-late"):
        assert got.count(p) == 1, res["got"]
    assert got.count("c1-0") >= 1 and got.count("c1-1") >= 1, res["got"]
    assert len(re.findall(r"Sending PUBLISH to %s \(d1, q2" % cid, log)) == 2, "the broker resent its QoS 2 PUBLISHes"


# ------------------------------------------------------------------------------------------ heap (MicroPython)

HEAP_FIGURES = [  # (report label, figure keys in the board's RESULT)
    ("imports from .py source: tinymqtt.aio, its modules and the port (B)", ["imports"]),
    ("Session alone, max_packet_size 1024 / max_inflight 8 / receive_maximum 8 (B)", ["session"]),
    ("AsyncClient, same limits: constructed / connect() adds (B)", ["client", "connect"]),
    ("session publish + server acks q0/q1/q2 (B/msg)", ["session publish+acks q%d" % q for q in range(3)]),
    ("  ... allocation-free under heap_lock", ["session publish+acks q%d heap_lock" % q for q in range(3)]),
    ("session receive q0/q1/q2 (B/msg)", ["session receive q%d" % q for q in range(3)]),
    ("aio publish_nowait + flush q0/q1/q2 (B/msg)", ["aio publish_nowait+flush q%d" % q for q in range(3)]),
    ("aio await publish q0/q1/q2 (B/msg)", ["aio await publish q%d" % q for q in range(3)]),
    ("aio receive, handler q0/q1/q2 (B/msg)", ["aio receive q%d (handler)" % q for q in range(3)]),
    ("aio receive, messages() q0/q1/q2 (B/msg)", ["aio receive q%d (messages())" % q for q in range(3)]),
    ("sim's own I/O: jsnet write + awaited read (B)", ["sim bridge write+read"]),
]


def test_heap_figures(broker, board, board_kind, peers, prefix):
    if board_kind != "sim":
        pytest.skip("gc.mem_alloc() is MicroPython's")
    peer = peers(broker, 5)
    payload = b"0123456789abcdef"
    with Proxy(broker.host, broker.port) as px:  # its byte count paces the messages the board receives
        b = board("heap.py", px.host, px.port, VERSION=5, PREFIX=prefix, WARMUP=20, N=100)
        for _ in range(6):
            line = until(lambda: b.line("RX") or b.proc.poll(), 30, [peer])
            assert isinstance(line, str), b
            mode, q, n = line.split()[1:]
            q, ack = int(q), (0, 4, 8)[int(q)]  # the board's PUBACK, or PUBREC + PUBCOMP
            for _ in range(int(n)):  # one message at a time: mosquitto 2.0.11 overruns Receive Maximum at QoS 2
                up = px.up
                peer.publish(prefix + mode, payload, q)
                if q:
                    assert until(lambda: px.up >= up + ack or b.proc.poll() is not None, 5, [peer]), b
                else:
                    idle([peer], 0.002)
        res = result(b, 60)
    for label, keys in HEAP_FIGURES:
        record("MicroPython heap: " + label, " / ".join(str(res[k]) for k in keys))
    # Ceilings, so a regression shows: the session's publish path allocates nothing at all.
    assert all(res["session publish+acks q%d heap_lock" % q] for q in range(3)), res
    assert all(res["session receive q%d" % q] <= 32 for q in range(3)), res
    assert res["client"] + res["connect"] < 8000, res


# ------------------------------------------------------------------------------------------ the sim itself

@pytest.mark.parametrize("version", VERSIONS)
def test_simulated_network_down_and_up(broker, board, board_kind, peers, prefix, version):
    if board_kind != "sim":
        pytest.skip("only the simulated board has a network switch")
    peer = peers(broker, version)
    b = board("network.py", broker.host, broker.port, VERSION=version, PREFIX=prefix)
    assert until(lambda: b.line("READY") or b.proc.poll() is not None, 10), b
    b.toggle_network()  # down: the socket is destroyed, reconnects fail in network_up()
    assert until(lambda: len(b.seen("DOWN")) >= 3, 5), b
    assert "simulated network is down" in b.seen("DOWN")[-1], b
    peer.publish(prefix + "cmd", b"while-down", 1)  # kept for the board by its session
    b.toggle_network()
    assert until(lambda: b.seen("GOT"), 5, [peer]), b
    peer.publish(prefix + "cmd", b"end", 1)
    res = result(b)
    assert res["got"] == ["while-down", "end"]
    assert len(res["connects"]) == 2 and res["connects"][1]


def test_tools_sim_command_line(broker, tmp_path):
    app = tmp_path / "app.py"
    app.write_text("import config, sys\nprint('on', sys.implementation.name, config.BROKER_HOST, config.BROKER_PORT)\n"
                   "raise ValueError('the exit code passes through')\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([tools.sim.REPO] + sys.path))
    for kind, impl in (("sim", "micropython"), ("linux", "cpython")):
        done = subprocess.run([sys.executable, "-m", "tools.sim", "run", "--board", kind, "--broker", "10.1.2.3:1999",
                               str(app)], capture_output=True, text=True, timeout=30, env=env, cwd=tools.sim.REPO)
        assert done.stdout == "on %s 10.1.2.3 1999\n" % impl and done.returncode == 1, done
        assert "ValueError: the exit code passes through" in done.stderr
    root = tmp_path / "board"  # a board tree run as it is
    tools.sim.assemble("print('tree')\n", str(root))
    done = subprocess.run([sys.executable, "-m", "tools.sim", "run", "--root", str(root)], capture_output=True,
                          text=True, timeout=30, env=env, cwd=tools.sim.REPO)
    assert (done.returncode, done.stdout) == (0, "tree\n"), done
