# Linux port (CPython, and MicroPython's unix port): network bring-up, a TCP/TLS transport and the clock.
# A port is all a client needs from a board: network_up(), open(host, port, tls) and ticks_ms().
# TLS verifies the server's certificate and host name unless the caller hands in its own SSLContext.
import socket
import time

from tinymqtt.errors import ConnectionLost

try:
    ticks_ms = time.ticks_ms  # MicroPython: wraps at 2**30, which the session expects
except AttributeError:
    def ticks_ms():
        return (time.monotonic_ns() // 1000000) & 0x3FFFFFFF


def network_up(timeout_ms=0):
    """On Linux the OS owns the network; nothing to bring up."""
    return True


def _wants_tls(tls):
    # Only None and False mean plain TCP: an empty options dict asks for TLS with the defaults, never for less.
    return tls is not None and tls is not False


def _tls_context(tls):
    import ssl
    if hasattr(tls, "wrap_socket"):
        return tls  # the caller's own SSLContext
    opts = tls if isinstance(tls, dict) else {}
    ctx = ssl.create_default_context(cafile=opts.get("cafile"))  # CERT_REQUIRED + host name check
    if opts.get("certfile"):
        ctx.load_cert_chain(opts["certfile"], opts.get("keyfile"))
    return ctx


class Transport:
    """One connection. write() sends a whole buffer prefix in one call; readinto() waits up to timeout_ms."""

    def __init__(self, sock):
        self.sock = sock
        self._timeout = -1

    def write(self, buf, n):
        self.sock.sendall(memoryview(buf)[:n])

    def readinto(self, buf, off, timeout_ms):
        """Returns the number of bytes read into buf[off:], 0 when none came in time; raises ConnectionLost
        when the server closed the connection."""
        if timeout_ms != self._timeout:
            self.sock.settimeout(max(timeout_ms, 0) / 1000)
            self._timeout = timeout_ms
        try:
            n = self.sock.recv_into(memoryview(buf)[off:])
        except OSError as e:
            if isinstance(e, getattr(socket, "timeout", ())) or (e.args and e.args[0] in (11, 110)):
                return 0  # timed out (EAGAIN / ETIMEDOUT on MicroPython)
            raise
        if not n:
            raise ConnectionLost(0x80, "the server closed the connection")
        return n

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


def open(host, port, tls=None, timeout_ms=10000):
    """A TCP connection (Nagle off: each packet leaves at once), wrapped in TLS when tls is given
    (True, a dict with cafile/certfile/keyfile/server_hostname, or an SSLContext)."""
    ai = socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM)[0]
    sock = socket.socket(ai[0], socket.SOCK_STREAM)
    sock.settimeout(timeout_ms / 1000)
    try:
        sock.connect(ai[-1])
        sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, "TCP_NODELAY", 1), 1)
        if _wants_tls(tls):
            name = tls.get("server_hostname", host) if isinstance(tls, dict) else host
            sock = _tls_context(tls).wrap_socket(sock, server_hostname=name)
    except BaseException:
        sock.close()
        raise
    return Transport(sock)


class AsyncTransport:
    """One asyncio connection: readinto() waits on the stream (no polling), write() queues, drain() sends."""

    def __init__(self, reader, writer):
        self.r, self.w = reader, writer

    async def readinto(self, buf, off):
        if hasattr(self.r, "readinto"):  # MicroPython's asyncio stream reads in place
            n = await self.r.readinto(memoryview(buf)[off:])
        else:
            data = await self.r.read(len(buf) - off)
            n = len(data)
            buf[off:off + n] = data
        if not n:
            raise ConnectionLost(0x80, "the server closed the connection")
        return n

    def write(self, buf, n):
        self.w.write(bytes(memoryview(buf)[:n]))

    async def drain(self):
        await self.w.drain()

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
        name = tls.get("server_hostname", host) if isinstance(tls, dict) else host
        r, w = await asyncio.open_connection(host, port, ssl=ctx, server_hostname=name)
    return AsyncTransport(r, w)
