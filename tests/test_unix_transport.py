# The transports on MicroPython's unix port over real sockets: ports/linux (and, the same program, under
# CPython), and ports/common (the ESP32 / Pico W socket layer) with only `network` faked. A scripted TCP
# server here plays each case: a reply that arrives late and short (the 4-byte CONNACK issue 11 saw lost),
# a reader that pauses between reads (partial sends, and the send timeout that must not fire), a reader
# that stalls, a close, a reset, a refused connect, and packets through each transport with the heap locked
# (no allocation). Then a WLAN drop under a connected client on the board layers (the fake `network` only),
# blocking and asyncio. tests/unix_apps/transport.py and wlan_drop.py are the board side. ports/linux and the
# esp32 layer run on the 32-bit port too (tools/mp32.py).
import os
import socket
import struct
import threading
import uuid
import time

import pytest

from tests.support import report, unixport
from tests.support.broker import free_port

pytestmark = pytest.mark.skipif(not unixport.available(), reason="needs .venv/bin/micropython")
APP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "unix_apps", "transport.py")


def recv_exactly(c, n):
    data = bytearray()
    while len(data) < n:
        chunk = c.recv(n - len(data))
        if not chunk:
            break
        data += chunk
    return bytes(data)


def late(c):
    recv_exactly(c, 4)
    time.sleep(0.3)
    c.sendall(b"\x20\x02\x00\x00")
    c.sendall(recv_exactly(c, 4))


def slow(c):
    total, bad, size = 0, 0, 2 * 1024 * 1024
    while total < size:
        chunk = c.recv(min(256 * 1024, size - total))
        if not chunk:
            break
        for i in range(-total % 4096, len(chunk), 4096):  # each 4 KB block starts with its number
            bad += chunk[i] != ((total + i) // 4096) & 0xFF
        total += len(chunk)
        time.sleep(0.1)  # far shorter than the board's 3 s send timeout; long enough to fill its send buffer
    c.sendall(b"got %d bad %d" % (total, bad))


def stalled(c):
    time.sleep(8)  # reads nothing; the board gives up after 500 ms without progress and closes


def echo(c):
    while True:
        data = c.recv(65536)
        if not data:
            return
        c.sendall(data)


def closed(c):
    recv_exactly(c, 1)


def reset(c):
    recv_exactly(c, 1)
    c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close() sends RST


class Server:
    """Serves one case per accepted connection, in order, each in its own thread."""

    def __init__(self, cases):
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.errors = []
        self.thread = threading.Thread(target=self._serve, args=(list(cases),), daemon=True)
        self.thread.start()

    def _serve(self, cases):
        self.sock.settimeout(60)
        for case in cases:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._one, args=(case, c), daemon=True).start()

    def _one(self, case, c):
        try:
            with c:
                case(c)
        except OSError as e:
            if case is not stalled:
                self.errors.append("%s: %s" % (case.__name__, e))

    def close(self):
        self.sock.close()


BITS32 = [pytest.param(("linux", 32), id="linux-32bit"), pytest.param(("esp32", 32), id="esp32-32bit")]


@pytest.mark.parametrize("board", list(unixport.BOARDS + ("cpython",)) + BITS32)
def test_transport_on_real_sockets(board):
    board, bits = unixport.split(board)
    server = Server([late, slow, stalled, closed, reset, echo, echo])
    try:
        rc, out, res = unixport.run(APP, board, {"SERVER_PORT": server.port, "CLOSED_PORT": free_port()},
                                    timeout=90, bits=bits)
    finally:
        server.close()
    assert rc == 0, out
    r = {x["case"]: x for x in res}
    assert r["late"] == {"case": "late", "first": 0, "late": "20020000", "at_offset": "more"}, \
        "a read returns what has arrived"
    assert r["slow"]["reply"] == "got 2097152 bad 0", "every byte, in order, through a reader that pauses"
    if board in ("linux", "cpython"):
        calls, short = r["slow"]["sends"]
        assert short >= 1 and calls > short, "the case made partial sends (%d of %d)" % (short, calls)
        report.record("transport partial sends, 2 MB through a 64 KB send buffer (%s%s)"
                      % (board, ", 32-bit" if bits == 32 else ""),
                      "%d of %d send calls" % (short, calls))
    assert "took no data for 500 ms" in r["stalled"]["r"]["lost"], r["stalled"]
    assert "closed the connection" in r["closed"]["r"]["lost"]
    assert "104" in r["reset"]["r"]["lost"], r["reset"]
    refused = r["refused"]["r"]
    assert refused["oserror"] == 111, refused
    if board not in ("linux", "cpython"):
        assert refused["msg"].startswith("TCP connect to 127.0.0.1:") and "ECONNREFUSED" in refused["msg"]
    assert r["heap blocking"]["rounds"] == 200, "the blocking transport allocates nothing (heap locked)"
    assert r["heap asyncio"] == {"case": "heap asyncio", "writes": 200, "echoed": 200 * 64}, \
        "the asyncio transport's write allocates nothing (heap locked)"
    assert not server.errors, server.errors


@pytest.mark.parametrize("api", ["blocking", "aio"])
@pytest.mark.parametrize("board", ["esp32", "picow", pytest.param(("esp32", 32), id="esp32-32bit")])
def test_wlan_drop_under_a_connected_client(broker, board, api):
    board, bits = unixport.split(board)
    env = dict(BROKER_HOST=broker.host, BROKER_PORT=broker.port, CLIENT_ID="w" + uuid.uuid4().hex[:8],
               PREFIX="uw/%s/" % uuid.uuid4().hex[:8], API=api)
    rc, out, res = unixport.run(os.path.join(os.path.dirname(APP), "wlan_drop.py"), board, env, timeout=60, bits=bits)
    assert rc == 0, out
    r, = res
    assert r["got"] == ["one", "two"] and r["connects"] == 2, r
    assert r["lost"] >= 2, "the link loss, then at least one failed rejoin while the access point was gone"
    assert r["joins"] >= 3, "network_up() tried to join while the access point was gone, and again after"
    assert "WLAN: no access point named 'home'" in r["error"], r["error"]


@pytest.mark.parametrize("board", ["linux", "esp32"] + BITS32)
def test_asyncio_stream_drained_by_several_tasks_loses_no_byte(board):
    # tests/unix_apps/drains.py: two tasks drain and a third writes while the socket is full (MicroPython's own
    # Stream lost the third's bytes and never woke the first drain)
    board, bits = unixport.split(board)
    if bits == 32:
        unixport.need32()
    rc, out, res = unixport.run(os.path.join(os.path.dirname(APP), "drains.py"), board, {"SERVER_PORT": free_port()},
                                timeout=60, bits=bits)
    assert rc == 0 and len(res) == 1, out[-3000:]
    r = res[0]
    assert sorted(map(str, r["drained"])) == ["1", "2", "writer"] and r["bytes"] == r["expected"] == 1020 * 4096, r
    assert r["in_order"], r
