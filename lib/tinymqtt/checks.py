# The arguments of the application's requests (publish, subscribe, unsubscribe, the will), checked before the
# session queues or sends anything. Each check raises LocalProtocolError naming the argument and the one fault
# found, with MQTT's reason code where one fits (0x90 topic name, 0x8F topic filter, 0x9B QoS, 0x9A retain, 0x95
# packet too large; 0x82 for a value MQTT cannot carry at all), and changes nothing: a refused call leaves the
# client as it was, and nothing it refused can reach the server, fail there and come back at every reconnect.
# A limit the server announced (MQTT 5's CONNACK) is named as the server's; our own as the option that sets it.
from tinymqtt.errors import LocalProtocolError, const
from tinymqtt.packets import Packet, encode, v5
from tinymqtt.topic import validate_name

_MQTT5 = const(1)  # const(0) in a board build without MQTT 5's props.py (tools/deploy/features.py)
_V5 = const(5)
_CONNECT = const(1)
_PUBLISH = const(3)
_SUBSCRIBE = const(8)
_UNSUBSCRIBE = const(10)
_BINARY = (bytes, bytearray, memoryview)  # (built once: a tuple written at the call would be built at each)


def check_publish(s, topic, payload, qos, retain, props):
    """publish()'s arguments, before the session encodes anything (its size: check_size, once encoded)."""
    if isinstance(topic, str):
        if topic not in s._topics:  # (a topic in the session's cache was checked when it came first)
            validate_name(topic)
    elif isinstance(topic, (bytes, bytearray)):  # encoded by the caller (to publish without allocating)
        if not topic:
            raise LocalProtocolError(0x90, "topic is empty")
        if b"+" in topic or b"#" in topic or b"\x00" in topic:
            raise LocalProtocolError(0x90, "topic %r has a wildcard or U+0000" % (topic,))
    else:
        validate_name(topic)  # (raises: not a str)
    _message(payload, qos, retain, "")
    _props(s, props, _PUBLISH, "props")
    if _MQTT5 and s.version == _V5:  # the server's limits, from its CONNACK (Session5._limits)
        if retain and s._lacks & 1:
            raise LocalProtocolError(0x9A, "retain: the server does not support retained messages (its CONNACK "
                                           "says Retain Available 0)")
        if qos > 2 - (s._lacks >> 4):
            raise LocalProtocolError(0x9B, "qos %d: the server's Maximum QoS is %d" % (qos, 2 - (s._lacks >> 4)))


def _message(payload, qos, retain, arg):
    # A message's payload, QoS and retain flag (arg: "" for publish's own, "will " for the will's)
    if not isinstance(payload, _BINARY) and not isinstance(payload, str):
        raise LocalProtocolError(0x82, "%spayload must be bytes, bytearray, memoryview or str, not %s"
                                 % (arg, type(payload).__name__))
    if not isinstance(qos, int) or not 0 <= qos <= 2:
        raise LocalProtocolError(0x9B, "%sqos must be 0, 1 or 2, not %r" % (arg, qos))
    if not (retain is True or retain is False or retain == 0 or retain == 1):
        raise LocalProtocolError(0x82, "%sretain must be True or False, not %r" % (arg, retain))


def _props(s, props, ptype, arg):
    # MQTT 5 properties for a packet of type ptype (0: the will's): a dict {property id: value}; MQTT 3.x has none.
    if not props:
        return
    if not _MQTT5 or s.version < _V5:
        raise LocalProtocolError(0x82, "%s: MQTT 3.x carries no properties (they need version=5)" % arg)
    if not isinstance(props, dict):
        raise LocalProtocolError(0x82, "%s must be a dict {property id: value}, not %s" % (arg, type(props).__name__))
    P = v5()
    for k in props:
        try:  # sized alone: a value of the wrong type fails here, not later inside a packet being written
            P.put_props(None, 0, {k: props[k]}, ptype, 0)
        except (TypeError, ValueError, IndexError, KeyError):
            raise LocalProtocolError(0x82, "%s: property %r has a value of the wrong type or form: %r"
                                     % (arg, k, props[k]))


def check_size(s, n, what, arg):
    """A packet of n bytes (what: its type's name) we are about to queue: within our send limit, the out_size
    option (on CPython it grows to it: docs/options.md), and within the server's Maximum Packet Size."""
    own = s._out_max or s.out_size
    if n > own:
        raise LocalProtocolError(0x95, "%s: a %d-byte %s exceeds out_size %d, the largest packet this client sends "
                                       "(the out_size option raises it)" % (arg, n, what, own))
    if n > s._most:
        raise LocalProtocolError(0x95, "%s: a %d-byte %s exceeds the server's Maximum Packet Size %d"
                                 % (arg, n, what, s._most))


