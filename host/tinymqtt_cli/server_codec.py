# The server half of the MQTT codec, which a client never needs and a board never carries: decode(), the general
# decoder of any packet into a new Packet (a session reads what it receives in place: packets.read_publish,
# read_packet), decoding CONNECT / SUBSCRIBE / UNSUBSCRIBE, encode() of CONNACK / SUBACK / UNSUBACK (any other
# packet by the client half's), and Packet: the core's Packet with a default for every field, equality and repr.
# Its users import it by name: the CLI's -d (which decodes what it sends), the tests' fake broker, the codec tests
# and fuzzers. It only calls the client half (tinymqtt.packets, props, wire) and changes nothing there; it stays
# MicroPython-clean, because tests/shared runs it on MicroPython too.
from tinymqtt import packets as K
from tinymqtt.errors import protocol_error, LocalProtocolError, RemoteProtocolError
from tinymqtt.packets import (CONNECT, CONNACK, PUBLISH, SUBSCRIBE, SUBACK, UNSUBSCRIBE, UNSUBACK, V31, V311, V5,
                              NAMES, frame, read_packet, read_publish)
from tinymqtt.props import Reader
from tinymqtt.wire import put, _vbi_len

# The largest packet the protocol can express (a 4-byte Remaining Length of 2**28 - 1): frame()'s default limit.
MAX_PACKET = 268435460
FIELDS = ("type", "pid", "reason", "props", "topic", "payload", "qos", "retain", "dup", "topics", "codes",
          "session_present", "client_id", "clean", "keepalive", "username", "password", "will")
WILL = 0  # props.WILL: the property set of a Will


class Packet(K.Packet):
    """A tinymqtt.packets.Packet with a default for every field, so that a tool or a test may build a CONNECT with a
    few: the fields the client half leaves out (a CONNACK's session_present, which it sets only in the CONNACKs it
    reads; CONNECT's, which its session always sets; SUBSCRIBE's and UNSUBSCRIBE's topics), and the protocol level
    a decoded CONNECT asked for. Equal to any Packet whose fields are the same (a memoryview payload compares as
    its bytes); its repr names the fields that differ from the defaults, never a password or Authentication Data."""
    version = V5
    session_present = False
    topics = None
    client_id = ""
    clean = True
    keepalive = 0
    username = None
    password = None
    will = None

    def __eq__(self, other):
        if not isinstance(other, K.Packet):
            return False
        for f in FIELDS:
            a, b = _field(self, f), _field(other, f)
            if a != b:
                return False
        return True

    def __ne__(self, other):
        return not self.__eq__(other)

    def __repr__(self):
        out = [NAMES.split()[self.type] if 0 <= self.type < 16 else str(self.type)]
        for f in FIELDS[1:]:
            v = _field(self, f)
            if v != getattr(Packet, f):
                if f == "password":
                    v = "***"  # credentials never reach logs
                elif f == "props" and 0x16 in v:  # nor Authentication Data (a token, a SCRAM proof...)
                    v = dict(v)
                    v[0x16] = "***"
                out.append("%s=%r" % (f, v))
        return "<" + " ".join(out) + ">"


def _field(p, f):
    # p's field f, the default above where p (a core Packet) has none; a memoryview as its bytes
    v = getattr(p, f, getattr(Packet, f, None))
    return bytes(v) if isinstance(v, memoryview) else v


def _props(r, p, t):
    p.props = K.v5().read(r, t) or None


def binary(r, what):
    """Reads Binary Data (two-byte length, then the bytes) with props.Reader r."""
    p = r.need(r.uint(2, what), what)
    return bytes(r.mv[p:r.pos])


def decode(mv, version=V5):
    """Decodes the one whole packet in mv (a memoryview or bytes) into a new Packet (this module's); raises
    RemoteProtocolError. What a client receives is read by the client half's own readers (a session's checks, the
    same errors); a CONNECT, SUBSCRIBE or UNSUBSCRIBE by this module."""
    n = len(mv)
    if n < 2 or frame(mv, n) != n:
        raise RemoteProtocolError(0x81, "the Remaining Length of a %d-byte packet disagrees with its size" % n)
    p = Packet(mv[0] >> 4)
    if p.type == PUBLISH:
        read_publish(mv, 0, n, p, version)
        if p.alias >= 0 and p.props is None:  # read in place: decode() gives the property block as sent
            p.props = {0x23: p.alias}
        return p
    if p.type not in (CONNECT, SUBSCRIBE, UNSUBSCRIBE):
        read_packet(mv, 0, n, p, version)
    else:  # the client half checks the fixed header and the packet id (an end just past it), this module the rest
        i = 2
        while mv[i - 1] & 0x80:
            i += 1
        r = Reader(mv, read_packet(mv, 0, min(n, i + 2 * (p.type != CONNECT)), p, version), n)
        (_d_connect if p.type == CONNECT else _d_subscribe)(r, p, version)
        if r.pos != r.end:
            raise RemoteProtocolError(0x81, "%d unexpected bytes at the end of %s"
                                      % (r.end - r.pos, NAMES.split()[p.type]))
    return p


