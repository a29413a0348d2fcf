# asyncio streams for aio.AsyncClient on the board ports (ports/common): loaded by tinymqtt_board.open_stream()
# when the asyncio client connects, so a board running the blocking client never holds it in RAM.
from tinymqtt.errors import ConnectionLost
from tinymqtt_board import (BUSY, _TLS_VERIFY_FAILED, _code, _connect_failed, _not_verified, _server_name,
                            _wants_tls, lost, resolve)


def _failed(e):
    # What a socket's error means here (SocketStream's failed): None when the socket was only busy
    if isinstance(e, ValueError):  # MicroPython's TLS handshake runs in the first reads and writes
        return _not_verified(e)
    return None if _code(e) in BUSY else lost(e)


class Stream:
    """A stream without MicroPython's asyncio internals (no socket in .s): its own read waits and takes, so
    readable() reads and readinto() hands over what came; write() and drain() are the stream's. MicroPython's
    asyncio streams go through tinymqtt.aio.SocketStream instead (open_stream)."""

    _n = 0  # what readable() read into the buffer, for readinto()

    def __init__(self, reader, writer):
        self.r, self.w = reader, writer

    async def readable(self, buf, off):
        try:
            n = await self.r.readinto(memoryview(buf)[off:])
        except (OSError, ValueError) as e:
            e = _failed(e)
            if e:
                raise e
            return
        if n is not None and not n:
            raise ConnectionLost(0x80, "the server closed the connection")
        self._n = n or 0

    def readinto(self, buf, off):
        n = self._n
        self._n = 0
        return n

    def write(self, buf, n):  # the stream copies what it is given
        try:
            self.w.write(memoryview(buf)[:n])
        except (OSError, ValueError) as e:
            raise _failed(e) or lost(e)

    async def drain(self):
        try:
            await self.w.drain()
        except (OSError, ValueError) as e:
            raise _failed(e) or lost(e)

    def close(self):
        try:
            self.w.close()
        except OSError:
            pass


async def open_stream(host, port, tls=None):
    import asyncio
    ai = resolve(host, port)
    addr = ai[-1]
    ip = addr[0] if isinstance(addr, tuple) else host  # some builds give a raw sockaddr: let asyncio resolve
    try:
        if _wants_tls(tls):
            from tinymqtt_tls import tls_context
            r, w = await asyncio.open_connection(ip, port, ssl=tls_context(tls),
                                                 server_hostname=_server_name(tls, host))
        else:
            r, w = await asyncio.open_connection(ip, port)
    except ValueError as e:
        raise _not_verified(e)
    except OSError as e:
        raise lost(e) if _code(e) == _TLS_VERIFY_FAILED else _connect_failed(e, host, port)
    if hasattr(w, "out_buf") and hasattr(w, "s"):  # MicroPython's asyncio: its socket used directly, no object
        from tinymqtt.aio import SocketStream  # per read or drain
        return SocketStream(w, _failed)
    return Stream(r, w)
