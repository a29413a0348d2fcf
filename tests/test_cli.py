# `python -m tinymqtt_cli pub|sub` as a user runs it (a subprocess, PYTHONPATH=lib:ports/linux:host) against a real
# mosquitto: -C/-v output, QoS 1 publishing, -N 1000 counted at a subscriber, --will-topic on a killed
# process, a one-line error with exit code 1 for a closed port (the CONNACK code for a refusal, as mosquitto),
# a password that never shows up; then the flags of issue 13 (-L -I -D -F -N -T -U -E -R --remove-retained -d -M).
import os
import select
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tinymqtt.client import Client

from tests.support.broker import free_port

ROOT = Path(__file__).resolve().parents[1]
ENV = dict(os.environ, PYTHONPATH="%s/lib:%s/ports/linux:%s/host" % (ROOT, ROOT, ROOT))
SECRET = "s3cr3t-Pa55w0rd"


def tinymqtt(*args):
    return [sys.executable, "-m", "tinymqtt_cli"] + [str(a) for a in args]


def run_cli(*args, timeout=30):
    return subprocess.run(tinymqtt(*args), cwd=ROOT, env=ENV, capture_output=True, timeout=timeout)


def start_cli(*args):
    return subprocess.Popen(tinymqtt(*args), cwd=ROOT, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def read_line(proc, timeout=10.0):
    """The next line the process prints (sub flushes each message), or fails after timeout."""
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    if not ready:
        proc.kill()
        pytest.fail("no output within %.0f s; stderr: %r" % (timeout, proc.communicate()[1]))
    return proc.stdout.readline()


@pytest.fixture
def topic():
    return "cli/%s" % uuid.uuid4().hex[:10]


@pytest.fixture
def client(broker):
    """An in-process 3.1.1 client (to watch, or to set retained markers); closed afterwards."""
    c = Client(broker.host, broker.port, client_id="cli-" + uuid.uuid4().hex[:10], version=4, reconnect=False)
    c.connect()
    yield c
    c.disconnect()


def set_retained(c, t, payload):
    assert c.wait_for(c.publish(t, payload, 1, retain=True), 5)


@pytest.fixture
def subscribed(broker, client):
    """subscribed(t, *flags) starts `sub -v -q 1 -t t/# ...` and returns once it is subscribed: a retained
    marker under t has come out first (it counts for -C). Markers are cleared once the test is over, as
    clearing one sends every current subscriber an empty message."""
    markers = []

    def start(t, *extra):
        markers.append(t + "/ready")
        set_retained(client, t + "/ready", b"go")
        proc = start_cli("sub", "-p", broker.port, "-v", "-q", 1, "-t", t + "/#", *extra)
        assert read_line(proc) == (t + "/ready go\n").encode()
        return proc

    yield start
    for m in markers:
        set_retained(client, m, b"")


def test_sub_count_verbose_and_pub_qos1(broker, subscribed, topic):
    proc = subscribed(topic, "-C", 3)
    for k in (1, 2):
        r = run_cli("pub", "-p", broker.port, "-t", "%s/m%d" % (topic, k), "-m", "hello %d" % k, "-q", 1)
        assert r.returncode == 0 and r.stdout == b"" and r.stderr == b"", r
    out, err = proc.communicate(timeout=10)
    assert proc.returncode == 0, err
    assert out == ("%s/m1 hello 1\n%s/m2 hello 2\n" % (topic, topic)).encode()  # -C 3: the marker was the 1st
    assert err == b""


@pytest.mark.parametrize("version", ["31", "311", "5"])
def test_pub_repeat_1000_qos1_all_counted(broker, client, topic, version):
    got = []
    client.subscribe(topic, 1, handler=lambda m: got.append(bytes(m.payload)))
    proc = start_cli("pub", "-p", broker.port, "-V", version, "-t", topic, "-m", "x", "-q", 1, "-N", 1000)
    deadline = time.monotonic() + 30
    while (proc.poll() is None or len(got) < 1000) and time.monotonic() < deadline:
        client.loop(0.01)
    out, err = proc.communicate(timeout=5)
    assert proc.returncode == 0, err
    client.loop(0.1)
    assert len(got) == 1000 and set(got) == {b"x"}
    assert err.startswith(b"published 1000 messages at QoS 1 in ") and err.count(b"\n") == 1, err


def test_pub_repeat_1000_qos1_counted_by_cli_sub(broker, subscribed, topic):
    proc = subscribed(topic, "-C", 1001)  # the marker, then 1000 messages
    r = run_cli("pub", "-p", broker.port, "-t", topic + "/n", "-m", "x", "-q", 1, "-N", 1000)
    assert r.returncode == 0, r
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == 0 and err == b"", err
    assert out.splitlines() == [(topic + "/n x").encode()] * 1000


def test_will_topic_published_when_the_process_dies(broker, client, subscribed, topic):
    wills = []
    client.subscribe(topic + "/will", 1, handler=lambda m: wills.append((bytes(m.payload), m.retain)))
    # A clean exit (-C 1 then DISCONNECT) discards the will; a pub that finishes normally too.
    quiet = subscribed(topic + "/a", "-C", 1, "--will-topic", topic + "/will",
                             "--will-payload", "not this one")
    quiet.communicate(timeout=10)
    assert quiet.returncode == 0
    r = run_cli("pub", "-p", broker.port, "-t", topic + "/b", "-m", "x", "--will-topic", topic + "/will",
                "--will-payload", "nor this one")
    assert r.returncode == 0, r
    killed = subscribed(topic + "/c", "--will-topic", topic + "/will", "--will-payload",
                              "gone", "--will-qos", 1, "--will-retain")
    killed.send_signal(signal.SIGKILL)  # no DISCONNECT: the broker publishes the will
    killed.communicate(timeout=5)
    deadline = time.monotonic() + 5
    while not wills and time.monotonic() < deadline:
        client.loop(0.05)
    client.loop(0.2)
    assert wills == [(b"gone", False)]
    late = run_cli("sub", "-p", broker.port, "-t", topic + "/will", "-C", 1, "-W", 5)  # --will-retain: stored
    assert late.stdout == b"gone\n", late
    set_retained(client, topic + "/will", b"")


@pytest.mark.parametrize("cmd", [["pub", "-t", "x", "-m", "y"], ["sub", "-t", "x", "-C", 1]])
def test_closed_port_gives_one_line_error_and_exit_code_1(cmd):
    r = run_cli(*cmd, "-p", free_port(), "-u", "user", "-P", SECRET)
    assert r.returncode == 1
    assert r.stdout == b""
    lines = r.stderr.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), r.stderr
    assert "refused" in lines[0].lower() and SECRET not in lines[0]


