# A tinymqtt port (the contract atop tinymqtt/driver.py) whose transport is a scripted server inside the
# interpreter, for the WebAssembly footprint rows (tools/bench/footprint.py), a build without sockets: it answers
# CONNECT, SUBSCRIBE, UNSUBSCRIBE, PINGREQ and the QoS 1/2 flows, and echoes each PUBLISH back to the client.
# Deployed as the tree's tinymqtt_port and imported before an app's baseline; it imports nothing of tinymqtt.
import time

ticks_ms = time.ticks_ms
_out = bytearray(256)  # what the server has sent and the client not yet read (module level: before the baseline)
_n = 0
_v5 = False


def network_up(timeout_ms=0):
    return True


def _put(data, k=None):
    global _n
    k = len(data) if k is None else k
    _out[_n:_n + k] = data
    _n += k


def _ack(first, pid_hi, pid_lo):  # PUBACK, PUBREC, PUBREL, PUBCOMP: a v5 server may leave out the reason code
    _put(bytes((first, 2, pid_hi, pid_lo)))


def _answer(buf, i, end):
    """Answers the packet the client wrote at buf[i:end] (its fixed header's first byte at i)."""
    global _v5
    t = buf[i] >> 4
    p = i + 1
    while buf[p] & 0x80:  # past the remaining length
        p += 1
    p += 1
    if t == 1:  # CONNECT: the protocol level follows the protocol name
        _v5 = buf[p + 2 + (buf[p] << 8 | buf[p + 1])] == 5
        _put(b"\x20\x03\x00\x00\x00" if _v5 else b"\x20\x02\x00\x00")
    elif t == 8:  # SUBSCRIBE (one filter): granted the QoS asked for
        _put(bytes((0x90, 4, buf[p], buf[p + 1], 0, buf[end - 1] & 3)) if _v5 else
             bytes((0x90, 3, buf[p], buf[p + 1], buf[end - 1] & 3)))
    elif t == 10:  # UNSUBSCRIBE (one filter)
        _put(bytes((0xB0, 4, buf[p], buf[p + 1], 0, 0)) if _v5 else bytes((0xB0, 2, buf[p], buf[p + 1])))
    elif t == 12:  # PINGREQ
        _put(b"\xd0\x00")
    elif t == 3:  # PUBLISH: acknowledged, then delivered back to the client (its subscription matches)
        q = buf[i] >> 1 & 3
        if q:
            p += 2 + (buf[p] << 8 | buf[p + 1])
            _ack(0x40 if q == 1 else 0x50, buf[p], buf[p + 1])
        _put(memoryview(buf)[i:end])
    elif t == 6:  # PUBREL
        _ack(0x70, buf[p], buf[p + 1])
    elif t == 5:  # PUBREC of the echoed QoS 2 message
        _ack(0x62, buf[p], buf[p + 1])


def _end(buf, i, n):
    """Where the packet that starts at buf[i] ends, or -1 when buf[:n] does not hold all of it yet."""
    k, s, p = 0, 0, i + 1
    while p < n:
        k |= (buf[p] & 0x7F) << s
        s += 7
        p += 1
        if not buf[p - 1] & 0x80:
            return p + k if p + k <= n else -1
    return -1


class Link:
    """The blocking transport: what the client writes (whole packets) is answered at once."""

    def write(self, buf, n):
        i = 0
        while i < n:
            e = _end(buf, i, n)
            _answer(buf, i, e)
            i = e

    def readinto(self, buf, off, timeout_ms=0):
        global _n
        k = min(_n, len(buf) - off)
        for j in range(k):
            buf[off + j] = _out[j]
        for j in range(k, _n):
            _out[j - k] = _out[j]
        _n -= k
        return k

    def close(self):
        global _n
        _n = 0


class Stream(Link):
    """The asyncio transport: readable() waits (1 ms sleeps) until the server has something, then readinto()
    (the blocking transport's) hands it over."""

    async def readable(self, buf, off):
        import asyncio
        while not _n:
            await asyncio.sleep_ms(1)

    async def drain(self):
        pass


def open(host, port, tls=None):
    return Link()


async def open_stream(host, port, tls=None):
    return Stream()
