# Everything MQTT 5 adds to the codec, loaded by packets.v5() at the first v5 packet: properties (spec 2.2.2:
# the identifier table with each property's type and the packets it may appear in, reading and writing a
# property block), the reason codes each packet may carry, and the v5 fields after a packet's fixed ones.
# Properties travel as a dict {identifier: value}; User Property (and Subscription Identifier in PUBLISH) may
# repeat, so their value is a list.
from tinymqtt.errors import protocol_error, LocalProtocolError, RemoteProtocolError, const  # (const: micropython's,
# which makes the constants below literals)
from tinymqtt.wire import NAMES, put as put_int, _put_str, utf8

# Value types (TABLE's low 4 bits): BYTE 1, BOOL 2 (a byte that must be 0 or 1), U16 3, U32 4, VBI 5, STR 6, BIN 7,
# PAIR 8 (a User Property: two strings).
_BYTE = const(1)
_BOOL = const(2)
_U16 = const(3)
_U32 = const(4)
_VBI = const(5)
_STR = const(6)
_BIN = const(7)
_PAIR = const(8)

# The reason codes each v5 packet may carry (spec 2.4), by packet type; anything else is a Protocol Error.
REASONS = {
    2: b"\x00\x80\x81\x82\x83\x84\x85\x86\x87\x88\x89\x8a\x8c\x90\x95\x97\x99\x9a\x9b\x9c\x9d\x9f",  # CONNACK
    4: b"\x00\x10\x80\x83\x87\x90\x91\x97\x99", 5: b"\x00\x10\x80\x83\x87\x90\x91\x97\x99",  # PUBACK, PUBREC
    6: b"\x00\x92", 7: b"\x00\x92",  # PUBREL, PUBCOMP
    9: b"\x00\x01\x02\x80\x83\x87\x8f\x91\x97\x9e\xa1\xa2",  # SUBACK
    11: b"\x00\x11\x80\x83\x87\x8f\x91",  # UNSUBACK
    14: b"\x00\x04\x80\x81\x82\x83\x87\x89\x8b\x8d\x8e\x8f\x90\x93\x94\x95\x96\x97\x98\x99\x9a\x9b\x9c"
        b"\x9d\x9e\x9f\xa0\xa1\xa2",  # DISCONNECT
    15: b"\x00\x18\x19",  # AUTH
}
# Where a property may appear (_IN_packet): one bit per packet type; bit 0 (type 0 is reserved) stands for the Will
# (P.WILL). (Named apart from session5's packet types: deploy may bundle both into one namespace.)
_IN_CONNECT = const(2 << 4)
_IN_CONNACK = const(4 << 4)
_IN_PUBLISH = const(8 << 4)
_IN_SUBSCRIBE = const(256 << 4)
_IN_DISCONNECT = const(16384 << 4)
_IN_AUTH = const(32768 << 4)
_IN_WILL = const(1 << 4)
# PUBACK, PUBREC, PUBREL, PUBCOMP, SUBACK, UNSUBACK, DISCONNECT, AUTH
_IN_ACKS = const((0xF0 | 1 << 9 | 1 << 11 | 16384 | 32768) << 4)

