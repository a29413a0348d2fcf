# Linux port (CPython, and MicroPython's unix port): network bring-up, a TCP/TLS transport and the clock.
# A port is all a client needs from a board: the contract is written once, atop tinymqtt/driver.py.
# TLS verifies the server's certificate and host name unless the caller hands in its own SSLContext.
import select
import socket
import time

from tinymqtt.errors import ConnectionLost

try:
    ticks_ms = time.ticks_ms  # MicroPython: wraps at 2**30, which the session expects
    ticks_diff = time.ticks_diff
    _BUSY = ()  # its stream methods return None where CPython raises
except AttributeError:
    import ssl as _ssl
    from tinymqtt.session import ticks_diff

    def ticks_ms():
        return (time.monotonic_ns() // 1000000) & 0x3FFFFFFF

    _BUSY = (BlockingIOError, _ssl.SSLWantReadError, _ssl.SSLWantWriteError)  # nothing to give or take now

SYSTEM_CA = "/etc/ssl/certs/ca-certificates.crt"  # Debian's bundle: MicroPython's ssl has no CA store


def network_up(timeout_ms=0):
    """On Linux the OS owns the network; nothing to bring up."""
    return True


def _wants_tls(tls):
    # Only None and False mean plain TCP: an empty options dict asks for TLS with the defaults, never for less.
    return tls is not None and tls is not False


def _server_name(tls, host):
    return tls.get("server_hostname", host) if isinstance(tls, dict) else host


def _tls_context(tls):
    import ssl
    if hasattr(tls, "wrap_socket"):
        return tls  # the caller's own SSLContext
    opts = tls if isinstance(tls, dict) else {}
    if not hasattr(ssl, "create_default_context"):
        # MicroPython: no CA store and maybe no PEM parser, as on a board: ports/common's tinymqtt_tls (deploy
        # puts it beside this port; loaded only for TLS), with Debian's bundle when no CA is named.
        from tinymqtt_tls import tls_context
        return tls_context(dict(opts, cafile=opts.get("cafile") or SYSTEM_CA))
    ctx = ssl.create_default_context(cafile=opts.get("cafile"))  # CERT_REQUIRED, host name check, system CAs
    if opts.get("certfile"):
        ctx.load_cert_chain(opts["certfile"], opts.get("keyfile"))
    return ctx


def _tls_failed(e, host):
    """What a failed connect or handshake raises. MicroPython's ssl raises ValueError("...not correctly signed
    by the trusted CA...") or OSError(-0x2700) for a certificate that does not verify: an OSError that says so,
    so the clients treat it as a failed link (CPython's SSLCertVerificationError already is one)."""
    if (isinstance(e, ValueError) and not isinstance(e, OSError)) or (e.args and e.args[0] == -0x2700):
        why = " ".join(str(e).split()) if isinstance(e, ValueError) else "wrong CA or wrong host name"
        return OSError(-0x2700, "TLS: certificate verify failed for %s (%s)" % (host, why))
    return e


def _link_failed(e, host):
    t = _tls_failed(e, host)
    return _lost(e) if t is e and isinstance(e, OSError) else t


def _busy(e):
    # EAGAIN (11) / ETIMEDOUT (110): the socket is only busy; CPython raises its own classes for that.
    return isinstance(e, _BUSY) or (e.args and e.args[0] in (11, 110))


def _lost(e):
    return ConnectionLost(0x80, "connection lost (%s)" % (e.args[0] if e.args else e))


class Transport:
    """One connection on a non-blocking socket. readinto() returns what has arrived (waiting up to timeout_ms
    in poll, never in the read: MicroPython's timed readinto() fills the whole buffer or raises, losing what it
    read); write() continues partial sends until every byte is out, or raises ConnectionLost once the server
    has taken nothing for send_timeout_ms. On MicroPython neither allocates (cached views, ipoll)."""

    def __init__(self, sock, send_timeout_ms=10000):
        self.sock = sock
        self.send_timeout_ms = send_timeout_ms
        sock.setblocking(False)
        self._cpython = hasattr(sock, "recv_into")
        self._rpoll, self._wpoll = select.poll(), select.poll()
        self._rpoll.register(sock, select.POLLIN)
        self._wpoll.register(sock, select.POLLOUT)
        # ipoll (MicroPython) waits like poll but returns the poller itself rather than a new list.
        self._rwait = getattr(self._rpoll, "ipoll", self._rpoll.poll)
        self._wwait = getattr(self._wpoll, "ipoll", self._wpoll.poll)
        self._rwait(0)  # ipoll makes its result tuple on its first call: now, not in the steady state
        self._wwait(0)
        self._buf = self._mv = None

    def _recv(self, buf, off):
        """What has arrived (0 at end of stream), or None when nothing has."""
        if buf is not self._buf:
            self._buf, self._mv = buf, memoryview(buf)
        mv = self._mv[off:] if off else self._mv  # the session reads at 0 unless half a packet is held
        try:
            if self._cpython:
                return self.sock.recv_into(mv)
            return self.sock.readinto(mv)  # non-blocking: what arrived, None when nothing did
        except OSError as e:
            if _busy(e):
                return None
            raise _lost(e)

    def readinto(self, buf, off, timeout_ms):
        """The number of bytes read into buf[off:], 0 when none came within timeout_ms; raises ConnectionLost
        when the server closed the connection."""
        n = self._recv(buf, off)  # first without waiting: TLS may hold decrypted bytes poll cannot see
        if n is None and timeout_ms > 0:
            self._rwait(timeout_ms)
            n = self._recv(buf, off)
        if n is None:
            return 0
        if not n:
            raise ConnectionLost(0x80, "the server closed the connection")
        return n

    def write(self, buf, n):
        off, stalled = 0, None
        while off < n:
            try:
                if self._cpython:
                    k = self.sock.send(memoryview(buf)[off:n])
                else:  # the stream write with an offset: 0 B, None when the socket is full
                    k = self.sock.write(buf, off, n - off)
            except OSError as e:
                if not _busy(e):
                    raise _lost(e)
                k = 0
            if k:
                off += k
                stalled = None
                continue
            now = ticks_ms()
            if stalled is None:
                stalled = now
            left = self.send_timeout_ms - ticks_diff(now, stalled)
            if left <= 0:
                raise ConnectionLost(0x80, "the server took no data for %d ms" % self.send_timeout_ms)
            self._wwait(left)

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


def open(host, port, tls=None, timeout_ms=10000):
    """A TCP connection (Nagle off: each packet leaves at once), wrapped in TLS when tls is given
    (True, a dict with cafile/certfile/keyfile/server_hostname, or an SSLContext). timeout_ms bounds the
    connect, the TLS handshake and, later, each stalled write."""
    ai = socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM)[0]
    sock = socket.socket(ai[0], socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout_ms / 1000)  # blocking with a timeout until the handshake is done
        sock.connect(ai[-1])
        # MicroPython's unix socket module names neither constant: Linux's values are 6 and 1.
        sock.setsockopt(getattr(socket, "IPPROTO_TCP", 6), getattr(socket, "TCP_NODELAY", 1), 1)
        if _wants_tls(tls):
            sock = _tls_context(tls).wrap_socket(sock, server_hostname=_server_name(tls, host))
    except BaseException as e:
        sock.close()
        raise _tls_failed(e, host)
    return Transport(sock, timeout_ms)


