# MQTT's data representations (spec 1.5) as a 3.1.1 client needs them: big-endian integers and UTF-8 strings
# (the Remaining Length is frame()'s and _header()'s in packets.py). Writers `put_x(b, pos, value) -> new pos`
# only count when b is None, so a packet is sized before it is written and nothing is allocated; a 3.x client
# reads only fixed layouts and UTF-8 strings (utf8()). MQTT 5's Variable Byte Integers, binary data and the
# Reader that walks variable layouts are props.py's.
from tinymqtt.errors import LocalProtocolError, RemoteProtocolError, const  # (const: micropython's; int on CPython)

# The packet types' names, by number, for messages (NAMES.split()[t]): here, below both packets.py and props.py,
# which name packets in their errors (props.py never imports packets.py). The one source of the packet types that
# every module's const() copies are checked against (tests/test_names.py).
NAMES = ("reserved CONNECT CONNACK PUBLISH PUBACK PUBREC PUBREL PUBCOMP SUBSCRIBE SUBACK UNSUBSCRIBE UNSUBACK "
         "PINGREQ PINGRESP DISCONNECT AUTH")


def _vbi_len(v):
    # The bytes of a Variable Byte Integer (spec 1.5.5): 7 bits each
    if v < 128:
        return 1
    if v < 16384:
        return 2
    return 3 if v < 2097152 else 4


def put(b, pos, v, n):
    # An n-byte big-endian integer (n: 1, 2 or 4). CPython's bytearray would raise ValueError for a value out
    # of range and MicroPython's would keep its low byte: both refuse here instead.
    if v >> 8 * n:  # (below 0 too: -1)
        raise LocalProtocolError(0x81, "%r does not fit %d bytes" % (v, n))
    if b is not None:
        while n:
            n -= 1
            b[pos] = v >> 8 * n & 0xFF
            pos += 1
    return pos + n  # (n is 0 once written)


def _put_str(b, pos, v):
    # A UTF-8 string or binary data with its two-byte length, refused where MQTT cannot carry it. Caching encoded
    # bytes avoids the encode (and _put_str(None, 0, v) then sizes it without allocating).
    if isinstance(v, str):
        if "\x00" in v:
            raise LocalProtocolError(0x81, "U+0000 is not allowed in an MQTT string: %r" % v)
        v = v.encode()
    n = len(v)
    if n >> 16:  # (over 65535)
        raise LocalProtocolError(0x95, "string or binary field of %d bytes exceeds 65535" % n)
    if b is not None:  # (written here, not by put(): this is every publish's path)
        b[pos] = n >> 8
        b[pos + 1] = n & 0xFF
        b[pos + 2:pos + 2 + n] = v
    return pos + 2 + n


def utf8(mv, start, end, name):
    """The str in mv[start:end] (a UTF-8 string field's bytes), or a Malformed Packet (0x81) whose message names the
    field (name; None: the topic name, a text a board's short error text never needs)."""
    # str() refuses broken UTF-8 structure on CPython and MicroPython alike, but MicroPython's lets overlongs,
    # surrogates and code points past U+10FFFF through (spec 1.5.4 forbids them): a lead byte and the byte after
    # it give each of them away (CPython's refuses them itself: no walk there).
    i = end if const is int else start
    while i < end:
        c = mv[i]
        i += 1
        if c > 0xBF:  # a lead byte
            d = mv[i] if i < end else 0
            if (c < 0xC2 or c > 0xF4 or (c == 0xE0 and d < 0xA0) or (c == 0xED and d > 0x9F)
                    or (c == 0xF0 and d < 0x90) or (c == 0xF4 and d > 0x8F)):
                break  # an overlong form, a surrogate, or past U+10FFFF
    else:  # (none of those)
        try:
            s = str(mv[start:end], "utf-8")
            if "\x00" not in s:
                return s
        except ValueError:  # (UnicodeError)
            pass
    raise RemoteProtocolError(0x81, "%s is not well-formed UTF-8 without U+0000" % (name or "topic name"))
