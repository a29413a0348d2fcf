# The client half of MQTT 3.1 (level 3), 3.1.1 (level 4) and 5.0 (level 5): encode what a client sends into a
# caller-owned buffer (one pass to size, one to write: no allocation), decode what a server sends from a
# memoryview holding one whole packet. Pure: never touches a socket or a clock. A decoded PUBLISH payload
# is a memoryview into the caller's buffer, valid until that buffer is reused. The server half (CONNECT,
# SUBSCRIBE, UNSUBSCRIBE in; CONNACK, SUBACK, UNSUBACK out) is host-only: tinymqtt/cli_codec.py.
# Everything MQTT 5 adds (properties, reason codes after the fixed fields) is props.py's, loaded by v5() at the
# first v5 packet, so a 3.1.1 client never imports it.
from tinymqtt.errors import malformed, protocol_error, LocalProtocolError, RemoteProtocolError
from tinymqtt.wire import Reader, put, put_vbi, put_str, vbi_len, MAX_VBI

P = None  # tinymqtt.props once a v5 packet needs it (v5() below)
# The server half (cli_codec.py) plugs in here: SERVER_DECODE(reader, packet, level) for CONNECT, SUBSCRIBE and
# UNSUBSCRIBE, SERVER_ENCODE(buf, pos, packet, level) for CONNACK, SUBACK and UNSUBACK.
SERVER_DECODE = SERVER_ENCODE = None


def v5():
    """The MQTT 5 properties module, imported on first use; a build without it (profile mqtt311) refuses v5."""
    global P
    if P is None:
        try:
            from tinymqtt import props as P
        except ImportError:
            raise LocalProtocolError(0x84, "MQTT 5 is not in this build (no tinymqtt/props)") from None
    return P

CONNECT, CONNACK, PUBLISH, PUBACK, PUBREC, PUBREL, PUBCOMP = 1, 2, 3, 4, 5, 6, 7
SUBSCRIBE, SUBACK, UNSUBSCRIBE, UNSUBACK, PINGREQ, PINGRESP, DISCONNECT, AUTH = 8, 9, 10, 11, 12, 13, 14, 15
NAMES = ("reserved", "CONNECT", "CONNACK", "PUBLISH", "PUBACK", "PUBREC", "PUBREL", "PUBCOMP", "SUBSCRIBE",
         "SUBACK", "UNSUBSCRIBE", "UNSUBACK", "PINGREQ", "PINGRESP", "DISCONNECT", "AUTH")
V31, V311, V5 = 3, 4, 5
MAX_PACKET = 5 + MAX_VBI  # the largest packet the protocol can express

_V3_SUBACK = (b"\x00\x01\x02", b"\x00\x01\x02\x80")  # the SUBACK codes of 3.1 and 3.1.1


class Packet:
    """One control packet. Defaults live on the class, so a packet holds only the fields it sets.
    A Will is a Packet(PUBLISH) with topic, payload, qos, retain and props."""
    type = 0
    pid = 0
    reason = 0
    props = None
    topic = None
    payload = b""
    qos = 0
    retain = False
    dup = False
    topics = None  # SUBSCRIBE: [(filter, options)]; UNSUBSCRIBE: [filter]
    codes = None  # SUBACK / UNSUBACK reason codes
    session_present = False
    client_id = ""
    clean = True
    keepalive = 0
    username = None
    password = None
    will = None

    def __init__(self, type, **fields):
        self.type = type
        for k in fields:
            setattr(self, k, fields[k])


def sub_options(qos=0, no_local=False, retain_as_published=False, retain_handling=0):
    """The SUBSCRIBE options byte (v5 3.8.3.1); 3.x uses only the QoS bits."""
    return qos | no_local << 2 | retain_as_published << 3 | retain_handling << 4


# ---------------------------------------------------------------- framing and decoding

def frame(buf, n, max_size=MAX_PACKET, pos=0):
    """Total length of the packet starting at buf[pos] given n bytes there so far, or 0 while the fixed
    header is incomplete. Refuses a packet over max_size (0x95) before anyone allocates or reads its body."""
    rl = 0
    for i in range(1, 5):
        if i >= n:
            return 0
        d = buf[pos + i]
        rl |= (d & 0x7F) << (7 * i - 7)
        if not d & 0x80:
            if not d and i > 1:  # [MQTT-1.5.5-1]: the fewest bytes that hold the value
                raise malformed("Remaining Length in non-minimal form")
            if i + 1 + rl > max_size:
                raise RemoteProtocolError(0x95, "packet of %d bytes exceeds the maximum packet size %d"
                                          % (i + 1 + rl, max_size))
            return i + 1 + rl
    raise malformed("Remaining Length longer than 4 bytes")


