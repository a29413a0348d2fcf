# Property-based round trips (CPython only): every valid Packet of every type for every protocol level
# decodes back to itself, and encode -> decode -> encode is stable on bytes.
# Properties (v5 only) are generated from props.TABLE: its value types and packet masks, with User Property
# repeated anywhere and Subscription Identifier repeated in PUBLISH.
from hypothesis import given, settings, strategies as st, HealthCheck

from tinymqtt import packets as K
from tinymqtt import props as P
from tinymqtt.packets import frame
from tinymqtt_cli.server_codec import Packet, encode, decode  # the server half too: any packet, both ways

V31, V311, V5 = 3, 4, 5
BUF = bytearray(1 << 20)
SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# MQTT strings: any well-formed UTF-8 without U+0000 (hypothesis text() never yields surrogates)
text = st.text(alphabet=st.characters(exclude_characters="\x00", exclude_categories=("Cs",)), max_size=12)
topic_name = text.filter(lambda s: "+" not in s and "#" not in s)
blob = st.binary(max_size=24)
pid = st.integers(1, 65535)
u16 = st.integers(0, 65535)
u32 = st.integers(0, 2 ** 32 - 1)
vbi = st.integers(0, 268435455)
pair = st.tuples(text, text)

_NONZERO = {0x21, 0x27, 0x0B}
_BYTE, _BOOL, _U16, _U32, _VBI, _STR, _BIN = range(1, 8)  # props.TABLE's value types (low 4 bits); 8: PAIR


def _value(pid_, ptype):
    t = P.TABLE[pid_] & 15  # the value type
    if t == _BYTE or t == _BOOL:
        s = st.integers(0, 1)
    elif t == _U16:
        s = u16
    elif t == _U32:
        s = u32
    elif t == _VBI:
        s = vbi
    elif t == _STR:
        s = text
    elif t == _BIN:
        s = blob
    else:
        s = pair
    if pid_ in _NONZERO:
        s = s.filter(lambda v: v != 0)
    if pid_ == P.USER_PROPERTY or (pid_ == P.SUBSCRIPTION_IDENTIFIER and ptype == K.PUBLISH):
        s = st.lists(s, min_size=1, max_size=3)  # repeatable: a list of values, in order
    return s


def props_for(ptype):
    """None or a non-empty dict of properties allowed in packet type ptype (P.WILL for will properties)."""
    allowed = sorted(k for k, spec in P.TABLE.items() if spec >> 4 & (1 << ptype))  # bits 4...: packet types
    assert allowed
    return st.one_of(
        st.none(),
        st.dictionaries(st.sampled_from(allowed), st.none(), min_size=1, max_size=5).flatmap(
            lambda d: st.fixed_dictionaries({k: _value(k, ptype) for k in d})))


def maybe_props(v, ptype):
    return props_for(ptype) if v == V5 else st.none()


def reasons(t, v):
    return st.sampled_from(list(P.REASONS[t])) if v == V5 else st.just(0)


@st.composite
def publish(draw, v):
    qos = draw(st.integers(0, 2))
    props = draw(maybe_props(v, K.PUBLISH))
    topic = draw(topic_name)
    if not topic:
        if v == V5:
            props = dict(props or {})
            props[P.TOPIC_ALIAS] = draw(st.integers(1, 65535))
        else:
            topic = "t"
    return Packet(K.PUBLISH, topic=topic, payload=draw(blob), qos=qos, retain=draw(st.booleans()),
                  dup=draw(st.booleans()) if qos else False, pid=draw(pid) if qos else 0, props=props)


@st.composite
def will(draw, v):
    return Packet(K.PUBLISH, topic=draw(text), payload=draw(blob), qos=draw(st.integers(0, 2)),
                  retain=draw(st.booleans()), props=draw(maybe_props(v, P.WILL)))


@st.composite
def connect(draw, v):
    if v == V31:
        client_id = draw(st.text(alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7E),
                                 min_size=1, max_size=23))
    else:
        client_id = draw(text)
    username = draw(st.none() | text)
    password = draw(st.none() | blob)
    if v < V5 and username is None:
        password = None
    return Packet(K.CONNECT, client_id=client_id, clean=draw(st.booleans()), keepalive=draw(u16),
                  username=username, password=password, will=draw(st.none() | will(v)),
                  props=draw(maybe_props(v, K.CONNECT)))


@st.composite
def connack(draw, v):
    if v == V5:
        reason = draw(reasons(K.CONNACK, v))
    else:
        reason = draw(st.integers(0, 5))
    sp = draw(st.booleans()) if reason == 0 and v > V31 else False
    return Packet(K.CONNACK, session_present=sp, reason=reason, props=draw(maybe_props(v, K.CONNACK)))


@st.composite
def ack(draw, v, t):
    return Packet(t, pid=draw(pid), reason=draw(reasons(t, v)), props=draw(maybe_props(v, t)))


