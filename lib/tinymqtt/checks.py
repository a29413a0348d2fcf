# The arguments of the application's requests (publish, subscribe, unsubscribe, the will), checked before the
# session queues or sends anything. Each check raises LocalProtocolError naming the argument and the one fault
# found, with MQTT's reason code where one fits (0x90 topic name, 0x8F topic filter, 0x9B QoS, 0x9A retain, 0x95
# packet too large; 0x82 for a value MQTT cannot carry at all), and changes nothing: a refused call leaves the
# client as it was, and nothing it refused can reach the server, fail there and come back at every reconnect.
# A limit the server announced (MQTT 5's CONNACK) is named as the server's, after the argument's own faults (it is
# Session5's, which reads the CONNACK: _check5); our own limits are named with the option that sets them.
from tinymqtt.errors import LocalProtocolError, const
from tinymqtt.packets import Packet, encode
from tinymqtt.topic import validate_name

_MQTT5 = const(1)  # const(0) in a board build without MQTT 5's props.py (tools/deploy/features.py)
_V5 = const(5)
_CONNECT = const(1)
_PUBLISH = const(3)
_SUBSCRIBE = const(8)
_BINARY = (bytes, bytearray, memoryview)  # (built once: a tuple written at the call would be built at each)


def check_publish(s, topic, payload, qos, retain, props):
    """publish()'s arguments, before the session encodes anything (its size: check_size, once encoded)."""
    if isinstance(topic, str):
        if topic not in s._topics:  # (a topic in the session's cache was checked when it came first)
            validate_name(topic)
    elif isinstance(topic, (bytes, bytearray)):  # encoded by the caller (to publish without allocating)
        if not topic or b"+" in topic or b"#" in topic or b"\x00" in topic:
            validate_name(str(topic, "utf-8"))  # (raises, naming the fault)
    else:
        validate_name(topic)  # (raises: not a str)
    _message(payload, qos, retain, "")
    _props(s, props, _PUBLISH, qos, retain)


def _message(payload, qos, retain, arg):
    # A message's payload, QoS and retain flag (arg: "" for publish's own, "will " for the will's)
    if not isinstance(payload, _BINARY) and not isinstance(payload, str):
        raise LocalProtocolError(0x82, "%spayload must be bytes, bytearray, memoryview or str, not %s"
                                 % (arg, type(payload).__name__))
    if not isinstance(qos, int) or not 0 <= qos <= 2:
        raise LocalProtocolError(0x9B, "%sqos must be a QoS of 0, 1 or 2, not %r" % (arg, qos))
    if not (retain is True or retain is False or retain == 0 or retain == 1):
        raise LocalProtocolError(0x82, "%sretain must be True or False (retained or not), not %r" % (arg, retain))


def _props(s, props, ptype, what, retain):
    # A request's properties (ptype: its packet type, 0 for the will's) and, on MQTT 5, the rest Session5._check5
    # checks (what: PUBLISH's QoS, with retain; SUBSCRIBE's or UNSUBSCRIBE's topics) and the server's limits from
    # its CONNACK; MQTT 3.x has no properties
    if _MQTT5 and s.version == _V5:
        s._check5(props, ptype, what, retain)
    elif props:
        raise LocalProtocolError(0x82, "props: MQTT 3.x carries no properties (they need version=5)")


def check_size(s, n, what, arg):
    """A packet of n bytes (what: its type's name) we are about to queue: within our send limit, the out_size
    option (on CPython it grows to it: docs/options.md), and within the server's Maximum Packet Size."""
    if n > s._send_max:  # (the smaller of the two)
        _refuse_size(s, n, what, arg)


def _refuse_size(s, n, what, arg):
    # Which limit the packet breaks. (Not in check_size: that one runs at every publish, and a frame as large as
    # these messages need goes on MicroPython's heap, docs/micropython32.md)
    own = s._out_max or s.out_size
    if n > own:
        raise LocalProtocolError(0x95, "%s: a %d-byte %s exceeds out_size %d, the largest packet this client sends "
                                       "(the out_size option raises it; it defaults to max_packet_size)"
                                 % (arg, n, what, own))
    raise LocalProtocolError(0x95, "%s: a %d-byte %s exceeds the server's Maximum Packet Size %d"
                             % (arg, n, what, s._server_max))


def check_subscribe(s, topics, props, t):
    """subscribe()'s arguments: topics [(filter, options)] (3.x: options is the QoS) and props; t _UNSUBSCRIBE:
    unsubscribe()'s, topics [filter]. Returns the packet's size in bytes."""
    sub = t == _SUBSCRIBE
    v5_ = _MQTT5 and s.version == _V5
    bad = not isinstance(topics, (list, tuple)) or not topics  # a non-empty list, each entry valid
    for f in () if bad else topics:
        if sub:  # SUBSCRIBE: (filter, options) pairs
            bad = not isinstance(f, (list, tuple)) or len(f) != 2
            if bad:
                break
            f, o = f  # the filter and its options
            # 3.x: a QoS; MQTT 5: subscription options whose low bits are the QoS
            if not isinstance(o, int) or not 0 <= o <= (255 if v5_ else 2) or o & 3 == 3:
                raise LocalProtocolError(0x9B, "qos must be a QoS of 0, 1 or 2%s, not %r"
                                         % (" (or sub_options(...))" if v5_ else "", o))
        validate_name(f, True, "filter")
    if bad:
        raise LocalProtocolError(0x8F, "topic must be a filter (str) or a non-empty list of %s, not %r"
                                 % ("(filter, qos) pairs" if sub else "filters", topics))
    _props(s, props, t, topics, 0)  # MQTT 5: shared subscriptions and the options' other bits too
    n = encode(None, Packet(t, pid=1, topics=topics, props=props), s.version)
    check_size(s, n, "SUBSCRIBE" if sub else "UNSUBSCRIBE", "topic")
    return n


def check_will(s, w):
    """The will (Session's will option): a Packet(PUBLISH, topic=, payload=, qos=, retain=, props=), or a tuple
    (topic, payload, qos, retain) or (topic, payload, qos, retain, props), as paho's will_set and umqtt's
    set_last_will take it. Returns it as a Packet: refused now, not by a CONNECT failing at every reconnect."""
    if isinstance(w, (tuple, list)) and 4 <= len(w) <= 5:
        w = Packet(_PUBLISH, topic=w[0], payload=w[1], qos=w[2], retain=w[3], props=w[4] if len(w) > 4 else None)
    elif not isinstance(w, Packet):
        raise LocalProtocolError(0x82, "will must be (topic, payload, qos, retain), the same with props last, or a "
                                       "Packet, not %r" % (w,))
    validate_name(w.topic, False, "will topic")
    _message(w.payload, w.qos, w.retain, "will ")
    _props(s, w.props, 0, None, 0)
    return w