def decode(mv, version=V5):
    """Decodes the one whole packet in mv (a memoryview or bytes); raises RemoteProtocolError."""
    n = len(mv)
    if n < 2 or frame(mv, n) != n:
        raise malformed("the Remaining Length of a %d-byte packet disagrees with its size" % n)
    t, f = mv[0] >> 4, mv[0] & 15
    if not t or (t == AUTH and version < V5):
        raise malformed("reserved packet type %d" % t)
    if t != PUBLISH:
        want = 2 if t == PUBREL or t == SUBSCRIBE or t == UNSUBSCRIBE else 0
        if version == V31:  # 3.1 leaves these bits unused, except QoS 1 on the three above (DUP allowed)
            f &= want and 6
        if f != want:
            raise malformed("%s fixed header flags must be %s, got %s" % (NAMES[t], bin(want), bin(f)))
    r = Reader(mv, 2, n)
    while mv[r.pos - 1] & 0x80:  # past the Remaining Length, which frame() checked
        r.pos += 1
    p = Packet(t)
    if t == PUBLISH:
        q = f >> 1 & 3
        if q == 3 or (f & 8 and not q):
            raise malformed("PUBLISH with QoS 3, or DUP on QoS 0")
        p.qos, p.dup, p.retain = q, bool(f & 8), bool(f & 1)
        p.topic = s = r.str("topic name")
        if "+" in s or "#" in s:
            raise RemoteProtocolError(0x90, "wildcard in topic name %r" % s)
        if q:
            p.pid = _pid(r)
    elif t == CONNACK:
        c = r.u8("connect acknowledge flags")
        if version == V31:
            c = 0  # 3.1: the first byte is unused
        elif c & 0xFE:
            raise malformed("reserved CONNACK flag bits set: %s" % bin(c))
        p.session_present = bool(c)
        if version < V5:
            p.reason = r.u8("connect return code")
            if p.reason > 5:
                raise malformed("CONNACK return code %d is reserved" % p.reason)
    elif t == CONNECT or t == SUBSCRIBE or t == UNSUBSCRIBE:
        if not SERVER_DECODE:
            raise protocol_error("a server never sends %s" % NAMES[t])
        SERVER_DECODE(r, p, version)
    elif t < PINGREQ:  # PUBACK, PUBREC, PUBREL, PUBCOMP, SUBACK, UNSUBACK
        p.pid = _pid(r)
    if version == V5:
        v5().tail(r, p)  # reason code and properties
    if t == PUBLISH:
        if not s and not (p.props and 0x23 in p.props):  # 0x23: Topic Alias
            raise protocol_error("empty topic name without a topic alias")
        p.payload = r.rest()
    elif t == SUBACK or (t == UNSUBACK and version == V5):  # a 3.x UNSUBACK is its packet id alone
        ok = P.REASONS[t] if version == V5 else _V3_SUBACK[version - V31]
        p.codes = []
        while r.pos < n:
            c = r.u8()
            if c not in ok:
                raise protocol_error("%s reason code 0x%02X is not allowed" % (NAMES[t], c))
            p.codes.append(c)
        if not p.codes:
            raise protocol_error("%s without reason codes" % NAMES[t])
    elif t == CONNACK and p.reason and p.session_present:
        raise protocol_error("CONNACK refuses the connection but says session present")
    if r.pos != n:
        raise malformed("%d unexpected bytes at the end of %s" % (n - r.pos, NAMES[t]))
    return p


def _pid(r):
    v = r.u16("packet identifier")
    if not v:
        raise malformed("packet identifier 0")
    return v


# ---------------------------------------------------------------- encoding

def _header(buf, off, first, n):
    total = 1 + vbi_len(n) + n
    if off + total > len(buf):
        raise LocalProtocolError(0x95, "a %d-byte packet does not fit the %d bytes left in the buffer"
                                 % (total, len(buf) - off))
    buf[off] = first
    return put_vbi(buf, off + 1, n)


