# The examples, deployed by tools/deploy for the simulated board (real MicroPython 1.27 on Node, .mpy files,
# config.py) and run against a real mosquitto, checked from outside by a CPython subscriber (the blocking
# Client over ports/linux): telemetry's retained online/offline status and its Last Will, the command
# subscriber driving a pin and answering, MQTT 5 request/response, TLS (refused on the sim, verified on
# Linux under CPython against a TLS mosquitto with a CA made here), and the low-power loop whose
# machine.deepsleep (tests/fakes/machine.py) restarts the program and whose MQTT session survives it.
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid

import pytest

from tests.fakes import simboard
from tinymqtt import props as P
from tinymqtt.client import Client

pytestmark = pytest.mark.skipif(not simboard.available(), reason="needs node and the npm MicroPython (tools/bootstrap.sh)")


def uid():
    return uuid.uuid4().hex[:8]


class Msg:
    def __init__(self, p):
        self.topic, self.payload, self.retain, self.qos = p.topic, bytes(p.payload), p.retain, p.qos
        self.props = dict(p.props or {})

    def json(self):
        return json.loads(self.payload)

    def __repr__(self):
        return "<%s %r r%d>" % (self.topic, self.payload, self.retain)


class Watcher:
    """A CPython MQTT 5 client that records what arrives on its filters (and can publish)."""

    def __init__(self, broker, *filters):
        self.msgs = []
        self.c = Client(broker.host, broker.port, version=5, client_id="watch-" + uid(), reconnect=False)
        self.c.on_message = lambda p: self.msgs.append(Msg(p))
        self.c.connect()
        for f in filters:
            self.c.subscribe(f, 1)

    def on(self, topic):
        return [m for m in self.msgs if m.topic == topic]

    def wait(self, done, timeout=10.0, what="messages"):
        end = time.monotonic() + timeout
        while not done():
            assert time.monotonic() < end, "no %s within %.0f s; got %r" % (what, timeout, self.msgs)
            self.c.loop(0.02)
        return self.msgs

    def idle(self, seconds):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.c.loop(0.02)

    def publish(self, topic, payload, props=None):
        assert self.c.wait_for(self.c.publish(topic, payload, qos=1, props=props), 5)

    def close(self):
        self.c.disconnect()


@pytest.fixture
def watchers(broker):
    made = []

    def make(*filters):
        w = Watcher(broker, *filters)
        made.append(w)
        return w

    yield make
    for w in made:
        w.close()


def deployed(tmp_path, broker, app, *sets, board="sim", extra=()):
    """The board tree of an example for the sim (or another board), pointed at the broker."""
    prefix = "ex/" + uid()
    root = tmp_path / ("tree-" + uid())
    args = ["--broker", "%s:%d" % (broker.host, broker.port), "--client-id", "ex-" + uid(),
            "--set", "PREFIX=%r" % prefix] + list(extra)
    for s in sets:
        args += ["--set", s]
    rc, out, err = simboard.deploy(board, "examples/" + app, root, *args)
    assert rc == 0, err
    return root, prefix


# ------------------------------------------------------------------------------------------ telemetry

def test_telemetry_publishes_readings_between_online_and_offline(tmp_path, broker, watchers):
    root, prefix = deployed(tmp_path, broker, "telemetry.py", "COUNT=3", "PERIOD_MS=50")
    w = watchers(prefix + "/#")
    p = simboard.run(root, timeout=30)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "DONE" in p.stdout
    w.wait(lambda: len(w.msgs) >= 5)
    assert [(m.topic[len(prefix):], m.payload) for m in w.msgs if m.topic.endswith("/status")] == [
        ("/status", b"online"), ("/status", b"offline")]
    readings = [m.json() for m in w.on(prefix + "/telemetry")]
    assert [r["n"] for r in readings] == [1, 2, 3] and all(isinstance(r["t"], float) for r in readings)
    assert w.msgs[0].payload == b"online" and w.msgs[-1].payload == b"offline", "readings come in between"
    late = watchers(prefix + "/status")
    late.wait(lambda: late.msgs)
    assert late.msgs[0].payload == b"offline" and late.msgs[0].retain, "the broker keeps the last status"