def _assert_secret_hidden(r):
    for stream in (r.stdout, r.stderr):
        assert SECRET.encode() not in stream, stream


def test_password_never_printed(broker, make_broker, client, topic):
    creds = ("-u", "user", "-P", SECRET, "-d")
    # Success, with debug output, on every protocol version.
    for v in ("31", "311", "5"):
        r = run_cli("pub", "-p", broker.port, "-V", v, "-t", topic, "-m", "hi", "-q", 1, *creds)
        assert r.returncode == 0, r
        _assert_secret_hidden(r)
    set_retained(client, topic + "/r", b"one")
    r = run_cli("sub", "-p", broker.port, "-t", topic + "/r", "-C", 1, "-v", *creds)
    assert r.returncode == 0 and r.stdout == (topic + "/r one\n").encode(), r
    _assert_secret_hidden(r)
    set_retained(client, topic + "/r", b"")
    # Errors: a broker refusing the credentials, a closed port, a 3.1 password without a user name.
    refusing = make_broker(extra_conf="allow_anonymous false")
    for cmd in (["pub", "-t", "x", "-m", "y"], ["sub", "-t", "x", "-C", 1]):
        for v in ("31", "311", "5"):
            r = run_cli(*cmd, "-p", refusing.port, "-V", v, *creds)
            assert r.returncode == (0x87 if v == "5" else 5), r  # mosquitto's: the CONNACK code
            errors = [l for l in r.stderr.splitlines() if not l.startswith(b"Client ")]  # -d lines aside
            assert len(errors) == 1 and errors[0].startswith(b"Error: ") and b"not authorized" in errors[0], r
            _assert_secret_hidden(r)
    r = run_cli("pub", "-p", free_port(), "-t", "x", "-m", "y", *creds)
    assert r.returncode == 1
    _assert_secret_hidden(r)
    r = run_cli("pub", "-p", broker.port, "-V", "31", "-t", "x", "-m", "y", "-P", SECRET, "-d")
    assert r.returncode == 1 and r.stderr.startswith(b"Error: ") and r.stderr.count(b"\n") == 1, r
    _assert_secret_hidden(r)
