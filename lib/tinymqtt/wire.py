# MQTT's data representations (spec 1.5): Variable Byte Integer, 2- and 4-byte integers, UTF-8 strings,
# binary data. Writers are plain functions `put_x(buf, pos, value) -> new pos` that only count when buf is
# None, so a packet is sized before it is written and nothing is allocated; Reader walks a memoryview.
from tinymqtt.errors import malformed, LocalProtocolError

MAX_VBI = 268435455


def vbi_len(v):
    return 1 if v < 128 else 2 if v < 16384 else 3 if v < 2097152 else 4


def put_u8(b, pos, v):
    if not 0 <= v <= 0xFF:  # CPython's bytearray would raise ValueError, MicroPython's would truncate
        raise LocalProtocolError(0x81, "%r does not fit a byte" % (v,))
    if b is not None:
        b[pos] = v
    return pos + 1


def put_u16(b, pos, v):
    if not 0 <= v <= 0xFFFF:
        raise LocalProtocolError(0x81, "%r does not fit a two-byte integer" % (v,))
    if b is not None:
        b[pos] = v >> 8
        b[pos + 1] = v & 0xFF
    return pos + 2


def put_u32(b, pos, v):
    if not 0 <= v <= 0xFFFFFFFF:
        raise LocalProtocolError(0x81, "%r does not fit a four-byte integer" % (v,))
    if b is not None:
        b[pos] = v >> 24
        b[pos + 1] = (v >> 16) & 0xFF
        b[pos + 2] = (v >> 8) & 0xFF
        b[pos + 3] = v & 0xFF
    return pos + 4


def put_vbi(b, pos, v):
    if not 0 <= v <= MAX_VBI:
        raise LocalProtocolError(0x95, "%d does not fit a Variable Byte Integer" % v)
    if b is None:
        return pos + vbi_len(v)
    while True:
        d = v & 0x7F
        v >>= 7
        b[pos] = d | 0x80 if v else d
        pos += 1
        if not v:
            return pos


def put_raw(b, pos, data):
    n = len(data)
    if b is not None:
        b[pos:pos + n] = data
    return pos + n


def put_str(b, pos, s):
    # A UTF-8 string or binary data with its two-byte length. Caching encoded bytes avoids the encode.
    if isinstance(s, str):
        if "\x00" in s:
            raise LocalProtocolError(0x81, "U+0000 is not allowed in an MQTT string: %r" % s)
        s = s.encode()
    if len(s) > 65535:
        raise LocalProtocolError(0x95, "string or binary field of %d bytes exceeds 65535" % len(s))
    return put_raw(b, put_u16(b, pos, len(s)), s)


def _decoder_is_strict():
    try:
        str(b"\xed\xa0\x80", "utf-8")  # a surrogate: CPython refuses it, MicroPython does not
    except Exception:
        return True
    return False


_STRICT = _decoder_is_strict()


def check_utf8(mv, i, end):
    # The spec's well-formedness rules (1.5.4), byte by byte: no overlongs, no surrogates, nothing past U+10FFFF.
    while i < end:
        c = mv[i]
        if c < 0x80:
            i += 1
            continue
        lo, hi = 0x80, 0xBF
        if 0xC2 <= c <= 0xDF:
            n = 1
        elif 0xE0 <= c <= 0xEF:
            n = 2
            lo = 0xA0 if c == 0xE0 else 0x80
            hi = 0x9F if c == 0xED else 0xBF
        elif 0xF0 <= c <= 0xF4:
            n = 3
            lo = 0x90 if c == 0xF0 else 0x80
            hi = 0x8F if c == 0xF4 else 0xBF
        else:
            raise malformed("invalid UTF-8 lead byte 0x%02X" % c)
        if i + n >= end:
            raise malformed("truncated UTF-8 sequence")
        if not lo <= mv[i + 1] <= hi:
            raise malformed("invalid UTF-8 sequence (overlong, surrogate or out of range)")
        for j in range(i + 2, i + n + 1):
            if mv[j] & 0xC0 != 0x80:
                raise malformed("invalid UTF-8 continuation byte")
        i += n + 1


class Reader:
    """Reads one packet's fields from a memoryview; every overrun is a Malformed Packet (0x81)."""

    def __init__(self, mv, pos, end):
        self.mv = mv
        self.pos = pos
        self.end = end

    def need(self, n, what):
        if self.pos + n > self.end:
            raise malformed("packet ends inside %s" % what)

    def u8(self, what="a byte"):
        self.need(1, what)
        self.pos += 1
        return self.mv[self.pos - 1]

    def u16(self, what="a two-byte integer"):
        self.need(2, what)
        p = self.pos
        self.pos = p + 2
        return self.mv[p] << 8 | self.mv[p + 1]

    def u32(self, what="a four-byte integer"):
        return self.u16(what) << 16 | self.u16(what)

    def vbi(self, what="a Variable Byte Integer"):
        v = 0
        for shift in (0, 7, 14, 21):
            d = self.u8(what)
            v |= (d & 0x7F) << shift
            if not d & 0x80:
                if not d and shift:  # [MQTT-1.5.5-1]: the fewest bytes that hold the value
                    raise malformed("%s in non-minimal form" % what)
                return v
        raise malformed("%s longer than 4 bytes" % what)

    def bin(self, what="binary data"):
        n = self.u16(what)
        self.need(n, what)
        self.pos += n
        return bytes(self.mv[self.pos - n:self.pos])

    def str(self, what="a UTF-8 string"):
        n = self.u16(what)
        self.need(n, what)
        p = self.pos
        self.pos = p + n
        if not _STRICT:
            check_utf8(self.mv, p, p + n)
        try:
            s = str(self.mv[p:p + n], "utf-8")
        except UnicodeError:
            raise malformed("%s is not well-formed UTF-8" % what)
        if "\x00" in s:
            raise malformed("%s contains U+0000" % what)
        return s

    def rest(self):
        p = self.pos
        self.pos = self.end
        return self.mv[p:self.end]

    def more(self):
        return self.pos < self.end
