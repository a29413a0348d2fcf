# The README's first programs, as a user copies them, run against a real mosquitto: the blocking one and the
# asyncio one. Only what a test must change is changed (the broker's address, and an end to the endless loop),
# and each change is checked to apply, so a README edit that breaks a program fails here.
import os
import re
import subprocess
import sys

from tinymqtt.client import Client

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = dict(os.environ, PYTHONPATH=os.pathsep.join(os.path.join(ROOT, p) for p in ("lib", "ports/linux")))


def programs():
    with open(os.path.join(ROOT, "README.md")) as f:
        return re.findall(r"```python\n(.*?)```", f.read(), re.S)


def edit(code, old, new):
    assert old in code, "the README's program no longer has %r" % old
    return code.replace(old, new)


def run(code, broker):
    code = edit(code, '("localhost",', '("%s", port=%d,' % (broker.host, broker.port))
    p = subprocess.run([sys.executable, "-c", code], env=ENV, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout


def retained(broker, topic, payload):
    c = Client(broker.host, broker.port, client_id="readme-setup")
    c.connect()
    c.publish(topic, payload, qos=1, retain=True)
    c.disconnect()


def test_the_blocking_program(make_broker):
    broker = make_broker()
    retained(broker, "site/sensor-7/cmd/led", b"on")
    code = edit(programs()[0], "while True:", "for _ in range(3):")
    out = run(code, broker)
    assert "site/sensor-7/cmd/led b'on'" in out
    status = []
    c = Client(broker.host, broker.port, client_id="readme-check", on_message=lambda m: status.append(bytes(m.payload)))
    c.connect()
    c.subscribe("site/sensor-7/status", 1)
    c.loop(1)
    assert status == [b"offline"]  # the program ended without disconnect(): the broker published its will
    c.disconnect()


def test_the_asyncio_program(make_broker):
    broker = make_broker()
    retained(broker, "cmd/led", b"on")
    code = edit(programs()[1], "print(msg.topic, msg.payload)", "print(msg.topic, msg.payload); break")
    assert "cmd/led b'on'" in run(code, broker)
