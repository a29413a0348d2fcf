# The server half of the MQTT codec, which a client never needs and a board never carries (the cli_ prefix
# keeps it off every board: tools/boards.py): decode(), the general decoder of any packet at any level into a new
# Packet (a session reads what it receives in place: packets.read_publish, read_packet), decoding CONNECT /
# SUBSCRIBE / UNSUBSCRIBE, encoding CONNACK / SUBACK / UNSUBACK, Packet equality and repr, and defaults for the
# fields only it and hand-built CONNECTs use. Importing it adds it to tinymqtt.packets (packets.encode and decode),
# for the CLI's -d (which decodes what it sends) and for the tests' fake broker, codec tests and fuzzers (CPython
# and MicroPython alike); the client half's framing and checks stay the only ones.
from tinymqtt import packets as K
from tinymqtt.errors import protocol_error, LocalProtocolError, RemoteProtocolError
from tinymqtt.packets import (Packet, CONNECT, PUBLISH, SUBSCRIBE, UNSUBSCRIBE, UNSUBACK, V31, V311, V5, NAMES, frame,
                              read_packet, read_publish)
from tinymqtt.props import Reader
from tinymqtt.wire import put, _vbi_len

FIELDS = ("type", "pid", "reason", "props", "topic", "payload", "qos", "retain", "dup", "topics", "codes",
          "session_present", "client_id", "clean", "keepalive", "username", "password", "will")
WILL = 0  # props.WILL: the property set of a Will


def _props(r, p, t):
    p.props = K.v5().read(r, t) or None


def _eq(self, other):
    if not isinstance(other, Packet):
        return False
    for f in FIELDS:
        a, b = getattr(self, f), getattr(other, f)
        if isinstance(a, memoryview):
            a = bytes(a)
        if isinstance(b, memoryview):
            b = bytes(b)
        if a != b:
            return False
    return True


def _repr(self):
    out = [NAMES.split()[self.type] if 0 <= self.type < 16 else str(self.type)]
    for f in FIELDS[1:]:
        v = getattr(self, f)
        if v != getattr(Packet, f):
            if f == "password":
                v = "***"  # credentials never reach logs
            elif f == "props" and 0x16 in v:  # nor Authentication Data (a token, a SCRAM proof...)
                v = dict(v)
                v[0x16] = "***"
            elif isinstance(v, memoryview):
                v = bytes(v)
            out.append("%s=%r" % (f, v))
    return "<" + " ".join(out) + ">"


def binary(r, what):
    """Reads Binary Data (two-byte length, then the bytes) with props.Reader r."""
    p = r.need(r.uint(2, what), what)
    return bytes(r.mv[p:r.pos])


def decode(mv, version=V5):
    """Decodes the one whole packet in mv (a memoryview or bytes) into a new Packet; raises RemoteProtocolError.
    What a client receives is read by the client half's own readers (a session's checks, the same errors); a
    CONNECT, SUBSCRIBE or UNSUBSCRIBE by this module."""
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


_CLIENT = K.encode  # the client half's encode(), which refuses the three below


def encode(buf, p, version=V5, off=0):
    """packets.encode once this module is imported: a CONNACK, SUBACK or UNSUBACK here (two passes, as the client
    half's: buf None only sizes it), any other packet by the client half's."""
    if p.type not in (2, 9, 11):  # CONNACK, SUBACK, UNSUBACK (a tuple of constants: nothing allocated, as the client's)
        return _CLIENT(buf, p, version, off)
    n = _encode(None, 0, p, version)
    if buf is None:
        return 1 + _vbi_len(n) + n
    return _encode(buf, K._header(buf, off, p.type << 4, n), p, version) - off


def _encode(b, pos, p, v):  # the body of a CONNACK, SUBACK or UNSUBACK
    if p.type == K.CONNACK:
        pos = put(b, put(b, pos, bool(p.session_present), 1), p.reason, 1)
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


def install():
    """Makes tinymqtt.packets speak both halves (idempotent)."""
    K.encode, K.decode = encode, decode  # (`from tinymqtt.packets import encode, decode`, as tools and tests write it)
    K.MAX_PACKET = 268435460  # (frame()'s default limit: the largest packet a 4-byte Remaining Length expresses)
    Packet.version = V5  # set by decoding a CONNECT
    # Defaults the client half leaves out: session_present (set only in the CONNACKs it decodes), and CONNECT's
    # fields (the session always sets them all), so that tools and tests may build a CONNECT with a few.
    Packet.session_present = False
    Packet.topics = None  # SUBSCRIBE's and UNSUBSCRIBE's (the client half reads them only when it encodes one)
    Packet.client_id, Packet.clean, Packet.keepalive = "", True, 0
    Packet.username = Packet.password = Packet.will = None
    Packet.__eq__, Packet.__repr__ = _eq, _repr


install()  # importing it is enough
