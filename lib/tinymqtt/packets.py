# The client half of MQTT 3.1 (level 3), 3.1.1 (level 4) and 5.0 (level 5): encode what a client sends into a
# caller-owned buffer (one pass to size, one to write: no allocation), read what a server sends in place from a
# memoryview holding one whole packet (read_publish, read_packet). Pure: never touches a socket or a clock. A
# received PUBLISH payload is a memoryview into the caller's buffer, valid until that buffer is reused.
# Everything MQTT 5 adds (properties, reason codes after the fixed fields, subscription options) is props.py's,
# loaded by v5() at the first v5 packet that needs it, so a 3.1.1 client never imports it. The server half
# (CONNECT, SUBSCRIBE, UNSUBSCRIBE in; CONNACK, SUBACK, UNSUBACK out; decode() of any packet into a new Packet) is
# host-only, outside lib/: host/tinymqtt_cli/server_codec.py, built on this module's functions.
from tinymqtt.errors import LocalProtocolError, RemoteProtocolError, const, protocol_error  # (const: micropython's)
from tinymqtt.wire import NAMES, put, _put_str, utf8, _vbi_len  # (NAMES: the packet types' names, here too)

# read_publish's cache of the last 8 new topics, a ring: [k] a topic's bytes, [k + 8] the same topic as str (b""
# matches no topic), [16] the slot of the oldest, which the next new topic takes. CPython decodes each topic, which
# is cheaper there: False.
_TOPICS = const is not int and [b""] * 16 + [0]

_CONNECT = const(1)
_CONNACK = const(2)
_PUBLISH = const(3)
_PUBREL = const(6)
_SUBSCRIBE = const(8)
_SUBACK = const(9)
_UNSUBSCRIBE = const(10)
_UNSUBACK = const(11)
_PINGREQ = const(12)
_AUTH = const(15)
# A board build whose file set lacks tinymqtt/props.py (profile mqtt311) has this written const(0) by
# tools/deploy/features.py: the compiler drops what it guards.
_MQTT5 = const(1)
_V31 = const(3)
_V311 = const(4)
_V5 = const(5)
# The largest packet the protocol can express, a 4-byte Remaining Length of 2**28 - 1: frame()'s default limit.
_MAX_PACKET = const(268435460)


if _MQTT5:
    P = None  # tinymqtt.props once a v5 packet needs it (v5())

    def v5():
        """The MQTT 5 properties module, imported on first use; a build without it refuses v5."""
        global P
        if not P:
            try:
                from tinymqtt import props as P
            except ImportError:
                raise LocalProtocolError(0x84, "MQTT 5 is not in this build (no tinymqtt/props)") from None
        return P
else:  # a board build whose file set lacks props.py (profile mqtt311)
    def v5():
        raise LocalProtocolError(0x84, "MQTT 5 is not in this build (no tinymqtt/props)")


def __getattr__(name):
    # The packet types CONNECT..AUTH and the protocol levels V31, V311, V5 as public names, made on use from NAMES
    # (this module's code uses the private const() copies above); and
    # sub_options(), MQTT 5's subscription options byte, which is props.py's (3.x takes the QoS alone). (A build
    # without MQTT 5 refuses sub_options: v5() raises 0x84.)
    if name == "sub_options":
        return v5().sub_options
    n = (NAMES + " V31 V311 V5").split()  # (the levels 3, 4, 5 after the 16 types)
    if name in n[1:]:
        i = n.index(name)
        return i - 13 if i > 15 else i
    raise AttributeError(name)


class Packet:
    """One control packet. Defaults live on the class, so a packet holds only the fields it sets. A field that
    only decoding sets has none (a CONNACK's session_present, a received PUBLISH's alias, -1 without a Topic
    Alias), nor have CONNECT's, which the session always sets (client_id, clean, keepalive, will, username,
    password; server_codec gives them defaults for tools and tests), nor has SUBSCRIBE's and UNSUBSCRIBE's topics
    ([(filter, options)], [filter]; encode() refuses a packet without them). A Will is a Packet(PUBLISH) with
    topic, payload, qos, retain and props."""
    pid = 0
    reason = 0
    props = None
    topic = None
    payload = b""
    qos = 0
    retain = False
    dup = False
    codes = None  # SUBACK / UNSUBACK reason codes

    def __init__(self, type, **fields):
        self.type = type
        for k in fields:
            setattr(self, k, fields[k])


# ---------------------------------------------------------------- framing and decoding

def _oversize(n, limit):
    return RemoteProtocolError(0x95, "packet of %d bytes exceeds the maximum packet size %d" % (n, limit))


