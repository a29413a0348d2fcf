# How connect() ends when no CONNACK comes, for both clients (scripted fake server: what the server does not send
# is the point): a link that ends first ends connect() with the link's error at once, also with reconnect on (the
# reconnect is loop()'s / the reader task's job afterwards); a server that stays silent ends it at the timeout
# with ConnectionLost 0x88. Either way on_disconnect and last_error have the error, and no link stays open.
import asyncio

import pytest

import tinymqtt_port
from tests.support.fakebroker import FakeBroker
from tinymqtt.aio import AsyncClient
from tinymqtt.client import Client
from tinymqtt.errors import ConnectionLost
from tinymqtt.packets import CONNECT, PUBLISH


def cut_after_connect(fb):
    fb.wait_connection()
    fb.expect(CONNECT)
    fb.close()


def silent_after_connect(fb):
    fb.wait_connection()
    fb.expect(CONNECT)
    fb.expect_closed(timeout=20)  # the client gives up and closes


async def connect(api, script, timeout):
    """(the error connect() raised, the client, the errors on_disconnect heard)"""
    fb = FakeBroker(5)
    cls = AsyncClient if api == "aio" else Client
    c = cls("127.0.0.1", fb.port, version=5, client_id="ce", port_impl=tinymqtt_port, backoff_min_ms=50)
    heard = []
    c.on_disconnect = heard.append
    fb.start(script)
    try:
        with pytest.raises(ConnectionLost) as e:
            if api == "aio":
                await c.connect(timeout)
            else:
                await asyncio.get_running_loop().run_in_executor(None, c.connect, timeout)
        await asyncio.get_running_loop().run_in_executor(None, fb.join)
        return e.value, c, heard
    finally:
        if api == "aio":
            await c.close()
        fb.stop()


@pytest.mark.parametrize("api", ["blocking", "aio"])
async def test_a_link_cut_before_connack_ends_connect_with_its_error(api):
    err, c, heard = await connect(api, cut_after_connect, 30)
    assert err.reason != 0x88  # the link's own error, not the timeout's (30 s)
    assert c.last_error is err and heard == [err] and c.transport is None
    if api == "aio":
        assert c._tasks == ()  # connect() stopped the reader and ticker it had started


@pytest.mark.parametrize("api", ["blocking", "aio"])
async def test_no_connack_within_the_timeout_ends_connect_with_0x88(api):
    err, c, heard = await connect(api, silent_after_connect, 0.5)
    assert err.reason == 0x88 and c.last_error is err and heard == [err] and c.transport is None


@pytest.mark.parametrize("api", ["blocking", "aio"])
async def test_own_disconnect_is_an_end_with_no_error(api, broker):
    # README: every end of a connection calls on_disconnect(error), None for your own disconnect(), and sets
    # last_error (real mosquitto: the link was up, with an earlier error recorded from a first connection).
    cls = AsyncClient if api == "aio" else Client
    c = cls(broker.host, broker.port, version=4, client_id="ce-own-" + api, port_impl=tinymqtt_port)
    heard = []
    c.on_disconnect = heard.append
    c.last_error = ConnectionLost(0x80, "an earlier link's end")
    if api == "aio":
        await c.connect()
        await c.disconnect()
    else:
        c.connect()
        c.disconnect()
    assert heard == [None] and c.last_error is None and c.transport is None and not c.is_connected()


def cut_after_publish(fb):
    fb.handshake()
    fb.expect(PUBLISH)
    fb.close()  # no PUBACK: the flow cannot end on this link, and reconnect is off


@pytest.mark.parametrize("api", ["blocking", "aio"])
async def test_a_flow_awaited_when_the_link_dies_without_reconnect_ends(api):
    # README: with reconnect=False the blocking client raises ConnectionLost once the link is gone; an awaited
    # asyncio flow ends with None (no outcome: the session still holds the message, for a connect() of yours), and
    # an asyncio publish() waiting for a free slot raises ConnectionLost (its message was not queued).
    fb = FakeBroker(4)
    cls = AsyncClient if api == "aio" else Client
    c = cls("127.0.0.1", fb.port, version=4, client_id="ce-flow", port_impl=tinymqtt_port, reconnect=False,
            max_inflight=1)
    fb.start(cut_after_publish)
    try:
        if api == "aio":
            await c.connect()
            assert await asyncio.wait_for(c.publish("ce/t", b"x", 1), 10) is None
            with pytest.raises(ConnectionLost):  # its one slot is taken and no link can free it: not queued
                await asyncio.wait_for(c.publish("ce/t", b"y", 1), 10)
        else:
            await asyncio.get_running_loop().run_in_executor(None, c.connect)
            pid = c.publish("ce/t", b"x", 1)
            with pytest.raises(ConnectionLost):
                await asyncio.get_running_loop().run_in_executor(None, c.wait_for, pid, 10)
        assert c.transport is None and c.session.flights.count == 1  # kept for a new connection
    finally:
        if api == "aio":
            await c.close()
        fb.stop()
