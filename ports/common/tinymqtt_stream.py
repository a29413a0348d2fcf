# asyncio streams for aio.AsyncClient on the board ports (ports/common): loaded by tinymqtt_board.open_stream()
# when the asyncio client connects, so a board running the blocking client never holds it in RAM.
from tinymqtt.errors import ConnectionLost
from tinymqtt_board import (BUSY, _TLS_VERIFY_FAILED, _code, _connect_failed, _not_verified, _server_name,
                            _wants_tls, lost, resolve)


class Stream:
    """One asyncio connection for aio.AsyncClient over MicroPython's asyncio streams, used through the socket (.s)
    as their own methods do, without their coroutine per call. What the socket does not take is kept here, not in
    the stream's out_buf: its drain() drops what another task writes meanwhile, and a second task's drain would take
    the first one's place in asyncio's IO queue (that one would never wake)."""

    _n = 0  # what readable() read into the buffer, for readinto() (a stream without MicroPython's internals)
    _pending = b""  # what the socket has not taken yet: a copy, as the caller reuses its buffer
    _draining = None  # an Event while a task writes _pending out (one at a time)

    def __init__(self, reader, writer):
        self.r, self.w = reader, writer
        self._buf = self._mv = None
        # MicroPython's asyncio Stream keeps the socket in .s and what it could not send yet in .out_buf.
        self._raw = getattr(writer, "s", None) if hasattr(writer, "out_buf") else None
        if self._raw is not None:
            import asyncio
            from tinymqtt.aio import SocketWait
            self._wait = SocketWait(self._raw)  # awaited for every read: made once
            self._room = SocketWait(self._raw, writing=True)
            self._yield = asyncio.sleep_ms  # a shared generator: awaiting it allocates nothing

    def _view(self, buf, off):
        if buf is not self._buf:
            self._buf, self._mv = buf, memoryview(buf)
        return self._mv[off:] if off else self._mv  # no view made at offset 0

    def readable(self, buf, off):
        """An awaitable, done once the socket has bytes for readinto(): MicroPython's Stream.readinto() waits so
        before it reads (made once here: its coroutine was one object per read). A stream without MicroPython's
        internals (no .s) reads in the wait, and readinto() hands over what came."""
        return self._wait if self._raw is not None else self._read(buf, off)

    async def _read(self, buf, off):
        try:
            n = await self.r.readinto(self._view(buf, off))
        except OSError as e:
            if _code(e) in BUSY:
                return
            raise lost(e)
        except ValueError as e:  # MicroPython's TLS handshake runs in the first reads and writes
            raise _not_verified(e)
        if n is not None and not n:
            raise ConnectionLost(0x80, "the server closed the connection")
        self._n = n or 0

    def readinto(self, buf, off):
        """Bytes read into buf[off:] now, 0 when none (or no whole TLS record yet)."""
        raw = self._raw
        if raw is None:
            n = self._n
            self._n = 0
            return n
        try:
            n = raw.readinto(self._view(buf, off))
        except OSError as e:
            if _code(e) in BUSY:
                return 0
            raise lost(e)
        except ValueError as e:  # MicroPython's TLS handshake runs in the first reads and writes
            raise _not_verified(e)
        if n is None:  # nothing after all, or no whole TLS record yet
            return 0
        if not n:
            raise ConnectionLost(0x80, "the server closed the connection")
        return n

    def write(self, buf, n):
        try:
            if self._raw is None:  # the stream copies what it is given
                self.w.write(memoryview(buf)[:n])
                return
            k = 0
            if not self._pending:  # (else behind it, in order)
                k = self._raw.write(buf, 0, n) or 0
            if k < n:  # the socket is full: a copy of the rest, for drain()
                self._pending += memoryview(buf)[k:n]
        except (OSError, ValueError) as e:
            if isinstance(e, OSError) and _code(e) in BUSY:  # (some boards raise EAGAIN where others return None)
                self._pending += memoryview(buf)[:n]
                return
            raise _not_verified(e) if isinstance(e, ValueError) else lost(e)

    def drain(self):
        """An awaitable: with nothing pending, only the yield MicroPython's Stream.drain() makes then, without
        its coroutine and ours (two objects per publish: they cut asyncio QoS 0 eightfold on the unix port)."""
        if self._raw is not None and not self._pending:
            return self._yield(0)
        return self._drain()

    async def _drain(self):
        try:
            if self._raw is None:
                await self.w.drain()
                return
            import asyncio
            while self._draining:  # another task is writing it out: wait for the end of its drain
                await self._draining.wait()
            ev = self._draining = asyncio.Event()
            try:
                while self._pending:  # (with what other tasks write meanwhile)
                    await self._room
                    try:
                        k = self._raw.write(self._pending) or 0
                    except OSError as e:
                        if _code(e) not in BUSY:
                            raise
                        k = 0
                    self._pending = self._pending[k:]
            finally:
                self._draining = None
                ev.set()
        except (OSError, ValueError) as e:
            raise _not_verified(e) if isinstance(e, ValueError) else lost(e)

    def close(self):
        try:
            self.w.close()  # a no-op on some asyncio versions: close the socket underneath too
            s = getattr(self.w, "s", None)
            if s is not None:
                s.close()
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
    return Stream(r, w)