def frame(buf, n, max_packet_size=_MAX_PACKET, pos=0):
    """Total length of the packet starting at buf[pos] given n bytes there so far, or 0 while the fixed
    header is incomplete. Refuses a packet over max_packet_size (0x95) before anyone allocates or reads its body."""
    # (This runs for every packet received. A while loop and _oversize() keep its frame within MicroPython's 11 words
    # on the C stack: a for loop's iterator takes four words more; docs/micropython32.md)
    rl = 0
    i = 1  # the Remaining Length's bytes follow the first byte, 7 bits in each
    while i < 5:
        if i >= n:
            return 0
        d = buf[pos + i]
        rl |= (d & 0x7F) << (7 * i - 7)
        if not d >> 7:  # (its last byte)
            if not d and i > 1:  # [MQTT-1.5.5-1]: the fewest bytes that hold the value
                raise RemoteProtocolError(0x81, "Remaining Length in non-minimal form")
            rl += i + 1  # (the whole packet's length)
            if rl > max_packet_size:
                raise _oversize(rl, max_packet_size)
            return rl
        i += 1
    raise RemoteProtocolError(0x81, "Remaining Length longer than 4 bytes")


def read_packet(mv, pos, end, p, version):
    """Reads the packet framed at mv[pos:end], any type but PUBLISH (read_publish's), into Packet p (p.type set) in
    place: a CONNACK's flags and return code (p.session_present, p.reason), or a packet id (p.pid), then to its end
    what a client receives (MQTT 5's reason code and properties: props.tail; 3.x SUBACK's return codes: p.codes).
    Returns where the fields after the fixed ones start (the server half, which reads a CONNECT, SUBSCRIBE or
    UNSUBSCRIBE on from there, gives an end just past the packet id: server_codec.decode()). Raises
    RemoteProtocolError."""
    t = p.type
    f = mv[pos] & 15
    g = (t == _PUBREL or t == _SUBSCRIBE or t == _UNSUBSCRIBE) << 1  # the fixed header flags: 0010, else 0000
    if version == _V31:  # 3.1 leaves these bits unused, except QoS 1 on PUBREL, (UN)SUBSCRIBE
        f &= g and 6
    if not t or f != g:
        raise RemoteProtocolError(0x81, "reserved packet type %d, or %s with fixed header flags %s"
                                  % (t, NAMES.split()[t], bin(f)))
    i = pos + 2
    while mv[i - 1] >> 7:  # past the Remaining Length, which frame() checked
        i += 1
    if _CONNACK <= t <= _UNSUBACK:  # two bytes: CONNACK's flags and return code (v5: reason code), else a packet id
        if i + 2 > end:
            raise RemoteProtocolError(0x81, "packet ends inside CONNACK's flags and return code, or the packet "
                                            "identifier")
        c = mv[i]
        d = mv[i + 1]
        i += 2
        if t == _CONNACK:  # (3.1 leaves the flags byte unused)
            if version == _V31:
                c = 0
            if c > 1 or (d > 5 and version < _V5):
                raise RemoteProtocolError(0x81, "reserved CONNACK flag bits %s or return code %d" % (bin(c), d))
            if c and d:
                raise protocol_error("CONNACK refuses the connection but says session present")
            p.session_present = c == 1
            p.reason = d
        else:
            p.pid = c = c << 8 | d
            if not c:
                raise RemoteProtocolError(0x81, "packet identifier 0")
    if not _MQTT5 and version == _V5:
        v5()  # (raises: this build has no MQTT 5)
    if _MQTT5 and version == _V5:
        v5().tail(mv, i, end, p)  # reason code, properties, SUBACK's and UNSUBACK's codes, to the end
    else:  # 3.x: what is left is SUBACK's return codes, or nothing
        c = bytes(mv[i:end])
        if t == _SUBACK:
            p.codes = list(c)
            # what strip() leaves holds a code 3.x does not know: 3.1 grants QoS 0-2, 3.1.1 adds 0x80 (failure)
            if not c or c.strip(b"\0\1\2\x80"[:version]):
                raise protocol_error("SUBACK without return codes, or with one other than 0-2 (3.1.1: 0x80)")
        elif c or t == _AUTH:
            raise RemoteProtocolError(0x81, "%s: %d unexpected bytes at its end, or a type 3.x does not have"
                                      % (NAMES.split()[t], end - i))
    return i


