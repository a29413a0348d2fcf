# Run by tools/bench/call_costs.py under MicroPython: the CPU cost of one call on the publish and ack paths, with no
# I/O (no socket is opened: each client's session is driven to CONNECTED by a CONNACK fed into its buffer, and
# `out` is emptied after each call). Prints one line: RESULT {json}, microseconds per call, the best of ROUNDS
# loops of CALLS calls each (the least disturbed by the machine), as [[name, us with the heap locked, us], ...].
import json
import sys
import time

import micropython

import tinymqtt_port
from tinymqtt.aio import AsyncClient
from tinymqtt.client import Client
from tinymqtt.session import Session

ROUNDS, CALLS = int(sys.argv[1]), int(sys.argv[2])
TOPIC, PAYLOAD = "bench/calls", b"x" * 64
# Small buffers: the bench's 64 KB ones would put the allocator's searches for call frames into the figures
# (docs/micropython32.md, "The slow rounds")
OPTIONS = dict(client_id="calls", version=4, max_inflight=16, out_size=2048, max_packet_size=2048)


def connected(session):
    session.connect(0)
    session.outlen = 0
    session.inbuf[0:4] = b"\x20\x02\x00\x00"  # CONNACK, accepted
    session.received(4, 0)
    session.publish(TOPIC, PAYLOAD, 0)  # (the topic's encoding cached, as after a program's first publish)
    session.outlen = 0
    return session


plain = connected(Session(**OPTIONS))
blocking = Client("127.0.0.1", 1, reconnect=False, batch=True, port_impl=tinymqtt_port, **OPTIONS)
connected(blocking.session)
aio = AsyncClient("127.0.0.1", 1, reconnect=False, port_impl=tinymqtt_port, **OPTIONS)
connected(aio.session)
aio._tasks = ("running",)  # as after connect(): publish() leaves the message to a writer task (none waits here)


def session_publish():
    plain.publish(TOPIC, PAYLOAD, 0)
    plain.outlen = 0


def aio_session_publish():  # the asyncio client's session: app_acks.extended(Session)
    aio.session.publish(TOPIC, PAYLOAD, 0)
    aio.session.outlen = 0


def client_publish():
    blocking.publish(TOPIC, PAYLOAD, 0)
    blocking.session.outlen = 0


def aio_publish():
    aio.publish(TOPIC, PAYLOAD, 0, wait=False)
    aio.session.outlen = 0


def aio_event_puback():  # what the session calls for each PUBACK (an id nobody awaits)
    aio._event(4, 5, 0)


def nothing():
    pass


# One attribute read on each session: an instance attribute (found through MicroPython's map cache) and a default
# kept in the class (looked for in the instance's table first, to its next empty slot: how long that takes depends
# on how full the table is and where the name's hash falls; app_acks.extended(Session) has 4 attributes more)
def plain_found():
    return plain.outlen


def plain_class_default():
    return plain._server_max  # (3.x: the class's default, no server announces one)


def aio_found():
    return aio.session.outlen


def aio_class_default():
    return aio.session._server_max


def best_of(call, locked):
    # locked: under heap_lock(), where MicroPython keeps every call's frame on the C stack (the interpreter's own
    # cost); else frames larger than 11 words go on the heap, and the allocator's search for room is counted too
    # (it varies with the heap's layout: docs/micropython32.md, "The slow rounds")
    best = None
    for _ in range(ROUNDS):
        if locked:
            micropython.heap_lock()
        t = time.ticks_us()
        for _ in range(CALLS):
            call()
        t = time.ticks_diff(time.ticks_us(), t)
        if locked:
            micropython.heap_unlock()
        us = t / CALLS  # (a float: made once the heap is unlocked)
        best = us if best is None else min(best, us)
    return best


result = []  # [name, us with the heap locked, us], in this order (a MicroPython dict keeps none)
for name, call in (("loop", nothing), ("Session.publish q0", session_publish),
                   ("asyncio session's publish q0", aio_session_publish), ("Client.publish q0", client_publish),
                   ("AsyncClient.publish q0", aio_publish), ("AsyncClient._event PUBACK", aio_event_puback),
                   ("Session: an instance attribute", plain_found), ("Session: a class default", plain_class_default),
                   ("asyncio session: an instance attr.", aio_found),
                   ("asyncio session: a class default", aio_class_default)):
    result.append([name, best_of(call, True), best_of(call, False)])
print("RESULT " + json.dumps(result))
