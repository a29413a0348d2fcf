# Keeps docs/architecture.md's call traces true: the real blocking client (Linux port, real sockets) publishes,
# receives and reconnects against the scripted fake broker while sys.setprofile records every library and port
# function that runs (tests/support/calltrace.py), and each recorded tree must be the one the document shows.
#   python -m tests.test_architecture     prints the traces as the document holds them (after a deliberate change)
import os
import re
import select
import sys
import threading
import time

_HERE = os.path.dirname(os.path.abspath(__file__))
for _d in (os.path.join(_HERE, ".."), os.path.join(_HERE, "..", "lib"), os.path.join(_HERE, "..", "ports", "linux"),
           os.path.join(_HERE, "..", "host")):
    _d = os.path.normpath(_d)
    if _d not in sys.path:
        sys.path.insert(0, _d)

import tinymqtt_port  # noqa: E402
from tests.support.calltrace import trace, render  # noqa: E402
from tests.support.fakebroker import FakeBroker  # noqa: E402
from tinymqtt.client import Client  # noqa: E402
from tinymqtt.inflight import ticks_diff  # noqa: E402
from tinymqtt.packets import Packet, PUBLISH, PUBACK  # noqa: E402

DOC = os.path.join(_HERE, "..", "docs", "architecture.md")


def _wait_readable(c):
    # The next loop() must find the server's packet already there: one read, one trace.
    sock = c.transport.sock
    assert select.select([sock], [], [], 3)[0], "the fake broker sent nothing"
    time.sleep(0.05)  # (the whole packet, not its first bytes)


def scenarios(version):
    """{name: call tree lines} for one protocol version: a QoS 1 publish, a QoS 1 message received, and a
    reconnect after the server closed the link (the CONNECT, then the CONNACK that resumes the session)."""
    fb = FakeBroker(version)
    go = threading.Event()  # the test's thread is ready for the script's next step

    def server(fb):
        fb.handshake()
        p = fb.expect(PUBLISH, qos=1)  # the warm-up publish: the topic is cached once
        fb.send(Packet(PUBACK, pid=p.pid))
        p = fb.expect(PUBLISH, qos=1)  # the traced one
        fb.send(Packet(PUBACK, pid=p.pid))
        go.wait(3)
        go.clear()
        fb.send(Packet(PUBLISH, topic="a/b", payload=b"hi", qos=1, pid=7))
        fb.expect(PUBACK, pid=7)
        go.wait(3)
        fb.close()
        fb.handshake(session_present=True)

    opts = dict(clean=False) if version < 5 else dict(session_expiry=60)
    c = Client("127.0.0.1", fb.port, version=version, client_id="arch", port_impl=tinymqtt_port,
               backoff_min_ms=10, backoff_max_ms=20, **opts)
    c.on_message = lambda m: None
    traces = {}
    try:
        fb.start(server)
        c.connect()
        c.wait_for(c.publish("a/b", b"x", qos=1), 3)
        pid, traces["publish"] = trace(c.publish, "a/b", b"x", qos=1)
        assert c.wait_for(pid, 3)
        go.set()
        _wait_readable(c)
        _, traces["receive"] = trace(c.loop, 0)
        go.set()
        while c.transport:  # the server closes the link: loop() sees it and closes its side
            c.loop(0.05)
        while ticks_diff(c._next_try, tinymqtt_port.ticks_ms()) > 0:  # the backoff
            time.sleep(0.005)
        _, traces["reconnect"] = trace(c.loop, 0)
        _wait_readable(c)
        _, traces["connack"] = trace(c.loop, 0)
        assert c.is_connected() and c.session.session_present
        fb.join()
    finally:
        fb.stop(c)
    return {k: render(v) for k, v in traces.items()}


def documented():
    """{(name, version): lines} from docs/architecture.md's blocks headed `trace NAME VERSION`."""
    with open(DOC, encoding="utf-8") as f:
        text = f.read()
    out = {}
    for name, version, body in re.findall(r"<!-- trace (\w+) (\d) -->\n```text\n(.*?)```", text, re.S):
        out[(name, int(version))] = body.rstrip("\n").split("\n")
    return out


def test_the_documented_call_traces_are_what_runs():
    doc = documented()
    for version in (4, 5):
        for name, lines in scenarios(version).items():
            assert (name, version) in doc, "docs/architecture.md has no trace %s %d" % (name, version)
            assert lines == doc[(name, version)], "trace %s %d:\n%s" % (name, version, "\n".join(lines))


