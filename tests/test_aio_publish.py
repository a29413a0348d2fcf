# The asyncio client's publish() without a coroutine of its own (see aio.py): what it returns at each QoS, and
# the one path that still waits inside publish(): every in-flight slot taken, so it publishes once a flow ends.
# (Scripted fake server: the order of the packets is the point.) And `async with`, against a real mosquitto.
import asyncio

import pytest

import tinymqtt_port
from tests.support.fakebroker import FakeBroker
from tinymqtt.aio import AsyncClient
from tinymqtt.errors import ConnectionLost
from tinymqtt.packets import Packet, PUBLISH, PUBACK, PUBREC, PUBREL, PUBCOMP


async def test_publish_waits_for_a_free_slot_then_publishes_and_returns_each_flows_result():
    def server(fb):
        fb.handshake()
        fb.expect(PUBLISH, qos=0, payload=b"q0", timeout=10)
        first = fb.expect(PUBLISH, qos=1, payload=b"1", timeout=10)
        fb.expect_nothing(0.3)  # the only slot is taken: "2" waits for the PUBACK of "1"
        fb.send(Packet(PUBACK, pid=first.pid))
        second = fb.expect(PUBLISH, qos=2, payload=b"2", timeout=10)
        fb.send(Packet(PUBREC, pid=second.pid, reason=0x10))
        fb.expect(PUBREL, pid=second.pid, timeout=10)
        fb.send(Packet(PUBCOMP, pid=second.pid))

    fb = FakeBroker(5)
    c = AsyncClient("127.0.0.1", fb.port, version=5, client_id="t1", port_impl=tinymqtt_port, max_inflight=1)
    fb.start(server)
    try:
        await c.connect()
        assert await c.publish("t", b"q0") is None  # QoS 0: written, nothing to wait for
        assert await c.publish("t", b"1", 1, wait=False) is None  # (publish_nowait() gives packet ids)
        assert await asyncio.wait_for(c.publish("t", b"2", 2), 10) == 0  # PUBCOMP: delivered
        await asyncio.get_running_loop().run_in_executor(None, fb.join)
        assert not c._done and not c.session.flights.count
    finally:
        await c.close()
        fb.stop()


class _DrainFailsOnce:
    """tinymqtt_port, but the first stream's drain() after the CONNACK fails as a link dying under a write would."""

    def __init__(self):
        self.streams = 0

    def __getattr__(self, name):
        return getattr(tinymqtt_port, name)

    async def open_stream(self, host, port, tls=None):
        st = await tinymqtt_port.open_stream(host, port, tls)
        self.streams += 1
        if self.streams == 1:
            drain, calls = st.drain, [0]

            async def failing():
                calls[0] += 1
                if calls[0] == 2:  # (the first drain is CONNECT's)
                    raise ConnectionLost(0x80, "link died under the write")
                return await drain()
            st.drain = failing
        return st


async def test_a_link_that_dies_under_the_publish_write_still_ends_the_await_with_the_flows_result():
    # The drain of publish()'s write fails: the link closes, the session keeps the QoS 1 message and resends it on
    # the next connection, and `await publish()` returns when that flow ends (0: PUBACK), not None at the failure.
    def server(fb):
        fb.handshake()
        fb.expect(PUBLISH, qos=1, payload=b"x", timeout=10)  # (the write went out; only its drain failed)
        fb.close()
        fb.handshake(session_present=True)
        again = fb.expect(PUBLISH, qos=1, payload=b"x", timeout=10)
        fb.send(Packet(PUBACK, pid=again.pid))

    fb = FakeBroker(5)
    port = _DrainFailsOnce()
    c = AsyncClient("127.0.0.1", fb.port, version=5, client_id="t1", port_impl=port, clean=False,
                    backoff_min_ms=10, backoff_max_ms=40)
    fb.start(server)
    try:
        await c.connect()
        assert await asyncio.wait_for(c.publish("t", b"x", 1), 10) == 0
        assert port.streams == 2 and not c.session.flights.count
        await asyncio.get_running_loop().run_in_executor(None, fb.join)
    finally:
        await c.close()
        fb.stop()


AW_APP = """
import asyncio
from tinymqtt.aio import AsyncClient
async def main():
    async with AsyncClient(%r, %d, client_id="aw%%d" %% %d, version=4, reconnect=False) as c:
        print(c.is_connected())
    print(c.is_connected(), c.transport)
asyncio.run(main())
"""


@pytest.mark.parametrize("interpreter", ["cpython", "micropython"])
def test_async_with_connects_then_disconnects(broker, interpreter):
    # AsyncClient.__aexit__ hands `async with` disconnect()'s own coroutine to await (no coroutine of its own):
    # the block runs connected and the link is closed when it ends, under CPython's asyncio and MicroPython's.
    import os
    import subprocess
    import sys
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    code = AW_APP % (broker.host, broker.port, os.getpid())
    paths = os.path.join(repo, "lib") + os.pathsep + os.path.join(repo, "ports", "linux")
    if interpreter == "cpython":
        cmd, env = [sys.executable, "-c", code], dict(os.environ, PYTHONPATH=paths)
    else:
        mp = os.path.join(repo, ".venv", "bin", "micropython")
        if not os.path.exists(mp):
            pytest.skip("no unix-port micropython")
        cmd, env = [mp, "-c", code], {"MICROPYPATH": ".frozen" + os.pathsep + paths}
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.split() == ["True", "False", "None"]
