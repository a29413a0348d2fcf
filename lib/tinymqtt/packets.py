# The client half of MQTT 3.1 (level 3), 3.1.1 (level 4) and 5.0 (level 5): encode what a client sends into a
# caller-owned buffer (one pass to size, one to write: no allocation), decode what a server sends from a
# memoryview holding one whole packet. Pure: never touches a socket or a clock. A decoded PUBLISH payload
# is a memoryview into the caller's buffer, valid until that buffer is reused. The server half (CONNECT,
# SUBSCRIBE, UNSUBSCRIBE in; CONNACK, SUBACK, UNSUBACK out) is host-only: tinymqtt/cli_codec.py.
# MQTT 5 properties (props.py) load at the first v5 packet, so a 3.1.1 client never imports them.
from tinymqtt.errors import malformed, protocol_error, LocalProtocolError, RemoteProtocolError
from tinymqtt.wire import Reader, put_u8, put_u16, put_vbi, put_str, vbi_len, MAX_VBI

P = None  # tinymqtt.props once a v5 packet needs it (v5() below)


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

_V3_SUBACK = (b"\x00\x01\x02", b"\x00\x01\x02\x80")  # 3.1, 3.1.1
_FLAGS_0010 = (PUBREL, SUBSCRIBE, UNSUBSCRIBE)  # fixed header flags 0010; a tuple literal of names would allocate


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
    version = 5  # set by decoding a CONNECT
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
    if n < 2:
        raise malformed("packet shorter than its 2-byte fixed header")
    t, flags = mv[0] >> 4, mv[0] & 15
    r = Reader(mv, 1, n)
    rl = r.vbi("Remaining Length")
    if r.pos + rl != n:
        raise malformed("Remaining Length %d disagrees with the %d bytes that follow it" % (rl, n - r.pos))
    if t == 0 or (t == AUTH and version < V5):
        raise malformed("reserved packet type %d" % t)
    if t != PUBLISH:
        want = 2 if t in _FLAGS_0010 else 0
        if version == V31:  # 3.1 leaves these bits unused, except QoS 1 on the three above (DUP allowed)
            flags &= 6 if want else 0
        if flags != want:
            raise malformed("%s fixed header flags must be %s, got %s" % (NAMES[t], bin(want), bin(flags)))
    body = _DECODE[t]
    if body is None:
        raise protocol_error("a server never sends %s" % NAMES[t])
    p = Packet(t)
    body(r, p, flags, version)
    if r.pos != n:
        raise malformed("%d unexpected bytes at the end of %s" % (n - r.pos, NAMES[t]))
    return p


def _pid(r):
    v = r.u16("packet identifier")
    if not v:
        raise malformed("packet identifier 0")
    return v


def _reason(r, p):  # v5 only: the reason codes p's type may carry are in props.REASONS
    c = r.u8("reason code")
    if c not in v5().REASONS[p.type]:
        raise protocol_error("reason code 0x%02X is not allowed in %s" % (c, NAMES[p.type]))
    p.reason = c


def _props(r, p, t):
    p.props = v5().read(r, t) or None


def _d_connack(r, p, flags, v):
    f = r.u8("connect acknowledge flags")
    if v == V31:
        f = 0  # 3.1: the first byte is unused
    elif f & 0xFE:
        raise malformed("reserved CONNACK flag bits set: %s" % bin(f))
    p.session_present = bool(f & 1)
    if v == V5:
        _reason(r, p)
        _props(r, p, CONNACK)
    else:
        p.reason = r.u8("connect return code")
        if p.reason > 5:
            raise malformed("CONNACK return code %d is reserved" % p.reason)
    if p.reason and p.session_present:
        raise protocol_error("CONNACK refuses the connection but says session present")


def _d_publish(r, p, flags, v):
    q = flags >> 1 & 3
    if q == 3:
        raise malformed("PUBLISH with QoS 3")
    if flags & 8 and not q:
        raise malformed("DUP set on a QoS 0 PUBLISH")
    p.qos, p.dup, p.retain = q, bool(flags & 8), bool(flags & 1)
    p.topic = t = r.str("topic name")
    if "+" in t or "#" in t:
        raise RemoteProtocolError(0x90, "wildcard in topic name %r" % t)
    if q:
        p.pid = _pid(r)
    if v == V5:
        _props(r, p, PUBLISH)
    if not t and not (p.props and 0x23 in p.props):  # 0x23: Topic Alias
        raise protocol_error("empty topic name without a topic alias")
    p.payload = r.rest()


def _d_ack(r, p, flags, v):  # PUBACK, PUBREC, PUBREL, PUBCOMP: short forms of length 2 and 3 in v5
    p.pid = _pid(r)
    if v == V5 and r.more():
        _reason(r, p)
        if r.more():
            _props(r, p, p.type)


def _d_suback(r, p, flags, v):  # SUBACK, and UNSUBACK in v5 (3.x UNSUBACK is the packet id alone)
    p.pid = _pid(r)
    if v < V5 and p.type == UNSUBACK:
        return
    if v == V5:
        _props(r, p, p.type)
    allowed = v5().REASONS[p.type] if v == V5 else _V3_SUBACK[v - V31]
    p.codes = []
    while r.more():
        c = r.u8()
        if c not in allowed:
            raise protocol_error("%s reason code 0x%02X is not allowed" % (NAMES[p.type], c))
        p.codes.append(c)
    if not p.codes:
        raise protocol_error("%s without reason codes" % NAMES[p.type])