# Each property's value type (the low 4 bits) and the packet types it may appear in (one bit each, from bit 4):
# small ints, so the table holds no object per property.
TABLE = {
    0x01: _BOOL | _IN_PUBLISH | _IN_WILL,
    0x02: _U32 | _IN_PUBLISH | _IN_WILL,
    0x03: _STR | _IN_PUBLISH | _IN_WILL,
    0x08: _STR | _IN_PUBLISH | _IN_WILL,
    0x09: _BIN | _IN_PUBLISH | _IN_WILL,
    0x0B: _VBI | _IN_PUBLISH | _IN_SUBSCRIBE,
    0x11: _U32 | _IN_CONNECT | _IN_CONNACK | _IN_DISCONNECT,
    0x12: _STR | _IN_CONNACK,
    0x13: _U16 | _IN_CONNACK,
    0x15: _STR | _IN_CONNECT | _IN_CONNACK | _IN_AUTH,
    0x16: _BIN | _IN_CONNECT | _IN_CONNACK | _IN_AUTH,
    0x17: _BOOL | _IN_CONNECT,
    0x18: _U32 | _IN_WILL,
    0x19: _BOOL | _IN_CONNECT,
    0x1A: _STR | _IN_CONNACK,
    0x1C: _STR | _IN_CONNACK | _IN_DISCONNECT,
    0x1F: _STR | _IN_CONNACK | _IN_ACKS,
    0x21: _U16 | _IN_CONNECT | _IN_CONNACK,
    0x22: _U16 | _IN_CONNECT | _IN_CONNACK,
    0x23: _U16 | _IN_PUBLISH,
    0x24: _BOOL | _IN_CONNACK,
    0x25: _BOOL | _IN_CONNACK,
    0x26: _PAIR | 0xFFFF << 4,
    0x27: _U32 | _IN_CONNECT | _IN_CONNACK,
    0x28: _BOOL | _IN_CONNACK,
    0x29: _BOOL | _IN_CONNACK,
    0x2A: _BOOL | _IN_CONNACK,
}

_MAX_VBI = const(268435455)


def __getattr__(name):
    # The public names: WILL (0, the Will's property set), then P.USER_PROPERTY (0x26) and the rest of spec 2.2.2.2
    # in identifier order (TABLE's keys), each made on use.
    n = (" WILL PAYLOAD_FORMAT_INDICATOR MESSAGE_EXPIRY_INTERVAL CONTENT_TYPE RESPONSE_TOPIC CORRELATION_DATA"
         " SUBSCRIPTION_IDENTIFIER SESSION_EXPIRY_INTERVAL ASSIGNED_CLIENT_IDENTIFIER SERVER_KEEP_ALIVE"
         " AUTHENTICATION_METHOD AUTHENTICATION_DATA REQUEST_PROBLEM_INFORMATION WILL_DELAY_INTERVAL"
         " REQUEST_RESPONSE_INFORMATION RESPONSE_INFORMATION SERVER_REFERENCE REASON_STRING RECEIVE_MAXIMUM"
         " TOPIC_ALIAS_MAXIMUM TOPIC_ALIAS MAXIMUM_QOS RETAIN_AVAILABLE USER_PROPERTY MAXIMUM_PACKET_SIZE"
         " WILDCARD_SUBSCRIPTION_AVAILABLE SUBSCRIPTION_IDENTIFIER_AVAILABLE SHARED_SUBSCRIPTION_AVAILABLE ")
    i = n.find(" %s " % name)
    if i < 0:
        raise AttributeError(name)
    return ([0] + sorted(TABLE))[n.count(" ", 0, i)]


def sub_options(qos=0, no_local=False, retain_as_published=False, retain_handling=0):
    """The SUBSCRIBE options byte (v5 3.8.3.1; also packets.sub_options); 3.x uses only the QoS bits."""
    return qos | no_local << 2 | retain_as_published << 3 | retain_handling << 4


class Reader:
    """Reads one packet's variable fields from a memoryview (MQTT 5's, and the server half's: the host's
    tinymqtt_cli.server_codec); every overrun is a Malformed Packet (0x81). A 3.x client's packets have fixed
    layouts: packets.py reads them in place."""

    def __init__(self, mv, pos, end):
        self.mv = mv
        self.pos = pos
        self.end = end

    def need(self, n, what):
        """Steps over n bytes and returns where they start."""
        p = self.pos
        if p + n > self.end:
            raise RemoteProtocolError(0x81, "packet ends inside %s" % what)
        self.pos = p + n
        return p

    def uint(self, n, what):
        """An n-byte big-endian integer (MQTT's bytes and two- and four-byte integers)."""
        p = self.need(n, what)  # (not inside range(): MicroPython's for-range reads its end first)
        v = 0
        for i in range(p, self.pos):
            v = v << 8 | self.mv[i]
        return v

    def str(self, what):
        p = self.need(self.uint(2, what), what)
        return utf8(self.mv, p, self.pos, what)



