# The half of a board port that every MicroPython board with a WLAN station shares; ports/esp32 and
# ports/picow are thin layers over it and deploy copies it next to them (/lib/tinymqtt_board.mpy).
# It owns station bring-up (failures named by the driver's status), DNS, TCP and TLS sockets for the
# blocking client, the clock, and the mapping of the socket errors boards raise to the clients' terms: a read
# that times out is 0 bytes, a dead link is ConnectionLost. What not every board program needs loads only when
# used: tinymqtt_tls.py (the SSLContext from a CA) and tinymqtt_stream.py (asyncio streams for the asyncio
# client). It never imports the client and never runs on CPython (ports/linux is that port).
import select
import socket
import time

from tinymqtt.errors import ConnectionLost

ticks_ms = time.ticks_ms
ticks_diff = time.ticks_diff

# A socket that is only busy raises EAGAIN (11), ETIMEDOUT (110; ESP-IDF's newlib: 116) or EINPROGRESS
# (115; ESP-IDF: 119); through mbedtls the same codes come back negated.
BUSY = (11, 110, 116, 115, 119, -11, -110, -116)
_TLS_VERIFY_FAILED = -0x2700  # MBEDTLS_ERR_X509_CERT_VERIFY_FAILED

# What a station status means. Each port maps its driver's codes to one of these.
IDLE, CONNECTING, NO_IP, UP, WRONG_PASSWORD, NO_AP, CONNECT_FAIL = range(7)
_FAILED = {WRONG_PASSWORD: "wrong password for", NO_AP: "no access point named", CONNECT_FAIL: "could not join"}


class NetworkError(OSError):
    """An OSError whose str() is the sentence that explains it (args stay (errno, message))."""

    def __init__(self, code, msg):
        super().__init__(code, msg)
        self.msg = msg

    def __str__(self):
        return self.msg


class WLANError(NetworkError):
    """The station did not come up: .status is the driver's code and .name what the driver calls it."""

    def __init__(self, status, name, msg):
        super().__init__(status, msg)
        self.status, self.name = status, name


def _code(e):
    return e.args[0] if e.args else 0


def errname(e):
    """'104 ECONNRESET' for an OSError (negative codes from mbedtls are looked up as their errno)."""
    code = _code(e)
    if not isinstance(code, int):
        return str(code)
    if code < -1000:  # an mbedtls error
        return "-0x%04X" % -code
    try:
        from errno import errorcode
        name = errorcode.get(code) or (errorcode.get(-code) if code < -1 else None)
    except ImportError:
        name = None
    return "%d %s" % (code, name) if name else str(code)


class Station:
    """network_up() for a board: brings the WLAN station up from config.WIFI_SSID / WIFI_PASSWORD, or raises
    WLANError naming the status. Called before every connection, so a dropped link is joined again.
    statuses: {driver code: (name, kind)}; other codes are `unknown`. prepare(network, wlan, config) runs
    before the radio starts (country, hostname), activated(wlan, config) before each join (power saving)."""

    def __init__(self, statuses, unknown=CONNECT_FAIL, prepare=None, activated=None):
        self.statuses, self.unknown = statuses, unknown
        self.prepare, self.activated = prepare, activated
        self.wlan = None
        self.joins = 0  # connect() calls made: the first join and every rejoin after a drop

    def describe(self, st):
        return self.statuses.get(st) or ("status %d" % st, self.unknown)

    def up(self, timeout_ms=None):
        import network
        w = self.wlan
        if w is None:
            w = self.wlan = network.WLAN(network.STA_IF)
        if w.isconnected():
            return w
        import config
        ssid = getattr(config, "WIFI_SSID", None)
        if not ssid:
            raise WLANError(0, "", "WLAN: config.WIFI_SSID is not set (deploy writes it from TINYMQTT_WIFI_SSID "
                                   "or secrets.toml)")
        if timeout_ms is None:
            timeout_ms = getattr(config, "WIFI_TIMEOUT_MS", 20000)
        if not w.active():
            if self.prepare:
                self.prepare(network, w, config)
            w.active(True)
        # Idle, failed or dropped: (re)join. A join under way (or one that just finished) is left alone.
        if self.describe(w.status())[1] not in (CONNECTING, NO_IP, UP):
            if self.activated:
                self.activated(w, config)
            w.connect(ssid, getattr(config, "WIFI_PASSWORD", ""))
            self.joins += 1
        start = ticks_ms()
        while True:
            if w.isconnected():
                return w
            st = w.status()
            name, kind = self.describe(st)
            if kind in _FAILED:
                w.disconnect()
                raise WLANError(st, name, "WLAN: %s %r (%s, status %d)" % (_FAILED[kind], ssid, name, st))
            if ticks_diff(ticks_ms(), start) >= timeout_ms:
                w.disconnect()
                if kind == NO_IP:
                    msg = "WLAN: joined %r but got no IP address (DHCP) within %d ms (%s, status %d)"
                else:
                    msg = "WLAN: no connection to %r within %d ms (%s, status %d)"
                raise WLANError(st, name, msg % (ssid, timeout_ms, name, st))
            time.sleep_ms(50)


# ------------------------------------------------------------------------------------------ sockets

