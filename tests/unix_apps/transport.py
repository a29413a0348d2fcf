# Unix-port program (also run by CPython, for ports/linux): the transports of this tree's port (ports/linux,
# or ports/common under esp32 / picow) over real sockets against the test's scripted TCP server
# (config.SERVER_PORT), one connection per case, in the order the test serves them. Prints RESULT per case.
import json

import config
import tinymqtt_port as port
from tinymqtt.errors import ConnectionLost

HOST, PORT = "127.0.0.1", config.SERVER_PORT


def result(**kw):
    print("RESULT " + json.dumps(kw))


def outcome(fn):
    try:
        return {"value": fn()}
    except ConnectionLost as e:
        return {"lost": str(e)}
    except OSError as e:
        return {"oserror": e.args[0], "msg": str(e)}


port.network_up()
buf = bytearray(64)

# late: the server answers 4 bytes after 300 ms; a read gets them although the buffer is larger (the bug:
# a timed readinto() waited for 64 bytes, then raised ETIMEDOUT and lost the 4 it had).
t = port.open(HOST, PORT)
t.write(b"\x10\x02\x00\x00", 4)
first = t.readinto(buf, 0, 100)
n = 0
for i in range(50):
    n = t.readinto(buf, 0, 200)
    if n:
        break
late = bytes(buf[:n]).hex()
t.write(b"more", 4)
n = t.readinto(buf, 4, 5000)  # at an offset, as the session reads after half a packet
result(case="late", first=first, late=late, at_offset=bytes(buf[4:4 + n]).decode())
t.close()

# slow: 2 MB to a server that reads 256 KB, then pauses 100 ms, through a 64 KB send buffer (Linux: the
# kernel would otherwise take all 2 MB at once): partial sends go on until every byte is out, and a pause far
# shorter than the send timeout does not end the link. ports/linux's sends are counted.
big = bytearray(2 * 1024 * 1024)
for i in range(0, len(big), 4096):
    big[i] = (i // 4096) & 0xFF
sends = [0, 0]  # calls, calls that took only part of what was offered (or nothing)


class Counted:
    # ports/linux's socket with its sends counted (the transport sends with send() on CPython, write() on
    # MicroPython): every call, and each that took less than it was offered (busy: nothing)
    def __init__(self, sock):
        self.sock = sock

    def send(self, mv):
        sends[0] += 1
        sends[1] += 1
        k = self.sock.send(mv)
        sends[1] -= k == len(mv)
        return k

    def write(self, buf, off, n):
        sends[0] += 1
        sends[1] += 1
        k = self.sock.write(buf, off, n)
        sends[1] -= k == n
        return k

    def recv_into(self, mv):
        return self.sock.recv_into(mv)

    def readinto(self, mv):
        return self.sock.readinto(mv)

    def close(self):
        self.sock.close()


T = getattr(port, "Transport", None)  # ports/linux's (a board port re-exports only open())
t = port.open(HOST, PORT, timeout_ms=3000)
(getattr(t, "raw", None) or t.sock).setsockopt(1, 7, 65536)  # SOL_SOCKET, SO_SNDBUF (MicroPython names neither)
if T is not None:
    t.sock = Counted(t.sock)
t.write(big, len(big))
n = t.readinto(buf, 0, 20000)
result(case="slow", reply=bytes(buf[:n]).decode(), sends=sends)
t.close()

# stalled: the server reads nothing: after send_timeout_ms with no progress the link is declared dead.
t = port.open(HOST, PORT, timeout_ms=500)


def fill():
    for i in range(16):  # up to 32 MB: far more than the kernel buffers between us hold
        t.write(big, len(big))


result(case="stalled", r=outcome(fill))
t.close()

# closed and reset by the server
for case in ("closed", "reset"):
    t = port.open(HOST, PORT)
    t.write(b"x", 1)
    r = None
    for i in range(50):
        r = outcome(lambda: t.readinto(buf, 0, 200))
        if r != {"value": 0}:
            break
    result(case=case, r=r)
    t.close()

# refused: nothing listens on the port after the server's
result(case="refused", r=outcome(lambda: port.open(HOST, config.CLOSED_PORT)))

# heap: with the heap locked, 200 packets out and their echo back through the blocking transport, and 200
# writes through the asyncio one: any allocation would raise MemoryError.
try:
    import micropython
except ImportError:  # CPython: the same traffic, nothing to lock

    class micropython:
        heap_lock = heap_unlock = staticmethod(lambda: None)

pkt = bytearray(b"\x30\x3e\x00\x03a/b" + b"x" * 59)
loops = range(200)


def echoed(t):  # a function: at module level each new global name would allocate
    rounds = 0
    t.write(pkt, 64)  # the first read caches its view of the buffer, as a client's connect() does
    got = 0
    while got < 64:
        got += t.readinto(buf, 0, 2000)
    micropython.heap_lock()
    try:
        for i in loops:
            t.write(pkt, 64)
            got = 0
            while got < 64:
                got += t.readinto(buf, 0, 2000)
            rounds += 1
    finally:
        micropython.heap_unlock()
    return rounds


t = port.open(HOST, PORT)
result(case="heap blocking", rounds=echoed(t))
t.close()

import asyncio


async def aio():
    st = await port.open_stream(HOST, PORT)
    writes = 0
    micropython.heap_lock()
    try:
        for i in loops:
            st.write(pkt, 64)
            writes += 1
    finally:
        micropython.heap_unlock()
    await st.drain()
    got = 0
    while got < 200 * 64:
        await st.readable(buf, 0)
        got += st.readinto(buf, 0)
    st.close()
    result(case="heap asyncio", writes=writes, echoed=got)

asyncio.run(aio())