def read_publish(mv, pos, end, p, version):
    """Reads the PUBLISH framed at mv[pos:end] into Packet p and returns p (the session reuses one p, so this is
    its receive path): on MicroPython nothing is allocated but the payload view when the topic was read lately
    and the properties are none or a Topic Alias alone (p.alias; p.props stays None). Raises RemoteProtocolError.
    A topic read lately is recognised by its bytes on MicroPython (_TOPICS, a pure cache: bytes in, the validated
    str out), so a steady stream of messages builds no str."""
    f = mv[pos] & 15
    q = f >> 1 & 3
    if q == 3 or (f > 7 and not q):  # QoS 3, or DUP (bit 3 of the flags) on QoS 0
        raise RemoteProtocolError(0x81, "PUBLISH with QoS 3, or DUP on QoS 0")
    i = pos + 2
    while mv[i - 1] >> 7:  # past the Remaining Length, which frame() checked
        i += 1
    ts = i + 2
    if ts > end or (te := ts + (mv[i] << 8 | mv[i + 1])) > end:
        raise RemoteProtocolError(0x81, "packet ends inside the topic name or its length")
    s = ""
    n = te - ts
    if n:
        k = _TOPICS and 8  # (CPython: False)
        while k:
            k -= 1
            b = _TOPICS[k]
            j = len(b)
            if j == n:
                while j:
                    j -= 1
                    if b[j] != mv[ts + j]:
                        break
                else:
                    s = _TOPICS[k + 8]
                    break
        else:  # a new topic (or CPython)
            s = utf8(mv, ts, te, None)  # (None: "topic name" in its message)
            if "+" in s or "#" in s:
                raise RemoteProtocolError(0x90, "wildcard in topic name %r" % s)
            if _TOPICS:  # it replaces the oldest (only the bytes are allocated)
                k = _TOPICS[16]
                _TOPICS[k] = bytes(mv[ts:te])
                _TOPICS[k + 8] = s
                _TOPICS[16] = k + 1 & 7
    i = te
    p.pid = 0
    if q:
        i += 2
        if i > end or not (c := mv[te] << 8 | mv[te + 1]):
            raise RemoteProtocolError(0x81, "packet identifier 0, or the packet ends inside it")
        p.pid = c
    p.props = None
    p.alias = -1
    if not _MQTT5 and version == _V5:
        v5()  # (raises: this build has no MQTT 5)
    if _MQTT5 and version == _V5:
        i = v5().read_publish_props(mv, i, end, p)  # its properties: p.props, p.alias
    if not s and (not _MQTT5 or p.alias < 0):  # (a build without MQTT 5 has no aliases: -1)
        raise protocol_error("empty topic name without a topic alias")
    p.topic = s
    p.qos = q
    p.dup = f > 7  # (bit 3 of the 4)
    p.retain = f & 1 != 0
    p.payload = mv[i:end]
    return p


# ---------------------------------------------------------------- encoding

def _header(buf, off, v, n, later=0):
    # The fixed header of a packet whose body is n bytes long: the type and flags byte v, the Remaining Length.
    # (later: bytes of a streamed payload written after it, which need not fit now)
    if off + 1 + _vbi_len(n) + n - later > len(buf):
        raise LocalProtocolError(0x95, "a %d-byte packet does not fit the %d bytes left in the buffer"
                                 % (1 + _vbi_len(n) + n, len(buf) - off))
    buf[off] = v
    while n >> 7:
        off += 1
        buf[off] = n & 0x7F | 0x80
        n >>= 7
    buf[off + 1] = n
    return off + 2


def encode_publish(buf, version, topic, payload, qos=0, retain=False, dup=False, pid=0, props=None, alias=0, off=0,
                   length=0):
    """Writes a PUBLISH into buf at off and returns its length; buf None: only its length. Allocates nothing when
    topic is bytes (cache the encoded topic) and props is None; `alias` adds a Topic Alias property (topic b"" uses
    it alone; alias < 0: the alias -alias alone, whatever the topic, as aliases.TopicAliases answers). length: a
    streamed payload's (stream.py), whose bytes follow later: the header says length, payload is b"" (sized alone,
    payload may be the stream itself: its len())."""
    if not 0 <= qos <= 2 or (qos and not 0 < pid < 65536) or (dup and not qos):
        raise LocalProtocolError(0x81, "PUBLISH needs QoS 0-2, a packet id 1-65535 for QoS>0, no DUP at QoS 0")
    if not _MQTT5 and version == _V5:
        v5()  # (raises: this build has no MQTT 5)
    if _MQTT5 and alias and version < _V5:
        raise LocalProtocolError(0x82, "topic aliases need MQTT 5")
    if _MQTT5 and alias < 0:  # one the server already has: the alias alone, an empty topic name
        topic = b""
        alias = -alias
    pl = len(payload)
    n = _put_str(None, 0, topic) + (length or pl) + (qos and 2)  # (refuses a topic MQTT cannot carry)
    props5 = _MQTT5 and version == _V5 and (props or alias)  # MQTT 5 with properties (else an empty block)
    if _MQTT5 and version == _V5:
        n += v5().put_publish(None, 0, props, alias) if props5 else 1
    if buf is None:
        return 1 + _vbi_len(n) + n  # (the fixed header: its first byte and the Remaining Length)
    pos = _put_str(buf, _header(buf, off, _PUBLISH << 4 | dup << 3 | qos << 1 | retain, n, length), topic)
    if qos:  # (written here, not by put(): this is every publish's path)
        buf[pos] = pid >> 8
        buf[pos + 1] = pid & 0xFF
        pos += 2
    if props5:
        pos = P.put_publish(buf, pos, props, alias)  # P: loaded by the v5() just above
    elif _MQTT5 and version == _V5:
        buf[pos] = 0  # no properties
        pos += 1
    buf[pos:pos + pl] = payload
    return pos + pl - off


