# The blocking client with manual_ack across a lost session: the application keeps a message (its Packet) and
# acks it later, after the link dropped and the new session reused its packet id for another message. That ack
# must send nothing; only the new message's own ack may acknowledge it. (Scripted fake server: the packets and
# their order are the point; tests/test_aio_acks.py is the asyncio client's side.)
import pytest

import tinymqtt_port
from tests.support.fakebroker import FakeBroker
from tinymqtt.client import Client
from tinymqtt.packets import Packet, PUBLISH, PUBACK, PUBREC, PUBREL, PUBCOMP

ACK = {1: PUBACK, 2: PUBREC}


def reused_id_after_lost_session(qos):
    """The server script both clients' tests run (tests/test_aio_acks.py too): message "old" with packet id 5, the
    link drops, a new session (not present) sends "new" with the same id; the client publishes "ready" once it has
    "old" and "mark" after acking it, and only the new message's own ack may come after "mark"."""
    def server(fb):
        fb.handshake()
        fb.send(Packet(PUBLISH, topic="m", payload=b"old", qos=qos, pid=5))
        fb.expect(PUBLISH, topic="ready", timeout=10)
        fb.close()
        fb.handshake(session_present=False)  # the session that sent "old" is gone; its id 5 is free again
        fb.send(Packet(PUBLISH, topic="m", payload=b"new", qos=qos, pid=5))
        fb.expect(PUBLISH, topic="mark", timeout=10)  # "old" was acked first: nothing may come before this
        fb.expect(ACK[qos], pid=5, timeout=10)  # the new message's own ack
        if qos == 2:
            fb.send(Packet(PUBREL, pid=5))
            fb.expect(PUBCOMP, pid=5, timeout=10)
        fb.expect_nothing(0.2)
    return server


@pytest.mark.parametrize("version,qos", [(5, 1), (5, 2), (4, 1), (4, 2)])
def test_a_held_message_from_a_lost_session_acknowledges_nothing_in_the_new_one(version, qos):
    fb = FakeBroker(version)
    c = Client("127.0.0.1", fb.port, version=version, client_id="t1", port_impl=tinymqtt_port, manual_ack=True,
               backoff_min_ms=10, backoff_max_ms=40)
    held = []
    c.on_message = held.append
    fb.start(reused_id_after_lost_session(qos))
    try:
        c.connect()
        fb.run(c, until=lambda: held)
        c.publish("ready", b"")
        fb.run(c, until=lambda: len(held) == 2)
        old, new = held
        assert (old.pid, new.pid) == (5, 5)
        c.ack(old)
        c.publish("mark", b"")
        c.ack(new)
        fb.run(c)
    finally:
        fb.stop(c)