def _d_empty(r, p, flags, v):  # PINGREQ, PINGRESP; DISCONNECT and AUTH in v5 may carry reason + props
    if v == V5 and r.more() and p.type >= DISCONNECT:
        _reason(r, p)
        if r.more():
            _props(r, p, p.type)


# By packet type; None: a server never sends it (tinymqtt/cli_codec.py fills these in on hosts).
_DECODE = [None, None, _d_connack, _d_publish, _d_ack, _d_ack, _d_ack, _d_ack, None, _d_suback,
           None, _d_suback, _d_empty, _d_empty, _d_empty, _d_empty]


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
    extra = 3 if alias else 0
    tl, pl = len(topic), len(payload)
    if tl > 65535:
        raise LocalProtocolError(0x95, "a topic of %d bytes exceeds 65535" % tl)
    n = 2 + tl + pl + (2 if qos else 0)
    if version == V5:
        n += v5().block_len(props, PUBLISH, extra)
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
        pos = P.put(buf, pos, props, PUBLISH, extra)  # P: loaded by the v5() just above
        if alias:
            pos = put_u16(buf, put_u8(buf, pos, 0x23), alias)  # 0x23: Topic Alias
    buf[pos:pos + pl] = payload
    return pos + pl - off


def encode(buf, p, version=V5, off=0):
    """Writes packet p into buf at off for the given protocol level; returns its length."""
    t = p.type
    if t == PUBLISH:
        return encode_publish(buf, version, p.topic, p.payload, p.qos, p.retain, p.dup, p.pid, p.props, 0, off)
    if not 0 < t < 16 or (t == AUTH and version < V5):
        raise LocalProtocolError(0x82, "no packet type %d in MQTT level %d" % (t, version))
    body = _ENCODE[t]
    if body is None:
        raise LocalProtocolError(0x82, "a client never sends %s" % NAMES[t])
    n = body(None, 0, p, version)
    pos = _header(buf, off, t << 4 | (2 if t in _FLAGS_0010 else 0), n)
    return body(buf, pos, p, version) - off


def _need_pid(p):
    if not 0 < p.pid < 65536:
        raise LocalProtocolError(0x81, "%s needs a packet identifier 1-65535, got %r" % (NAMES[p.type], p.pid))
    return p.pid


def _e_connect(b, pos, p, v):
    w = p.will
    if v == V31 and not 0 < len(p.client_id) <= 23:
        raise LocalProtocolError(0x85, "MQTT 3.1 needs a client id of 1 to 23 characters")
    if v < V5 and p.password is not None and p.username is None:
        raise LocalProtocolError(0x81, "MQTT 3.x cannot send a password without a user name")
    if not 0 <= p.keepalive <= 65535 or (w and not 0 <= w.qos <= 2):
        raise LocalProtocolError(0x81, "keepalive must be 0-65535 and will QoS 0-2")
    f = (p.username is not None) << 7 | (p.password is not None) << 6 | bool(p.clean) << 1
    if w:
        f |= 4 | w.qos << 3 | bool(w.retain) << 5
    pos = put_str(b, pos, b"MQIsdp" if v == V31 else b"MQTT")
    pos = put_u16(b, put_u8(b, put_u8(b, pos, v), f), p.keepalive)
    if v == V5:
        pos = v5().put(b, pos, p.props, CONNECT)
    pos = put_str(b, pos, p.client_id)
    if w:
        if v == V5:
            pos = P.put(b, pos, w.props, P.WILL)  # P: loaded for the CONNECT's own properties
        pos = put_str(b, put_str(b, pos, w.topic), w.payload)
    if p.username is not None:
        pos = put_str(b, pos, p.username)
    if p.password is not None:
        pos = put_str(b, pos, p.password)
    return pos


def _e_ack(b, pos, p, v):  # PUBACK..PUBCOMP, and DISCONNECT/AUTH (no pid): the shortest form that says it all
    if p.type < DISCONNECT:
        pos = put_u16(b, pos, _need_pid(p))
    if v == V5 and (p.reason or p.props):
        pos = put_u8(b, pos, p.reason)
        if p.props:
            pos = v5().put(b, pos, p.props, p.type)
    return pos


def _e_subscribe(b, pos, p, v):  # SUBSCRIBE and UNSUBSCRIBE
    pos = put_u16(b, pos, _need_pid(p))
    if v == V5:
        pos = v5().put(b, pos, p.props, p.type)
    if not p.topics:
        raise LocalProtocolError(0x82, "%s needs at least one topic filter" % NAMES[p.type])
    for t in p.topics:
        if p.type == SUBSCRIBE:
            pos = put_u8(b, put_str(b, pos, t[0]), t[1])
        else:
            pos = put_str(b, pos, t)
    return pos


def _e_empty(b, pos, p, v):
    return _e_ack(b, pos, p, v) if p.type >= DISCONNECT else pos


# By packet type; None: a client never sends it.
_ENCODE = [None, _e_connect, None, None, _e_ack, _e_ack, _e_ack, _e_ack, _e_subscribe, None,
           _e_subscribe, None, _e_empty, _e_empty, _e_empty, _e_empty]
