# asyncio.open_connection for the simulated board, for the board ports' asyncio path under real MicroPython:
# the WebAssembly build has no socket module and no asyncio streams, so this one makes streams over the
# simulator's TCP bridge (jsnet) that behave like extmod/asyncio/stream.py's Stream: readinto(buf) may
# return None (as a non-blocking TLS socket does; every none_every-th read here), 0 at the end, raises
# OSError on a reset; write() sends at once; close() does nothing and the socket's own close() (.s) ends it.
import asyncio

import jsnet
from uctypes import addressof

log = []
none_every = 0
streams = []


class _Socket:
    def __init__(self, h):
        self.h = h
        self.closed = False

    def close(self):
        if not self.closed:
            self.closed = True
            jsnet.close(self.h)


class Stream:
    def __init__(self, h):
        self.s = _Socket(h)
        self.reads = 0

    async def readinto(self, buf):
        self.reads += 1
        if none_every and self.reads % none_every == 0:
            await asyncio.sleep_ms(0)
            return None
        if self.s.closed:
            raise OSError(9)  # EBADF
        return await jsnet.readinto(self.s.h, addressof(buf), len(buf))

    def write(self, buf):
        if self.s.closed or not jsnet.write(self.s.h, addressof(buf), len(buf)):
            raise OSError(104)  # ECONNRESET

    async def drain(self):
        await asyncio.sleep_ms(0)

    def close(self):
        pass


async def open_connection(host, port, ssl=None, server_hostname=None):
    log.append((host, port, ssl, server_hostname))
    if ssl:
        raise OSError(95, "the bridge carries no TLS")  # EOPNOTSUPP; the test only checks what was asked
    h = await jsnet.connect(host, port)
    if h < 0:
        raise OSError(-h)
    s = Stream(h)
    streams.append(s)
    return s, s


def install():
    asyncio.open_connection = open_connection