def encode(buf, p, version=_V5, off=0):
    """Writes packet p into buf at off for the given protocol level; returns its length. buf None: only its length
    (a packet other than PUBLISH)."""
    t = p.type
    if not _MQTT5 and version == _V5:
        v5()  # (raises: this build has no MQTT 5)
    if t == _PUBLISH:
        return encode_publish(buf, version, p.topic, p.payload, p.qos, p.retain, p.dup, p.pid, p.props, 0, off)
    # refused: a type outside 1-15, what only a server sends (CONNACK, SUBACK, UNSUBACK), AUTH below MQTT 5
    if not 0 < t < 16 or t == _CONNACK or t == _SUBACK or t == _UNSUBACK or (t == _AUTH and version < _V5):
        raise LocalProtocolError(0x82, "a client at MQTT level %d never sends packet type %d" % (version, t))
    # Two passes over the body, one function for both: b None counts its bytes, then b = buf writes them after
    # the fixed header. The body: its fixed fields (CONNECT's protocol name, level, flags and keep alive; a packet
    # id), what MQTT 5 adds there (props.py), then the rest (CONNECT's payload, SUBSCRIBE's, UNSUBSCRIBE's filters).
    b = None
    pos = 0
    while True:
        if t == _CONNECT:
            w = p.will
            u = p.username
            pw = p.password
            if version == _V31 and not 0 < len(p.client_id) <= 23:
                raise LocalProtocolError(0x85, "MQTT 3.1 needs a client id of 1 to 23 characters")
            if (version < _V5 and pw is not None and u is None) or (w and not 0 <= w.qos <= 2):
                raise LocalProtocolError(0x81, "MQTT 3.x cannot send a password without a user name; will QoS "
                                               "is 0-2")
            f = (u is not None) << 7 | (pw is not None) << 6 | bool(p.clean) << 1
            if w:
                f |= 4 | w.qos << 3 | bool(w.retain) << 5
            pos = _put_str(b, pos, b"MQIsdp" if version == _V31 else b"MQTT")
            pos = put(b, put(b, pos, version << 8 | f, 2), p.keepalive, 2)
        elif t < _PINGREQ:  # PUBACK..PUBCOMP, SUBSCRIBE, UNSUBSCRIBE
            if not p.pid:
                raise LocalProtocolError(0x81, "%s needs a packet identifier 1-65535" % NAMES.split()[t])
            pos = put(b, pos, p.pid, 2)
        if _MQTT5 and version == _V5:  # properties; an ack's, DISCONNECT's or AUTH's reason code before them
            pos = v5().put_fields(b, pos, p)
        if t == _CONNECT:
            pos = _put_str(b, pos, p.client_id)
            if w:
                if _MQTT5 and version == _V5:
                    pos = P.put_props(b, pos, w.props, 0, 0)  # P: loaded for the CONNECT's own properties; 0: a Will's
                pos = _put_str(b, _put_str(b, pos, w.topic), w.payload)
            for f in (u, pw):
                if f is not None:
                    pos = _put_str(b, pos, f)
        if t == _SUBSCRIBE or t == _UNSUBSCRIBE:  # (if, not elif: CONNECT's branch would end in a jump past it)
            ts = getattr(p, "topics", None)
            if not ts:
                raise LocalProtocolError(0x82, "%s needs at least one topic filter" % NAMES.split()[t])
            for f in ts:
                pos = put(b, _put_str(b, pos, f[0]), f[1], 1) if t == _SUBSCRIBE else _put_str(b, pos, f)
        if b:  # (a buffer _header() took: not empty)
            return pos - off
        if buf is None:
            return 1 + _vbi_len(pos) + pos
        b = buf
        # the fixed header flags: 0010 for PUBREL, SUBSCRIBE and UNSUBSCRIBE, 0000 for the others
        pos = _header(buf, off, t << 4 | (t == _PUBREL or t == _SUBSCRIBE or t == _UNSUBSCRIBE) << 1, pos)