def _d_connect(r, p, v):
    name, level = r.str("protocol name"), r.uint(1, "protocol level")
    if not ((name == "MQIsdp" and level == V31) or (name == "MQTT" and V311 <= level <= V5)):
        raise RemoteProtocolError(0x84, "unsupported protocol %r level %d" % (name, level))
    p.version = v = level
    f = r.uint(1, "connect flags")
    if f & 1:
        raise RemoteProtocolError(0x81, "reserved CONNECT flag (bit 0) is set")
    wq = f >> 3 & 3
    if wq == 3:
        raise RemoteProtocolError(0x81, "Will QoS 3")
    if not f & 4 and f & 0x38:
        raise RemoteProtocolError(0x81, "Will QoS or Will Retain set without the Will flag")
    if v < V5 and f & 0x40 and not f & 0x80:
        raise RemoteProtocolError(0x81, "password without a user name")
    p.clean = bool(f & 2)
    p.keepalive = r.uint(2, "keep alive")
    if v == V5:
        _props(r, p, CONNECT)
    p.client_id = r.str("client identifier")
    if f & 4:
        w = p.will = Packet(PUBLISH, qos=wq, retain=bool(f & 0x20))
        if v == V5:
            _props(r, w, WILL)
        w.topic = r.str("will topic")
        w.payload = binary(r, "will payload")
    if f & 0x80:
        p.username = r.str("user name")
    if f & 0x40:
        p.password = binary(r, "password")


def _d_subscribe(r, p, v):  # SUBSCRIBE and UNSUBSCRIBE, after the packet id
    if v == V5:
        _props(r, p, p.type)
    p.topics = []
    while r.pos < r.end:
        if p.type != SUBSCRIBE:
            p.topics.append(r.str("topic filter"))
            continue
        f, o = r.str("topic filter"), r.uint(1, "subscription options")
        if o & (0xC0 if v == V5 else 0xFC):
            raise RemoteProtocolError(0x81, "reserved subscription option bits set for %r" % f)
        if o & 3 == 3:  # v5 3.8.3.1: a Protocol Error; 3.1.1 [MQTT-3-8.3-4]: malformed
            raise RemoteProtocolError(0x82 if v == V5 else 0x81, "subscription QoS 3 for %r" % f)
        if o >> 4 & 3 == 3:
            raise protocol_error("retain handling 3 for %r" % f)
        p.topics.append((f, o))
    if not p.topics:
        raise protocol_error("%s without a topic filter" % NAMES.split()[p.type])


def encode(buf, p, version=V5, off=0):
    """Writes packet p into buf at off for the given protocol level and returns its length: a CONNACK, SUBACK or
    UNSUBACK here (two passes, as the client half's: buf None only sizes it), any other packet by the client half's
    packets.encode()."""
    if p.type not in (2, 9, 11):  # CONNACK, SUBACK, UNSUBACK (a tuple of constants: nothing allocated, as the client's)
        return K.encode(buf, p, version, off)
    n = _body(None, 0, p, version)
    size = 1 + _vbi_len(n) + n
    if buf is None:
        return size
    if off + size > len(buf):
        raise LocalProtocolError(0x95, "a %d-byte packet does not fit the %d bytes left in the buffer"
                                 % (size, len(buf) - off))
    buf[off] = p.type << 4  # the fixed header: type (these three have no flags), then the Remaining Length
    pos = off + 1
    while True:
        buf[pos] = n & 0x7F | (0x80 if n > 0x7F else 0)
        pos += 1
        n >>= 7
        if not n:
            break
    return _body(buf, pos, p, version) - off


def _body(b, pos, p, v):  # the body of a CONNACK, SUBACK or UNSUBACK; b None: only counts
    if p.type == CONNACK:
        pos = put(b, put(b, pos, bool(getattr(p, "session_present", False)), 1), p.reason, 1)
    else:
        if not p.pid:
            raise LocalProtocolError(0x81, "%s needs a packet identifier 1-65535" % NAMES.split()[p.type])
        pos = put(b, pos, p.pid, 2)
        if v < V5 and p.type == UNSUBACK:
            return pos
    if v == V5:
        pos = K.v5().put_props(b, pos, p.props, p.type, 0)
    for c in p.codes or ():
        pos = put(b, pos, c, 1)
    return pos
