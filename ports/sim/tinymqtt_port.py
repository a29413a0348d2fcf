# Simulated board port: real MicroPython (the WebAssembly build under Node) whose network is a bridge to
# Node's sockets (the `jsnet` module the launcher registers). Same interface as the boards' ports:
# network_up(), open_stream() for the asyncio client, open() for the blocking one (tools/sim/syncnet.mjs),
# ticks_ms(). Bytes cross through wasm memory in place, so reads and writes allocate nothing on the Python
# side. No TLS here.
import asyncio
import time

import jsnet
from uctypes import addressof

from tinymqtt.errors import ConnectionLost

ticks_ms = time.ticks_ms


def network_up(timeout_ms=0):
    """The simulated board is always on the (loopback) network; jsnet.network_up() lets tests cut it."""
    if not jsnet.network_up():
        raise OSError(113, "simulated network is down")  # EHOSTUNREACH, as a board without WLAN reports
    return True


class SimStream:
    _n = 0  # what readable() read into the buffer, for readinto()

    def __init__(self, handle):
        self.h = handle

    async def readable(self, buf, off):  # the bridge's read both waits and takes: readinto() hands over its count
        n = await jsnet.readinto(self.h, addressof(buf) + off, len(buf) - off)
        if n <= 0:
            raise ConnectionLost(0x80, "the server closed the connection")
        self._n = n

    def readinto(self, buf, off):
        n = self._n
        self._n = 0
        return n

    def write(self, buf, n):
        if not jsnet.write(self.h, addressof(buf), n):
            raise OSError(104, "connection reset")  # ECONNRESET

    def drain(self):
        return asyncio.sleep_ms(0)  # yields once, as a drain must; MicroPython's sleep_ms reuses one object

    def close(self):
        jsnet.close(self.h)


async def open_stream(host, port, tls=None):
    if tls is not None and tls is not False:  # tls={} asks for TLS too: refuse, never go plain
        raise OSError(95, "the simulated board has no TLS")  # EOPNOTSUPP
    h = await jsnet.connect(host, port)
    if h < 0:
        raise OSError(-h, "connect to %s:%d failed" % (host, port))
    return SimStream(h)


class SimTransport:
    """A blocking connection: write() hands the bytes over at once, readinto() waits up to timeout_ms."""

    def __init__(self, handle):
        self.h = handle

    def write(self, buf, n):
        if not jsnet.sync_write(self.h, addressof(buf), n):
            raise OSError(104, "connection reset")  # ECONNRESET

    def readinto(self, buf, off, timeout_ms):
        """Bytes read into buf[off:], 0 when none came in time; ConnectionLost when the server closed."""
        n = jsnet.sync_readinto(self.h, addressof(buf) + off, len(buf) - off, timeout_ms)
        if n < 0:
            raise ConnectionLost(0x80, "the server closed the connection")
        return n

    def close(self):
        jsnet.sync_close(self.h)


def open(host, port, tls=None, timeout_ms=10000):
    if tls is not None and tls is not False:
        raise OSError(95, "the simulated board has no TLS")  # EOPNOTSUPP
    h = jsnet.sync_connect(host, port, timeout_ms)
    if h < 0:
        raise OSError(-h, "connect to %s:%d failed" % (host, port))
    return SimTransport(h)