def encode_publish(buf, version, topic, payload, qos=0, retain=False, dup=False, pid=0, props=None, alias=0, off=0):
    """Writes a PUBLISH into buf at off and returns its length. Allocates nothing when topic is bytes (cache
    the encoded topic) and props is None; `alias` adds a Topic Alias property (topic b"" uses it alone)."""
    if not 0 <= qos <= 2 or (qos and not 0 < pid < 65536) or (dup and not qos):
        raise LocalProtocolError(0x81, "PUBLISH needs QoS 0-2, a packet id 1-65535 for QoS>0, no DUP at QoS 0")
    if alias and version < V5:
        raise LocalProtocolError(0x82, "topic aliases need MQTT 5")
    if isinstance(topic, str):
        if "\x00" in topic:
            raise LocalProtocolError(0x81, "U+0000 is not allowed in a topic name: %r" % topic)
        topic = topic.encode()
    tl, pl = len(topic), len(payload)
    if tl > 65535:
        raise LocalProtocolError(0x95, "a topic of %d bytes exceeds 65535" % tl)
    n = 2 + tl + pl + (2 if qos else 0)
    if version == V5:
        n += v5().put_publish(None, 0, props, alias)
    pos = _header(buf, off, 0x30 | dup << 3 | qos << 1 | retain, n)
    # Every publish passes here: the fields are written in place, without a call per field.
    buf[pos] = tl >> 8
    buf[pos + 1] = tl & 0xFF
    pos += 2
    buf[pos:pos + tl] = topic
    pos += tl
    if qos:
        buf[pos] = pid >> 8
        buf[pos + 1] = pid & 0xFF
        pos += 2
    if version == V5:
        pos = P.put_publish(buf, pos, props, alias)  # P: loaded by the v5() just above
    buf[pos:pos + pl] = payload
    return pos + pl - off


def encode(buf, p, version=V5, off=0):
    """Writes packet p into buf at off for the given protocol level; returns its length."""
    t = p.type
    if t == PUBLISH:
        return encode_publish(buf, version, p.topic, p.payload, p.qos, p.retain, p.dup, p.pid, p.props, 0, off)
    body = _connect if t == CONNECT else _subscribe if t == SUBSCRIBE or t == UNSUBSCRIBE else SERVER_ENCODE
    if 3 < t < 8 or t > 11:
        body = _ack
    if not 0 < t < 16 or (t == AUTH and version < V5) or not body:
        raise LocalProtocolError(0x82, "a client at MQTT level %d never sends packet type %d" % (version, t))
    n = body(None, 0, p, version)
    pos = _header(buf, off, t << 4 | (2 if t == PUBREL or t == SUBSCRIBE or t == UNSUBSCRIBE else 0), n)
    return body(buf, pos, p, version) - off


def _put_pid(b, pos, p):
    if not p.pid:
        raise LocalProtocolError(0x81, "%s needs a packet identifier 1-65535" % NAMES[p.type])
    return put(b, pos, p.pid, 2)


def _connect(b, pos, p, v):
    w, u, pw = p.will, p.username, p.password
    if v == V31 and not 0 < len(p.client_id) <= 23:
        raise LocalProtocolError(0x85, "MQTT 3.1 needs a client id of 1 to 23 characters")
    if (v < V5 and pw is not None and u is None) or (w and not 0 <= w.qos <= 2):
        raise LocalProtocolError(0x81, "MQTT 3.x cannot send a password without a user name; will QoS is 0-2")
    f = (u is not None) << 7 | (pw is not None) << 6 | bool(p.clean) << 1
    if w:
        f |= 4 | w.qos << 3 | bool(w.retain) << 5
    pos = put_str(b, pos, b"MQIsdp" if v == V31 else b"MQTT")
    pos = put(b, put(b, pos, v << 8 | f, 2), p.keepalive, 2)
    if v == V5:
        pos = v5().put(b, pos, p.props, CONNECT)
    pos = put_str(b, pos, p.client_id)
    if w:
        if v == V5:
            pos = P.put(b, pos, w.props, 0)  # P: loaded for the CONNECT's own properties; 0: a Will's
        pos = put_str(b, put_str(b, pos, w.topic), w.payload)
    for s in (u, pw):
        if s is not None:
            pos = put_str(b, pos, s)
    return pos


def _ack(b, pos, p, v):  # PUBACK..PUBCOMP with their packet id; PINGREQ, PINGRESP, DISCONNECT, AUTH without
    if p.type < SUBSCRIBE:
        pos = _put_pid(b, pos, p)
    return v5().put_tail(b, pos, p) if v == V5 and (p.reason or p.props) else pos


def _subscribe(b, pos, p, v):  # SUBSCRIBE and UNSUBSCRIBE
    pos = _put_pid(b, pos, p)
    if v == V5:
        pos = v5().put(b, pos, p.props, p.type)
    if not p.topics:
        raise LocalProtocolError(0x82, "%s needs at least one topic filter" % NAMES[p.type])
    for t in p.topics:
        if p.type == SUBSCRIBE:
            pos = put(b, put_str(b, pos, t[0]), t[1])
        else:
            pos = put_str(b, pos, t)
    return pos
