# MQTT's data representations (spec 1.5) as a 3.1.1 client needs them: big-endian integers and UTF-8 strings
# (the Remaining Length is frame()'s and _header()'s in packets.py). Writers `put_x(b, pos, value) -> new pos`
# only count when b is None, so a packet is sized before it is written and nothing is allocated; a 3.x client
# reads only fixed layouts and UTF-8 strings (utf8()). MQTT 5's Variable Byte Integers, binary data and the
# Reader that walks variable layouts are props.py's.
from tinymqtt.errors import LocalProtocolError, RemoteProtocolError


def vbi_len(v):
    return 1 if v < 128 else 2 if v < 16384 else 3 if v < 2097152 else 4


def put(b, pos, v, n):
    # An n-byte big-endian integer (n: 1, 2 or 4). CPython's bytearray would raise ValueError for a value out
    # of range and MicroPython's would keep its low byte: both refuse here instead.
    if not 0 <= v < 1 << 8 * n:
        raise LocalProtocolError(0x81, "%r does not fit %d bytes" % (v, n))
    if b is None:
        return pos + n
    while n:
        n -= 1
        b[pos] = v >> 8 * n & 0xFF
        pos += 1
    return pos


def put_str(b, pos, s):
    # A UTF-8 string or binary data with its two-byte length, refused where MQTT cannot carry it. Caching encoded
    # bytes avoids the encode (and put_str(None, 0, s) then sizes it without allocating).
    if isinstance(s, str):
        if "\x00" in s:
            raise LocalProtocolError(0x81, "U+0000 is not allowed in an MQTT string: %r" % s)
        s = s.encode()
    n = len(s)
    if n > 65535:
        raise LocalProtocolError(0x95, "string or binary field of %d bytes exceeds 65535" % n)
    if b is not None:
        b[pos] = n >> 8
        b[pos + 1] = n & 0xFF
        b[pos + 2:pos + 2 + n] = s
    return pos + 2 + n


# CPython's str() refuses what the spec forbids in UTF-8 (a surrogate here); MicroPython's takes some of it (utf8())
_LAX = str(b"\xed\xa0\x80", "utf-8", "ignore") != ""


def utf8(mv, start, end, what):
    """The str in mv[start:end] (a UTF-8 string field's bytes), or a Malformed Packet (0x81)."""
    # str() refuses broken UTF-8 structure on CPython and MicroPython alike, but MicroPython's lets overlongs,
    # surrogates and code points past U+10FFFF through (spec 1.5.4 forbids them): a lead byte and the byte after
    # it give each of them away.
    bad = False
    i = start
    while _LAX and i < end:
        c = mv[i]
        i += 1
        if c > 0xBF:
            d = mv[i] if i < end else 0
            bad = bad or (c < 0xC2 or c > 0xF4 or (c == 0xE0 and d < 0xA0) or (c == 0xED and d > 0x9F)
                          or (c == 0xF0 and d < 0x90) or (c == 0xF4 and d > 0x8F))
    try:
        s = str(mv[start:end], "utf-8")
    except UnicodeError:
        bad = True
    if bad or "\x00" in s:
        raise RemoteProtocolError(0x81, "%s is not well-formed UTF-8 without U+0000" % what)
    return s
