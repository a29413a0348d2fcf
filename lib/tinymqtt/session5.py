# MQTT 5 on top of the MQTT 3.1/3.1.1 session: CONNECT properties, the server's limits from CONNACK, inbound
# topic aliases, reason codes, server DISCONNECT and AUTH. A 3.1.1 board never imports it; the drivers choose
# Session5 for version=5 (tinymqtt.driver.new_session). Everything else, MQTT 5's publish (properties, outbound
# topic aliases, the server's limits) included, is Session's.
from tinymqtt.errors import LocalProtocolError, RemoteProtocolError, ConnectError, ConnectionLost, protocol_error
from tinymqtt.packets import Packet, read_packet, v5
from tinymqtt.packets import read_publish as _read_message  # (props has a read_publish: one namespace when bundled)
from tinymqtt.session import Session, const
from tinymqtt.aliases import TopicAliases

# MQTT 5's level and the packet types used here (tinymqtt.wire's NAMES), then the property identifiers
# (tinymqtt.props names them all): copies that tests/test_names.py checks against their sources.
_V5 = const(5)
_DISCONNECTED = const(0)  # (Session's states)
_CONNECTING = const(1)
_CONNECTED = const(2)
_PUBLISH = const(3)
_SUBSCRIBE = const(8)
_DISCONNECT = const(14)
_AUTH = const(15)
_SUBSCRIPTION_IDENTIFIER = const(0x0B)
_SESSION_EXPIRY_INTERVAL = const(0x11)
_ASSIGNED_CLIENT_IDENTIFIER = const(0x12)
_SERVER_KEEP_ALIVE = const(0x13)
_AUTHENTICATION_METHOD = const(0x15)
_REASON_STRING = const(0x1F)
_RECEIVE_MAXIMUM = const(0x21)
_TOPIC_ALIAS_MAXIMUM = const(0x22)
_MAXIMUM_QOS = const(0x24)
_RETAIN_AVAILABLE = const(0x25)
_MAXIMUM_PACKET_SIZE = const(0x27)
_WILDCARD_SUBSCRIPTION_AVAILABLE = const(0x28)
_SUBSCRIPTION_IDENTIFIER_AVAILABLE = const(0x29)
_SHARED_SUBSCRIPTION_AVAILABLE = const(0x2A)