def put_vbi(b, pos, v):
    """Writes a Variable Byte Integer (a property length, identifier or Subscription Identifier)."""
    if not 0 <= v <= _MAX_VBI:
        raise LocalProtocolError(0x95, "%d does not fit a Variable Byte Integer" % v)
    while True:  # seven bits a byte, the lowest first; the top bit says another byte follows
        d = v & 0x7F
        v >>= 7
        if b is not None:
            b[pos] = d | 0x80 if v else d
        pos += 1
        if not v:
            return pos


def vbi(r, what):
    """Reads a Variable Byte Integer with Reader r."""
    v = 0
    for shift in range(0, 28, 7):
        d = r.uint(1, what)
        v |= (d & 0x7F) << shift
        if not d & 0x80:
            if not d and shift:  # [MQTT-1.5.5-1]: the fewest bytes that hold the value
                raise RemoteProtocolError(0x81, "%s in non-minimal form" % what)
            return v
    raise RemoteProtocolError(0x81, "%s longer than 4 bytes" % what)


def read(r, ptype):
    """Reads a property block (length + properties) for packet type ptype (WILL for will properties)."""
    n = vbi(r, "property length")
    last = r.end
    if r.pos + n > last:
        raise RemoteProtocolError(0x81, "property length %d runs past the end of the packet" % n)
    r.end = r.pos + n  # (meanwhile a property that runs past the block is cut short by r.need())
    props = {}
    while r.pos < r.end:
        pid = vbi(r, "property identifier")
        t = TABLE.get(pid, 0)
        if not t >> 4 & 1 << ptype:
            raise RemoteProtocolError(0x81, "property 0x%02X is not allowed in packet type %d" % (pid, ptype))
        t &= 15
        if t == _VBI:
            v = vbi(r, "a property")
        elif t < _VBI:  # _BYTE, _BOOL, _U16, _U32: a big-endian integer of 1, 1, 2 or 4 bytes
            v = r.uint(b"\1\1\2\4"[t - 1], "a property")
        elif t == _BIN:  # Binary Data: a two-byte length, then the bytes
            v = r.need(r.uint(2, "a property"), "a property")
            v = bytes(r.mv[v:r.pos])
        else:  # a string, or a User Property's two (name, value)
            v = r.str("a property")
            if t == _PAIR:
                v = (v, r.str("a property"))
        # 0 is a Protocol Error for Receive Maximum, Maximum Packet Size and Subscription Identifier
        if (v == 0 and pid in (0x21, 0x27, 0x0B)) or (t == _BOOL and v > 1):
            raise protocol_error("property 0x%02X may not be %d (a boolean is 0 or 1)" % (pid, v))
        if pid == 0x26 or (pid == 0x0B and ptype == 3):  # User Property anywhere, Subscription Id in PUBLISH
            props.setdefault(pid, []).append(v)
        elif pid in props:
            raise protocol_error("property 0x%02X appears more than once" % pid)
        else:
            props[pid] = v
    r.end = last
    return props


def _body(b, pos, props, ptype):
    # The properties themselves, each checked against TABLE on the way; b None only counts their bytes.
    for pid in props or ():  # (None: none)
        t = TABLE.get(pid, 0)
        if not t >> 4 & 1 << ptype:
            raise LocalProtocolError(0x81, "property 0x%02X is not allowed in packet type %d" % (pid, ptype))
        t &= 15
        v = props[pid]
        many = isinstance(v, list) and (pid == 0x26 or (pid == 0x0B and ptype == 3))  # a repeated property
        for i in range(len(v) if many else 1):
            x = v[i] if many else v
            pos = put_vbi(b, pos, pid)
            if t == _BOOL and not 0 <= x <= 1:
                raise LocalProtocolError(0x82, "property 0x%02X must be 0 or 1, got %r" % (pid, x))
            if t <= _U32:
                pos = put_int(b, pos, x, b"\1\1\2\4"[t - 1])  # BYTE, BOOL, U16, U32: their sizes
            elif t == _VBI:
                pos = put_vbi(b, pos, x)
            elif t == _PAIR:
                pos = _put_str(b, _put_str(b, pos, x[0]), x[1])
            else:
                pos = _put_str(b, pos, x)
    return pos