@st.composite
def subscribe(draw, v):
    if v == V5:
        opts = st.builds(K.sub_options, st.integers(0, 2), st.booleans(), st.booleans(), st.integers(0, 2))
    else:
        opts = st.integers(0, 2)
    return Packet(K.SUBSCRIBE, pid=draw(pid), topics=draw(st.lists(st.tuples(text, opts), min_size=1, max_size=4)),
                  props=draw(maybe_props(v, K.SUBSCRIBE)))


@st.composite
def unsubscribe(draw, v):
    return Packet(K.UNSUBSCRIBE, pid=draw(pid), topics=draw(st.lists(text, min_size=1, max_size=4)),
                  props=draw(maybe_props(v, K.UNSUBSCRIBE)))


@st.composite
def suback(draw, v, t):
    if v == V5:
        codes = st.sampled_from(list(P.REASONS[t]))
    elif t == K.UNSUBACK:
        return Packet(t, pid=draw(pid))
    else:
        codes = st.sampled_from([0, 1, 2] if v == V31 else [0, 1, 2, 0x80])  # the SUBACK codes of 3.1, 3.1.1
    return Packet(t, pid=draw(pid), codes=draw(st.lists(codes, min_size=1, max_size=5)),
                  props=draw(maybe_props(v, t)))


@st.composite
def empty(draw, v, t):
    if v == V5 and t >= K.DISCONNECT:
        return Packet(t, reason=draw(reasons(t, v)), props=draw(maybe_props(v, t)))
    return Packet(t)


def packets(v):
    s = [publish(v), connect(v), connack(v), subscribe(v), unsubscribe(v),
         suback(v, K.SUBACK), suback(v, K.UNSUBACK), empty(v, K.PINGREQ), empty(v, K.PINGRESP),
         empty(v, K.DISCONNECT)]
    s += [ack(v, t) for t in (K.PUBACK, K.PUBREC, K.PUBREL, K.PUBCOMP)]
    if v == V5:
        s.append(empty(v, K.AUTH))
    return st.one_of(s)


def roundtrip(p, v):
    n = encode(BUF, p, v)
    data = bytes(BUF[:n])
    assert frame(data, n) == n
    d = decode(memoryview(data), v)
    assert d == p, "%r\n!= %r\nbytes %s" % (d, p, data.hex())
    if p.type == K.CONNECT:
        assert d.version == v
    # encode(decode(encode(p))) == encode(p)
    m = encode(BUF, d, v)
    assert bytes(BUF[:m]) == data
    return data


@SETTINGS
@given(packets(V31))
def test_roundtrip_v31(p):
    roundtrip(p, V31)


@SETTINGS
@given(packets(V311))
def test_roundtrip_v311(p):
    roundtrip(p, V311)


@SETTINGS
@given(packets(V5))
def test_roundtrip_v5(p):
    roundtrip(p, V5)


@SETTINGS
@given(publish(V5))
def test_roundtrip_v5_publish(p):
    roundtrip(p, V5)


@SETTINGS
@given(connect(V5))
def test_roundtrip_v5_connect(p):
    roundtrip(p, V5)


@SETTINGS
@given(st.sampled_from([K.CONNECT, K.CONNACK, K.PUBLISH, K.PUBACK, K.PUBREC, K.PUBREL, K.PUBCOMP, K.SUBSCRIBE,
                        K.SUBACK, K.UNSUBSCRIBE, K.UNSUBACK, K.DISCONNECT, K.AUTH, P.WILL]).flatmap(
    lambda t: st.tuples(st.just(t), props_for(t))))
def test_props_every_packet_type(tp):
    # each packet type's full property table, through a packet of that type
    t, props = tp
    if t == P.WILL:
        p = Packet(K.CONNECT, client_id="c", will=Packet(K.PUBLISH, topic="w", payload=b"", props=props))
    elif t == K.CONNECT:
        p = Packet(K.CONNECT, client_id="c", props=props)
    elif t == K.CONNACK:
        p = Packet(K.CONNACK, props=props)
    elif t == K.PUBLISH:
        p = Packet(K.PUBLISH, topic="t", props=props)
    elif t in (K.SUBSCRIBE,):
        p = Packet(t, pid=1, topics=[("a", 0)], props=props)
    elif t == K.UNSUBSCRIBE:
        p = Packet(t, pid=1, topics=["a"], props=props)
    elif t in (K.SUBACK, K.UNSUBACK):
        p = Packet(t, pid=1, codes=[0], props=props)
    elif t in (K.DISCONNECT, K.AUTH):
        p = Packet(t, props=props)
    else:
        p = Packet(t, pid=1, props=props)
    roundtrip(p, V5)


@SETTINGS
@given(st.binary(min_size=0, max_size=64), st.integers(V31, V5))
def test_decode_then_encode_is_stable(data, v):
    # any bytes that decode at all re-encode to something that decodes to the same packet
    from tinymqtt.errors import RemoteProtocolError, LocalProtocolError
    try:
        p = decode(data, v)
    except RemoteProtocolError:
        return
    try:
        n = encode(BUF, p, p.version if p.type == K.CONNECT else v)
    except LocalProtocolError:
        return
    assert decode(bytes(BUF[:n]), p.version if p.type == K.CONNECT else v) == p