def _filters(s, filters, pairs):
    # The filters of a SUBSCRIBE ([(filter, options)]) or an UNSUBSCRIBE ([filter]): a non-empty list, each valid
    if not isinstance(filters, (list, tuple)) or not filters:
        raise LocalProtocolError(0x8F, "topic must be a filter (str) or a non-empty list of %s, not %r"
                                 % ("(filter, qos) pairs" if pairs else "filters", filters))
    for f in filters:
        if pairs:  # SUBSCRIBE: (filter, options) pairs
            if not isinstance(f, (list, tuple)) or len(f) != 2:
                raise LocalProtocolError(0x8F, "topic: each item must be a (filter, qos or options) pair, not %r"
                                         % (f,))
            f = f[0]
        validate_name(f, True, "filter")
        if _MQTT5 and s.version == _V5 and f.startswith("$share/"):  # a shared subscription (MQTT 5 4.8.2)
            i = f.find("/", 7)
            if i < 8 or "+" in f[7:i] or "#" in f[7:i] or i + 1 == len(f):
                raise LocalProtocolError(0x8F, "filter %s: $share/ needs a share name without wildcards, then a "
                                               "filter" % repr(f)[:24])


def check_subscribe(s, topics, props):
    """subscribe()'s arguments: topics [(filter, options)] (3.x: options is the QoS), props. Returns the
    SUBSCRIBE's size in bytes."""
    _filters(s, topics, True)
    v5_ = _MQTT5 and s.version == _V5
    for f, o in topics:
        if not isinstance(o, int) or not 0 <= o <= (255 if v5_ else 2) or o & 3 == 3:
            raise LocalProtocolError(0x9B, "qos must be 0, 1 or 2%s, not %r"
                                     % (" (or sub_options(...))" if v5_ else "", o))
        if v5_:
            if o >> 4 & 3 == 3 or o >> 6:
                raise LocalProtocolError(0x82, "options 0x%02X: Retain Handling 3 and bits 6-7 are reserved" % o)
            lacks = s._lacks  # the server's CONNACK: what it does not support
            if f.startswith("$share/"):
                if lacks & 8:
                    raise LocalProtocolError(0x9E, "filter %r: the server does not support shared subscriptions"
                                             % f)
                if o & 4:
                    raise LocalProtocolError(0x82, "options: No Local on shared subscription %r" % f)
            if lacks & 2 and ("+" in f or "#" in f):
                raise LocalProtocolError(0xA2, "filter %r: the server does not support wildcard subscriptions" % f)
    _props(s, props, _SUBSCRIBE, "props")
    if _MQTT5 and props and 0x0B in props and s._lacks & 4:
        raise LocalProtocolError(0xA1, "props: the server does not support subscription identifiers")
    n = encode(None, Packet(_SUBSCRIBE, pid=1, topics=topics, props=props), s.version)
    check_size(s, n, "SUBSCRIBE", "topic")
    return n


def check_unsubscribe(s, filters, props):
    """unsubscribe()'s arguments: filters [filter], props. Returns the UNSUBSCRIBE's size, as check_subscribe."""
    _filters(s, filters, False)
    _props(s, props, _UNSUBSCRIBE, "props")
    n = encode(None, Packet(_UNSUBSCRIBE, pid=1, topics=filters, props=props), s.version)
    check_size(s, n, "UNSUBSCRIBE", "topic")
    return n


def check_will(s, w):
    """The will (Session's will option): a Packet(PUBLISH, topic=, payload=, qos=, retain=, props=), or a tuple
    (topic, payload, qos, retain) or (topic, payload, qos, retain, props), as paho's will_set and umqtt's
    set_last_will take it. Returns it as a Packet; raises when it could never go out in a CONNECT (which would
    fail at every reconnect)."""
    if isinstance(w, (tuple, list)):
        if not 4 <= len(w) <= 5:
            raise LocalProtocolError(0x82, "will must be (topic, payload, qos, retain) or (topic, payload, qos, "
                                           "retain, props), not %d items" % len(w))
        w = Packet(_PUBLISH, topic=w[0], payload=w[1], qos=w[2], retain=w[3], props=w[4] if len(w) > 4 else None)
    elif not isinstance(w, Packet):
        raise LocalProtocolError(0x82, "will must be a tuple (topic, payload, qos, retain[, props]) or a "
                                       "Packet(PUBLISH, ...), not %s" % type(w).__name__)
    validate_name(w.topic, False, "will topic")
    _message(w.payload, w.qos, w.retain, "will ")
    _props(s, w.props, 0, "will props")
    check_size(s, encode(None, Packet(_CONNECT, client_id=s.client_id, clean=1, keepalive=0, will=w,
                                      username=s.username, password=s.password, props=None), s.version),
               "CONNECT", "will")
    return w