def test_telemetry_will_says_offline_when_the_board_dies(tmp_path, broker, watchers):
    root, prefix = deployed(tmp_path, broker, "telemetry.py", "COUNT=0", "PERIOD_MS=50")
    w = watchers(prefix + "/status")
    with simboard.Running(root) as board:
        board.expect("SENT 2", 15.0)
        status = watchers(prefix + "/status")
        status.wait(lambda: status.msgs)
        assert status.msgs[0].payload == b"online" and status.msgs[0].retain
        board.proc.send_signal(signal.SIGKILL)  # power cut: no DISCONNECT, no clean "offline"
        board.proc.wait()
    w.wait(lambda: len(w.msgs) >= 2, what="the will")
    assert [m.payload for m in w.msgs] == [b"online", b"offline"]
    late = watchers(prefix + "/status")
    late.wait(lambda: late.msgs)
    assert late.msgs[0].payload == b"offline" and late.msgs[0].retain, "the will is retained"


# ------------------------------------------------------------------------------------------ command

@pytest.mark.parametrize("with_machine", [False, True], ids=["no-machine", "machine.Pin"])
def test_command_drives_the_pin_and_acknowledges(tmp_path, broker, watchers, with_machine):
    root, prefix = deployed(tmp_path, broker, "command.py", "LED_PIN='LED'")
    if with_machine:
        simboard.add_fakes(root, "machine")
    cmd, reply = prefix + "/cmd/led", prefix + "/cmd/led/reply"
    w = watchers(reply, prefix + "/mine")
    with simboard.Running(root) as board:
        board.expect("READY", 15.0)
        for c in ("on", "toggle", "bogus", "1"):
            w.publish(cmd, c.encode())
        w.wait(lambda: len(w.on(reply)) == 4, what="4 replies")
        assert [m.json() for m in w.on(reply)] == [
            {"cmd": "on", "ok": True, "led": 1}, {"cmd": "toggle", "ok": True, "led": 0},
            {"cmd": "bogus", "ok": False, "led": 0}, {"cmd": "1", "ok": True, "led": 1}]
        assert all(m.qos == 1 for m in w.on(reply))
        # an MQTT 5 caller names its own reply topic and correlation data
        w.publish(cmd, b"off", props={P.RESPONSE_TOPIC: prefix + "/mine", P.CORRELATION_DATA: b"req-7"})
        w.wait(lambda: w.on(prefix + "/mine"), what="the reply on the response topic")
        m = w.on(prefix + "/mine")[0]
        assert m.json() == {"cmd": "off", "ok": True, "led": 0} and m.props[P.CORRELATION_DATA] == b"req-7"
        w.publish(cmd, b"quit")
        assert board.wait(15.0) == 0, str(board)
        assert "DONE" in board.lines
        pins = [l for l in board.lines if l.startswith("FAKE-PIN")]
    if with_machine:
        assert pins == ["FAKE-PIN LED 0", "FAKE-PIN LED 1", "FAKE-PIN LED 0", "FAKE-PIN LED 1", "FAKE-PIN LED 0"]
    else:
        assert pins == [], "without machine the stand-in pin is used"


# ------------------------------------------------------------------------------------------ rpc

def test_rpc_answers_mqtt5_requests_with_their_correlation_data(tmp_path, broker, watchers):
    root, prefix = deployed(tmp_path, broker, "rpc.py")
    answers = prefix + "/answers/" + uid()
    w = watchers(answers)
    requests = [
        (b"c1", {"method": "add", "params": [1, 2, 39]}, {"result": 42}),
        (b"c2", {"method": "echo", "params": ["x", 5]}, {"result": ["x", 5]}),
        (b"c3", {"method": "board"}, {"result": "sim"}),
        (b"c4", {"method": "reboot"}, {"error": "no method 'reboot'"}),
    ]
    with simboard.Running(root) as board:
        board.expect("READY", 15.0)
        w.publish(prefix + "/rpc", b'{"method": "add", "params": [1]}')  # no Response Topic: dropped
        for corr, req, _ in requests:
            w.publish(prefix + "/rpc", json.dumps(req).encode(),
                      props={P.RESPONSE_TOPIC: answers, P.CORRELATION_DATA: corr})
        w.wait(lambda: len(w.msgs) >= 4, what="4 answers")
        w.publish(prefix + "/rpc", b"quit")
        assert board.wait(15.0) == 0, str(board)
    w.idle(0.2)
    got = {m.props[P.CORRELATION_DATA]: m for m in w.msgs}
    assert len(w.msgs) == 4, "the request without a Response Topic got no answer"
    for corr, _, want in requests:
        assert got[corr].json() == want
        assert got[corr].props[P.CONTENT_TYPE] == "application/json"


# ------------------------------------------------------------------------------------------ tls

