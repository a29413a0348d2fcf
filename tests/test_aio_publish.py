# The asyncio client's publish() without a coroutine of its own (see aio.py): what it returns at each QoS, and
# the one path that still waits inside publish(): every in-flight slot taken, so it publishes once a flow ends.
# (Scripted fake server: the order of the packets is the point.)
import asyncio

import tinymqtt_port
from tests.support.fakebroker import FakeBroker
from tinymqtt.aio import AsyncClient
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