def put_props(b, pos, props, ptype, extra):
    """Writes a property block (its length, then the properties); `extra` reserves body bytes the caller writes
    right after (a topic alias). b None counts: the block's bytes then are put_props(None, 0, ...) + extra."""
    return _body(b, put_vbi(b, pos, _body(None, 0, props, ptype) + extra), props, ptype)


def put_publish(b, pos, props, alias):
    """A PUBLISH's property block, with a Topic Alias property last when alias is set; b None only counts."""
    pos = put_props(b, pos, props, 3, 3 if alias else 0)
    return put_int(b, put_int(b, pos, 0x23, 1), alias, 2) if alias else pos  # 0x23: Topic Alias


def read_publish_props(mv, i, end, m):
    """The property block of a PUBLISH at mv[i] (the packet ends at end): sets m.props and m.alias (which
    packets.read_publish has set to None and -1) and returns where the payload starts. A Topic Alias alone, the
    common case, is read in place, allocating nothing (m.props stays None)."""
    if i >= end:
        raise RemoteProtocolError(0x81, "packet ends before the property length")
    if mv[i] == 3 and i + 4 <= end and mv[i + 1] == 0x23:  # 0x23: Topic Alias
        m.alias = mv[i + 2] << 8 | mv[i + 3]
        return i + 4
    if not mv[i]:
        return i + 1
    r = Reader(mv, i, end)
    m.props = p = read(r, 3)  # (never empty: a block of length > 0 holds a property, or read() raises)
    m.alias = p.get(0x23, -1)
    return r.pos


def put_fields(b, pos, p):
    """Writes what MQTT 5 adds after the fixed fields of a packet a client sends (packets.encode): CONNECT's,
    SUBSCRIBE's and UNSUBSCRIBE's properties; an ack's, DISCONNECT's or AUTH's reason code and properties when
    it has either (success without properties is the shorter form without both); PINGREQ's nothing."""
    t = p.type
    if t == 1 or t == 8 or t == 10:  # CONNECT, SUBSCRIBE, UNSUBSCRIBE
        return put_props(b, pos, p.props, t, 0)
    if (p.reason or p.props) and t != 12 and t != 13:  # (PINGREQ and PINGRESP carry neither)
        pos = put_int(b, pos, p.reason, 1)
        if p.props:
            pos = put_props(b, pos, p.props, t, 0)
    return pos


def tail(mv, i, end, p):
    """Reads what follows the fixed fields of a v5 packet a server sends, to end (packets.read_packet() has read a
    CONNACK's flags and reason code, or the packet id): its reason code (an ack's, DISCONNECT's or AUTH's if present;
    CONNACK's is checked), its properties, and the reason codes of a SUBACK or UNSUBACK."""
    t = p.type
    r = Reader(mv, i, end)
    ok = REASONS.get(t)  # None: PINGREQ, PINGRESP, which carry nothing
    if ok:
        codes = t == 9 or t == 11  # SUBACK, UNSUBACK: properties, then a reason code per topic filter
        if t == 2 or (i < end and not codes):
            c = p.reason = p.reason if t == 2 else r.uint(1, "reason code")
            if c not in ok:
                raise protocol_error("reason code 0x%02X is not allowed in %s" % (c, NAMES.split()[t]))
        if t == 2 or codes or r.pos < end:
            p.props = read(r, t) or None
        if codes:
            c = bytes(mv[r.pos:end])
            p.codes = list(c)
            if not c or c.strip(ok):  # what strip() leaves holds a code this packet may not carry
                raise protocol_error("%s without reason codes, or with one it may not carry: %r" % (NAMES.split()[t], c))
            return
    if r.pos != end:
        raise RemoteProtocolError(0x81, "%d unexpected bytes at the end of %s" % (end - r.pos, NAMES.split()[t]))