def test_tls_on_the_sim_stops_with_the_ports_error(tmp_path, broker):
    root, _ = deployed(tmp_path, broker, "tls.py")
    p = simboard.run(root, timeout=30)
    assert p.returncode == 1
    assert "TLS connect failed: [Errno 95] EOPNOTSUPP: the simulated board has no TLS" in p.stdout
    assert "OSError: [Errno 95]" in p.stderr, "the example re-raises: the program ends with the error"


def make_certs(d):
    """A CA and a server certificate for localhost / 127.0.0.1 signed by it, and a second, unrelated CA."""
    if not shutil.which("openssl"):
        pytest.skip("openssl not installed")

    def ossl(*args):
        subprocess.run(["openssl"] + list(args), cwd=d, check=True, capture_output=True)

    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    ossl("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=tinymqtt test CA")
    ossl("req", "-x509", *ec, "-keyout", "other.key", "-out", "other.pem", "-days", "2", "-subj", "/CN=other CA")
    ossl("req", *ec, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=localhost")
    with open(os.path.join(d, "san.ext"), "w") as f:
        f.write("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    ossl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
         "-out", "server.pem", "-days", "2", "-extfile", "san.ext")


def run_linux_tree(root, timeout=30):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(root), os.path.join(str(root), "lib")]))
    return subprocess.run([sys.executable, "main.py"], cwd=str(root), env=env, capture_output=True, text=True,
                          timeout=timeout)


def test_tls_example_verifies_the_broker_against_the_ca(tmp_path, broker, make_broker):
    from tests.support.broker import free_port
    certs = tmp_path / "certs"
    certs.mkdir()
    make_certs(str(certs))
    tls_port = free_port()
    b = make_broker(extra_conf="listener %d 127.0.0.1\ncafile %s\ncertfile %s\nkeyfile %s\n" % (
        tls_port, certs / "ca.pem", certs / "server.pem", certs / "server.key"))
    common = ("TLS_PORT=%d" % tls_port, "TLS_SERVER_NAME='localhost'")
    root, prefix = deployed(tmp_path, b, "tls.py", *common, board="linux",
                            extra=["--source", "--ca", str(certs / "ca.pem")])
    assert (root / "ca.pem").read_bytes() == (certs / "ca.pem").read_bytes()
    p = run_linux_tree(root)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "CONNECTED over TLS to localhost" in p.stdout and "ECHO hello over TLS" in p.stdout
    # the same broker, checked against a CA that did not sign it: refused
    root, _ = deployed(tmp_path, b, "tls.py", *common, board="linux", extra=["--source", "--ca", str(certs / "other.pem")])
    p = run_linux_tree(root)
    assert p.returncode != 0 and "TLS connect failed" in p.stdout and "CERTIFICATE_VERIFY_FAILED" in p.stdout + p.stderr


# ------------------------------------------------------------------------------------------ low power

def test_lowpower_deep_sleeps_between_qos1_publishes_and_resumes_its_session(tmp_path, broker, watchers):
    root, prefix = deployed(tmp_path, broker, "lowpower.py", "COUNT=3", "SLEEP_MS=10", "LISTEN_MS=300",
                            "SESSION_EXPIRY=60")
    simboard.add_fakes(root, "machine")
    w = watchers(prefix + "/lowpower/data")
    wakes = []
    for wake in range(3):
        p = simboard.run(root, timeout=30)
        out = p.stdout.splitlines()
        woke = [json.loads(l[5:]) for l in out if l.startswith("WOKE ")]
        assert len(woke) == 1, p.stdout + p.stderr
        wakes.append(woke[0])
        rtc = [l[9:] for l in out if l.startswith("FAKE-RTC ")]
        if wake < 2:
            assert "DEEPSLEEP 10" in out, p.stdout + p.stderr  # machine.deepsleep ended the program...
            (root / "fake_rtc.bin").write_bytes(bytes.fromhex(rtc[-1]))  # ...and RTC memory survives it
        else:
            assert p.returncode == 0 and "DONE" in out and "DEEPSLEEP 10" not in out
        if wake == 0:  # sent while the board sleeps: the broker queues it in the board's session
            w.publish(prefix + "/lowpower/cmd", b"set-period-30")
    assert [x["seq"] for x in wakes] == [1, 2, 3]
    assert [x["resumed"] for x in wakes] == [False, True, True], "the session outlives the deep sleep"
    assert [x["cmds"] for x in wakes] == [[], ["set-period-30"], []], "a command queued during sleep arrives"
    w.wait(lambda: len(w.msgs) >= 3)
    assert [m.json()["seq"] for m in w.msgs] == [1, 2, 3] and all(m.qos == 1 for m in w.msgs)