class Session5(Session):
    """Session(**options) for MQTT 5: the same options, and props (CONNECT properties), session_expiry,
    topic_alias_maximum (inbound aliases we accept) and send_alias_maximum (outbound ones we use)."""

    def __init__(self, version=_V5, props=None, session_expiry=0, topic_alias_maximum=0, send_alias_maximum=16,
                 **options):
        if version != _V5:
            raise LocalProtocolError(0x84, "Session5 speaks MQTT 5 only; 3.1 and 3.1.1 are session.Session")
        v5()  # the properties module loads now; a build without it (profile mqtt311) refuses here
        Session.__init__(self, version=_V5, **options)
        self.props, self.session_expiry = props, session_expiry
        self.topic_alias_maximum, self.send_alias_maximum = topic_alias_maximum, send_alias_maximum
        self.retry_ms = 0  # MQTT 5 resends only on a new connection [MQTT-4.4.0-1]
        self._rx_alias = [None]
        self.expiry_granted = 0  # the Session Expiry Interval the last CONNACK granted (0: none yet, or a clean
        # session)
        self._limits({})

    def _limits(self, pr):
        # The server's limits from CONNACK properties, with the spec's defaults when absent.
        self.server_receive_maximum = pr.get(_RECEIVE_MAXIMUM, 65535)
        m = pr.get(_MAXIMUM_PACKET_SIZE, 268435460)
        self._server_max = m  # (checks.check_size holds every packet we send to it)
        self._send_max = min(self._out_max or self.out_size, m)
        # What the server supports (MQTT 5 section 3.2.2.3): publish() and subscribe() refuse the rest.
        self.retain_available = pr.get(_RETAIN_AVAILABLE, 1)
        self.maximum_qos = pr.get(_MAXIMUM_QOS, 2)
        self.wildcards_available = pr.get(_WILDCARD_SUBSCRIPTION_AVAILABLE, 1)
        self.sub_ids_available = pr.get(_SUBSCRIPTION_IDENTIFIER_AVAILABLE, 1)
        self.shared_available = pr.get(_SHARED_SUBSCRIPTION_AVAILABLE, 1)
        self.keepalive_ms = pr.get(_SERVER_KEEP_ALIVE, self.keepalive) * 1000
        # an ack for a packet id we do not know says so (0x92), unless the server takes no 5-byte packet
        self._not_found = 0x92 if m >= 5 else 0
        # the outbound topic aliases the server granted (max 0: none), a new set for each connection
        self.aliases = TopicAliases(min(pr.get(_TOPIC_ALIAS_MAXIMUM, 0), self.send_alias_maximum))

    # ------------------------------------------------------------ connection

    def connect(self, now):
        self._limits({})
        self._rx_alias = [None] * (self.topic_alias_maximum + 1)
        pr = dict(self.props or {})
        if self.session_expiry:
            pr[_SESSION_EXPIRY_INTERVAL] = self.session_expiry
        if self.receive_maximum != 65535:
            pr[_RECEIVE_MAXIMUM] = self.receive_maximum
        # our Maximum Packet Size: the receive buffer's, or what chunks=True subscriptions take (max_stream_size,
        # its header in the buffer)
        pr[_MAXIMUM_PACKET_SIZE] = min(max(self._in_max or len(self.inbuf),
                                           self.max_stream_size and self.max_stream_size + len(self.inbuf)), 268435460)
        if self.topic_alias_maximum:
            pr[_TOPIC_ALIAS_MAXIMUM] = self.topic_alias_maximum
        # The first connection starts as asked; later ones resume whatever session the server kept. (Session's
        # connect() sends clean and props: this CONNECT's, then the application's again.)
        asked, props = self.clean, self.props
        self.clean, self.props = asked and not self.expiry_granted, pr
        try:
            Session.connect(self, now)
        finally:  # (a CONNECT that cannot be sent raises: the application's own values stay)
            self.clean, self.props = asked, props

    def _on_connack(self, p):
        pr = p.props or {}
        if p.reason >= 0x80:
            raise ConnectError(p.reason, "server refused the connection: %s"
                               % pr.get(_REASON_STRING, "(no reason string)"))
        if p.session_present and self._clean_now:  # checked before anything of this CONNACK is taken in
            raise protocol_error("CONNACK says session present to a clean start")
        self._limits(pr)
        # The server's Session Expiry Interval replaces ours [MQTT-3.2.2.3.2]: it decides what a reconnect resumes.
        self.expiry_granted = pr.get(_SESSION_EXPIRY_INTERVAL, self.session_expiry)
        if _ASSIGNED_CLIENT_IDENTIFIER in pr:
            self.client_id = pr[_ASSIGNED_CLIENT_IDENTIFIER]
        Session._on_connack(self, p)

    def received(self, n, now):
        # The server broke the rules: tell it why before the driver closes the connection.
        st = self.state
        try:
            return Session.received(self, n, now)
        except RemoteProtocolError as e:
            if st and len(self.out) - self.outlen >= 8:  # (st: not DISCONNECTED, 0)
                self._send(Packet(_DISCONNECT, reason=e.reason), 0, 0)
            raise

    def _packet(self, buf, pos, total):
        # A PUBLISH gets its topic from its Topic Alias first; DISCONNECT and AUTH are what only a v5 server
        # sends; Session takes every other packet.
        t = buf[pos] >> 4
        if t == _PUBLISH and self.state != _CONNECTING:
            p = _read_message(self._inmv, pos, pos + total, self._msg, _V5)
            a = p.alias  # (-1 without a Topic Alias)
            if a >= 0:
                if not a or a > self.topic_alias_maximum:
                    raise RemoteProtocolError(0x94, "topic alias %d outside 1..%d" % (a, self.topic_alias_maximum))
                if p.topic:
                    self._rx_alias[a] = p.topic
                else:
                    p.topic = self._rx_alias[a]
                    if p.topic is None:
                        raise protocol_error("topic alias %d was never set on this connection" % a)
            return self._on_publish(p)
        if t < _DISCONNECT:  # (DISCONNECT and AUTH, what only an MQTT 5 server sends, are the last two types)
            return Session._packet(self, buf, pos, total)
        p = Packet(t)  # DISCONNECT or AUTH, read in place as Session reads the others
        read_packet(self._inmv, pos, pos + total, p, _V5)
        c, pr = p.reason, p.props or {}
        if self.state == _CONNECTING and (t == _DISCONNECT or c != 0x18):
            raise protocol_error("DISCONNECT, or AUTH with reason code 0x%02X, before CONNACK" % c)
        if t == _DISCONNECT:
            if c == 0x04 or _SESSION_EXPIRY_INTERVAL in pr:  # [MQTT-3.14.2-2], 0x04 is ours
                raise protocol_error("server DISCONNECT with %s" % ("reason code 0x04 (a client's)" if p.reason == 4
                                                                   else "a Session Expiry Interval"))
            self.state = _DISCONNECTED
            self.on_event(_DISCONNECT, p, c)
            raise ConnectionLost(c, "server sent DISCONNECT")
        # Enhanced authentication (v5 4.12): only after a CONNECT with an Authentication Method, always with
        # that method; 0x18 continues, 0x00 ends a re-authentication, 0x19 is the client's alone.
        method = (self.props or {}).get(_AUTHENTICATION_METHOD)
        if method is None or pr.get(_AUTHENTICATION_METHOD) != method or c == 0x19:
            raise protocol_error("AUTH with reason code 0x%02X and Authentication Method %r, after a CONNECT with %r "
                                 "(it must be the same; 0x19 is the client's alone)"
                                 % (c, pr.get(_AUTHENTICATION_METHOD), method))
        self.on_event(_AUTH, p, c)

    def auth(self, reason, props):
        """Enhanced authentication: answers a server AUTH (0x18), or starts a re-authentication (0x19).
        The Authentication Method of our CONNECT (props) is added when props lack it, as the spec requires."""
        method = (self.props or {}).get(_AUTHENTICATION_METHOD)
        if method is None:
            raise LocalProtocolError(0x82, "enhanced authentication needs an Authentication Method in the CONNECT "
                                           "properties")
        props = dict(props or {})  # (AUTH is rare: a copy each time is simpler than a check)
        props.setdefault(_AUTHENTICATION_METHOD, method)
        self._send(Packet(_AUTH, reason=reason, props=props), 0, 0)

    # ------------------------------------------------------------ MQTT 5's side of the argument checks (checks.py)

    def _check5(self, props, ptype, what, retain):
        """What checks.py leaves to MQTT 5, after the arguments' own faults: the properties of a packet of type
        ptype (0: the will's), then for PUBLISH what is its QoS (with retain), for SUBSCRIBE its [(filter, options)],
        for UNSUBSCRIBE its [filter]: the shared subscriptions' rules, the options' reserved bits, and the server's
        limits from its CONNACK, named as the server's. Raises LocalProtocolError, changing nothing."""
        if props is not None and not isinstance(props, dict):
            raise LocalProtocolError(0x82, "props must be a dict {property id: value}, not %s" % type(props).__name__)
        for k in props or ():
            try:  # sized alone: a value of the wrong type fails here, not inside a packet being written
                v5().put_props(None, 0, {k: props[k]}, ptype, 0)
            except (TypeError, ValueError, IndexError, KeyError):
                raise LocalProtocolError(0x82, "props: property %r has a value of the wrong type or form: %r"
                                         % (k, props[k]))
        if not ptype:  # (the will's: checked at construction, before any CONNACK)
            return
        if ptype == _PUBLISH:
            if retain and not self.retain_available:
                raise LocalProtocolError(0x9A, "retain: the server does not support retained messages (its CONNACK "
                                               "says Retain Available 0)")
            if what > self.maximum_qos:
                raise LocalProtocolError(0x9B, "qos %d: the server's Maximum QoS is %d" % (what, self.maximum_qos))
            return
        if props and _SUBSCRIPTION_IDENTIFIER in props and not self.sub_ids_available:
            raise LocalProtocolError(0xA1, "props: the server does not support subscription identifiers")
        for f in what or ():
            o = 0
            if ptype == _SUBSCRIBE:
                f, o = f
                if o >> 4 & 3 == 3 or o >> 6:
                    raise LocalProtocolError(0x82, "options 0x%02X: Retain Handling 3 and bits 6-7 are reserved" % o)
                if not self.wildcards_available and ("+" in f or "#" in f):
                    raise LocalProtocolError(0xA2, "filter %r: the server does not support wildcard subscriptions"
                                             % f)
            if f.startswith("$share/"):  # a shared subscription (4.8.2): $share/{ShareName}/{filter}
                i = f.find("/", 7)
                if i < 8 or "+" in f[7:i] or "#" in f[7:i] or i + 1 == len(f):
                    raise LocalProtocolError(0x8F, "filter %s: $share/ needs a share name without wildcards, then "
                                                   "a filter" % repr(f)[:24])
                if not self.shared_available and ptype == _SUBSCRIBE:
                    raise LocalProtocolError(0x9E, "filter %r: the server does not support shared subscriptions" % f)
                if o & 4:
                    raise LocalProtocolError(0x82, "options: No Local on shared subscription %r" % f)