class AsyncTransport:
    """One asyncio connection: readable() waits on the stream (no polling), readinto() takes what came, write()
    queues, drain() sends. This class: CPython's streams, whose read both waits and takes (readinto() hands over
    what readable() read); MicroPython's: tinymqtt.aio.SocketStream (open_stream)."""

    _n = 0  # what readable() read into the buffer, for readinto()

    def __init__(self, reader, writer, host=""):
        self.r, self.w, self.host = reader, writer, host

    async def readable(self, buf, off):
        data = await self.r.read(len(buf) - off)
        n = len(data)
        if not n:
            raise ConnectionLost(0x80, "the server closed the connection")
        buf[off:off + n] = data
        self._n = n

    def readinto(self, buf, off):
        n = self._n
        self._n = 0
        return n

    def write(self, buf, n):  # the stream copies what it is given
        self.w.write(bytes(memoryview(buf)[:n]))

    async def drain(self):
        try:
            await self.w.drain()
        except (OSError, ValueError) as e:
            raise _link_failed(e, self.host)

    def close(self):
        try:
            self.w.close()
        except (OSError, RuntimeError):
            pass


async def open_stream(host, port, tls=None):
    import asyncio
    ctx = _tls_context(tls) if _wants_tls(tls) else None
    if ctx is None:
        r, w = await asyncio.open_connection(host, port)
    else:
        try:
            r, w = await asyncio.open_connection(host, port, ssl=ctx, server_hostname=_server_name(tls, host))
        except BaseException as e:
            raise _tls_failed(e, host)
    if hasattr(w, "out_buf"):  # MicroPython's asyncio: its socket used directly, no object per read or drain
        from tinymqtt.aio import SocketStream
        return SocketStream(w, lambda e: None if isinstance(e, OSError) and _busy(e) else _link_failed(e, host))
    return AsyncTransport(r, w, host)