def resolve(host, port):
    """getaddrinfo's first TCP address, or an OSError that says the name did not resolve."""
    try:
        ai = socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM)
    except OSError as e:
        raise NetworkError(_code(e) or -2, "DNS lookup of %r failed (%s)" % (host, errname(e)))
    if not ai:
        raise NetworkError(-2, "DNS lookup of %r gave no address" % host)
    return ai[0]


def _not_verified(e):
    # mbedtls' verify text ("The certificate is not correctly signed by the trusted CA") when it gave one
    why = " ".join(str(e).split()) if isinstance(e, ValueError) else ""
    return NetworkError(_TLS_VERIFY_FAILED, "TLS: the server's certificate did not verify against the CA" +
                        (" (%s)" % why if why else ""))


def lost(e):
    """The ConnectionLost (or, for a certificate the CA rejects, the OSError) a socket error means."""
    code = _code(e)
    if code == _TLS_VERIFY_FAILED:
        return _not_verified(e)
    if isinstance(code, int) and code < -1000:
        return ConnectionLost(0x80, "TLS error -0x%04X" % -code)
    return ConnectionLost(0x80, "connection lost (%s)" % errname(e))


def _wants_tls(tls):
    # Only None and False mean plain TCP: an empty options dict asks for TLS (and fails without a CA),
    # never silently for less.
    return tls is not None and tls is not False


def _server_name(tls, host):
    return tls.get("server_hostname", host) if isinstance(tls, dict) else host


class Transport:
    """One blocking-client connection on a non-blocking socket: readinto() returns what has arrived, waiting
    up to timeout_ms in poll; write() continues partial sends until every byte is out, or raises ConnectionLost
    once the server has taken nothing for send_timeout_ms. Relies on what MicroPython's socket streams share
    (unix modsocket, ESP32 modsocket.c, lwIP modlwip.c, and the TLS stream over them): on a non-blocking socket
    readinto()/write() return what they moved or None, never raising for EAGAIN, and poll works on them.
    A timed read is no use: it fills the whole buffer or raises ETIMEDOUT, losing what it read.
    Nothing here allocates per call (cached views, ipoll, the stream write with an offset)."""

    def __init__(self, raw, sock, send_timeout_ms=10000):
        self.raw, self.s = raw, sock  # the TCP socket and what we read and write (TLS or TCP)
        self.send_timeout_ms = send_timeout_ms
        sock.setblocking(False)
        self._rpoll, self._wpoll = select.poll(), select.poll()
        self._rpoll.register(sock, select.POLLIN)
        self._wpoll.register(sock, select.POLLOUT)
        self._rwait, self._wwait = self._rpoll.ipoll, self._wpoll.ipoll
        self._rwait(0)  # ipoll makes its result tuple on its first call: now, not in the steady state
        self._wwait(0)
        self._buf = self._mv = None

    def _recv(self, buf, off):
        if buf is not self._buf:
            self._buf, self._mv = buf, memoryview(buf)
        try:
            return self.s.readinto(self._mv[off:] if off else self._mv)  # None: nothing (or half a TLS record)
        except OSError as e:
            if _code(e) in BUSY:
                return None
            raise lost(e)

    def readinto(self, buf, off, timeout_ms):
        n = self._recv(buf, off)  # first without waiting: TLS may hold decrypted bytes already
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
                k = self.s.write(buf, off, n - off)  # the stream write with an offset allocates nothing
            except OSError as e:
                if _code(e) not in BUSY:
                    raise lost(e)
                k = None
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
        for s in (self.s, self.raw):
            try:
                s.close()
            except OSError:
                pass


def _connect_failed(e, host, port):
    if isinstance(e, NetworkError):
        return e
    return NetworkError(_code(e), "TCP connect to %s:%d failed (%s)" % (host, port, errname(e)))


def open(host, port, tls=None, timeout_ms=10000):
    """A TCP connection (Nagle off where the board has TCP_NODELAY), in TLS when tls is given. timeout_ms
    bounds the connect, the TLS handshake and, later, each stalled write."""
    ai = resolve(host, port)
    raw = socket.socket(ai[0], ai[1], ai[2])
    sock = raw
    try:
        raw.settimeout(timeout_ms / 1000)
        try:
            raw.connect(ai[-1])
        except OSError as e:
            raise _connect_failed(e, host, port)
        nodelay = getattr(socket, "TCP_NODELAY", None)
        if nodelay is not None:
            try:
                raw.setsockopt(getattr(socket, "IPPROTO_TCP", 6), nodelay, 1)
            except OSError:
                pass
        if _wants_tls(tls):
            from tinymqtt_tls import tls_context  # only a TLS connection loads it
            ctx = tls_context(tls)
            try:
                sock = ctx.wrap_socket(raw, server_hostname=_server_name(tls, host))
            except ValueError as e:  # how MicroPython's ssl says the certificate did not verify
                raise _not_verified(e)
            except OSError as e:
                raise lost(e) if _code(e) == _TLS_VERIFY_FAILED else NetworkError(
                    _code(e), "TLS handshake with %s:%d failed (%s)" % (host, port, errname(e)))
    except BaseException:
        raw.close()
        raise
    return Transport(raw, sock, timeout_ms)


def open_stream(host, port, tls=None):
    """An awaitable asyncio connection for aio.AsyncClient (tinymqtt_stream: loaded by the asyncio client only)."""
    from tinymqtt_stream import open_stream
    return open_stream(host, port, tls)
