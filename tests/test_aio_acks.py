# The asyncio client's acknowledgements across a lost session: a message received before the link dropped is
# still handed out by messages(), but its packet id belongs to a session the server no longer has. When the new
# session reuses that id for another message, taking or ack()ing the old one must send nothing: only the new
# message's own ack may acknowledge it. And a SUBSCRIBE or UNSUBSCRIBE awaited when the link drops is asked again
# on the next connection (an UNSUBSCRIBE only if the session was kept): its await must end there, not wait on.
# (Scripted fake server: the exact packets and their order are the point.)
import asyncio
import time

import pytest

import tinymqtt_port
from tests.support.fakebroker import FakeBroker
from tinymqtt.aio import AsyncClient
from tests.test_manual_ack_sessions import reused_id_after_lost_session
from tinymqtt.packets import Packet, SUBSCRIBE, UNSUBSCRIBE, SUBACK, UNSUBACK


async def until(cond, seconds=10):
    deadline = time.monotonic() + seconds
    while not cond():
        assert time.monotonic() < deadline, "condition not reached"
        await asyncio.sleep(0.01)


@pytest.mark.parametrize("manual", [False, True], ids=["taken", "manual_ack"])
@pytest.mark.parametrize("version,qos", [(5, 1), (5, 2), (4, 1), (4, 2)])
async def test_a_message_from_a_lost_session_acknowledges_nothing_in_the_new_one(version, qos, manual):
    fb = FakeBroker(version)
    c = AsyncClient("127.0.0.1", fb.port, version=version, client_id="t1", port_impl=tinymqtt_port,
                    backoff_min_ms=10, backoff_max_ms=40, manual_ack=manual)
    fb.start(reused_id_after_lost_session(qos))
    try:
        await c.connect()
        await c.publish("ready", b"", 0)
        await until(lambda: c._inbox_n == 2)  # both wait in the inbox: "old" from the first session
        it = c.messages()
        old = await asyncio.wait_for(it.__anext__(), 10)
        if manual:
            await c.ack(old)
        await c.publish("mark", b"", 0)
        new = await asyncio.wait_for(it.__anext__(), 10)
        assert (old.payload, old.pid, new.payload, new.pid) == (b"old", 5, b"new", 5)
        if manual:
            await c.ack(new)
        await asyncio.get_running_loop().run_in_executor(None, fb.join)
    finally:
        await c.close()
        fb.stop()


@pytest.mark.parametrize("present", [True, False], ids=["session_kept", "session_lost"])
@pytest.mark.parametrize("request_type", ["subscribe", "unsubscribe"])
async def test_a_request_awaited_across_a_dropped_link_ends_on_the_next_connection(request_type, present):
    sent, ack = (SUBSCRIBE, SUBACK) if request_type == "subscribe" else (UNSUBSCRIBE, UNSUBACK)

    def server(fb):
        fb.handshake()
        fb.expect(sent)
        fb.close()  # no answer: the link drops with the request in flight
        fb.handshake(session_present=present)
        if sent == UNSUBSCRIBE and not present:  # a new session has no subscription to remove: not asked again
            fb.expect_nothing(0.3)
            return
        again = fb.expect(sent, timeout=10)
        fb.send(Packet(ack, pid=again.pid, codes=[1]))

    fb = FakeBroker(5)
    c = AsyncClient("127.0.0.1", fb.port, version=5, client_id="t1", port_impl=tinymqtt_port,
                    backoff_min_ms=10, backoff_max_ms=40, clean=not present, session_expiry=60)
    fb.start(server)
    try:
        await c.connect()
        call = c.subscribe("a/b", 1) if request_type == "subscribe" else c.unsubscribe("a/b")
        await asyncio.wait_for(call, 10)  # (it ended at the new CONNACK or at the answer: both are the API's)
        await asyncio.get_running_loop().run_in_executor(None, fb.join)
    finally:
        await c.close()
        fb.stop()