# The spines (issue 30): each step and the step that calls it, as docs/architecture.md names them
PUBLISH_SPINE = (
    ("client.Client.publish", None),
    ("session.Session.publish", "client.Client.publish"),  # the door, the size
    ("inflight.Inflight.add", "session.Session.publish"),  # the flow table
    ("packets.encode_publish", "session.Session.publish"),  # the codec's PUBLISH writer
    ("driver.Driver._write", "client.Client.publish"),  # the driver's write
    ("tinymqtt_port.Transport.write", "driver.Driver._write"),  # the port's write
)
RECEIVE_SPINE = {
    4: ("client.Client.loop", "client.Client._io", "tinymqtt_port.Transport.readinto", "session.Session.received",
        "session.Session._packet", "packets.read_publish", "session.Session._on_publish", "session.Session._deliver",
        "driver.Driver._event", "session.Session._acknowledge", "session.Session._pay", "session.Session._send",
        "driver.Driver._write", "tinymqtt_port.Transport.write"),
    5: ("client.Client.loop", "client.Client._io", "tinymqtt_port.Transport.readinto", "session5.Session5.received",
        "session.Session.received", "session5.Session5._packet", "packets.read_publish", "session.Session._on_publish",
        "session.Session._deliver", "driver.Driver._event", "session.Session._acknowledge", "session.Session._pay",
        "session.Session._send", "driver.Driver._write", "tinymqtt_port.Transport.write"),
}


def _callers(lines):
    """[(name, its caller's name or None)] of a rendered call tree, in call order."""
    out, stack = [], []
    for line in lines:
        depth = (len(line) - len(line.lstrip(" "))) // 4
        del stack[depth:]
        out.append((line.strip(), stack[-1] if stack else None))
        stack.append(line.strip())
    return out


def test_a_publish_is_the_same_calls_in_311_and_5():
    doc = documented()
    # the same calls, but for MQTT 5's check of the limits the server's CONNACK announced
    assert doc[("publish", 4)] == [line for line in doc[("publish", 5)] if "Session5._check5" not in line]


def test_the_publish_spine_is_the_six_steps_of_issue_30():
    # Client.publish -> Session.publish -> the flow table -> the codec's PUBLISH writer -> the driver's write -> the
    # port's write: each one call, made by the step the issue names before it (the codec's writer by the session)
    doc = documented()
    for version in (4, 5):
        spine = [c for c in _callers(doc[("publish", version)]) if c in PUBLISH_SPINE]
        assert spine == list(PUBLISH_SPINE), (version, spine)
    with open(DOC, encoding="utf-8") as f:
        text = " ".join(f.read().split())
    assert "The spine is %d calls, for MQTT 3.1.1 and for MQTT 5." % len(PUBLISH_SPINE) in text
    assert len(PUBLISH_SPINE) <= 6


def test_the_receive_spine_runs_in_order():
    doc = documented()
    with open(DOC, encoding="utf-8") as f:
        text = " ".join(f.read().split())
    for version in (4, 5):
        names = [line.strip() for line in doc[("receive", version)]]
        at = 0
        for step in RECEIVE_SPINE[version]:
            assert step in names[at:], (version, step)
            at = names.index(step, at) + 1
    assert ("The receive spine is %d calls for MQTT 3.1.1 and %d for MQTT 5"
            % (len(RECEIVE_SPINE[4]), len(RECEIVE_SPINE[5]))) in text


def test_the_documented_call_counts_are_the_traces():
    with open(DOC, encoding="utf-8") as f:
        text = " ".join(f.read().split())  # (the sentences wrap)
    doc = documented()
    assert "MQTT 3.1.1 runs %d calls" % len(doc[("publish", 4)]) in text
    assert "MQTT 5 runs %d calls" % len(doc[("publish", 5)]) in text
    assert "MQTT 3.1.1 runs %d calls on receive" % len(doc[("receive", 4)]) in text
    assert "MQTT 5 runs %d (" % len(doc[("receive", 5)]) in text


if __name__ == "__main__":
    for version in (4, 5):
        for name, lines in scenarios(version).items():
            print("<!-- trace %s %d -->\n```text\n%s\n```\n" % (name, version, "\n".join(lines)))
