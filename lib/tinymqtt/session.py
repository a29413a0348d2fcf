# Every client-side rule of MQTT 3.1 and 3.1.1, and MQTT 5's publish, sans-IO: bytes and the time go in, packets
# come out in `out` and events go to `on_event`. It never touches a socket or a clock. The rest of MQTT 5
# (CONNECT and CONNACK properties, inbound topic aliases, DISCONNECT, AUTH) is Session5 (session5.py), built on
# this class; a 3.1.1 board never loads it, and its build compiles out what the _MQTT5 flag guards here.
#
# Theory of operation. A driver (the blocking or the asyncio client) owns the transport and the clock:
#  1. it calls connect(now), and after every call writes out[:outlen] in one write and sets outlen = 0,
#     then calls pump() (queued messages waiting for room in `out` go out then);
#  2. it reads into inbuf[inlen:] and calls received(n, now), and received(0, now) again while that
#     returns True (processing stops early when `out` is nearly full, so the driver can write it);
#  3. it calls tick(now) within the milliseconds tick() last returned: keep-alive, dead-link detection,
#     3.x retries.
# Two rules. Whatever ends a connection raises (RemoteProtocolError, ConnectError, ConnectionLost) and the
# driver then closes the transport, writing `out` first (it may hold a DISCONNECT with the reason code).
# Whatever must survive a reconnect (in-flight messages, inbound QoS 2 ids, subscriptions) lives here.
# Messages the application acknowledges itself (manual_ack True, or None: the asyncio client's) are app_acks.py's:
# the class app_acks.extended(Session) has them (driver.new_session builds it); Session itself refuses manual_ack
# (0x84). The outbound flows are inflight.py's table; what a server may send when is _SERVER_SENDS below.
from tinymqtt.errors import LocalProtocolError, RemoteProtocolError, ConnectError, ConnectionLost, protocol_error
from tinymqtt.packets import Packet, encode, encode_publish, frame, read_publish, read_packet, NAMES, v5, const
from tinymqtt.inflight import Inflight, ticks_diff, LOST  # (LOST, ticks_diff: the drivers import them from here)
from tinymqtt.checks import check_publish, check_size, check_subscribe, check_will

# Packet types (tinymqtt.wire's NAMES), and the outbound flows' states, events and actions (tinymqtt.inflight
# has their table): copies, which tests/test_names.py checks against their one source.
_V31 = const(3)
_V311 = const(4)
_V5 = const(5)
_CONNECT = const(1)
_CONNACK = const(2)
_PUBLISH = const(3)
_PUBACK = const(4)
_PUBREC = const(5)
_PUBREL = const(6)
_PUBCOMP = const(7)
_SUBSCRIBE = const(8)
_SUBACK = const(9)
_UNSUBSCRIBE = const(10)
_UNSUBACK = const(11)
_PINGREQ = const(12)
_PINGRESP = const(13)
_DISCONNECT = const(14)
_AUTH = const(15)
_QUEUED = const(1)
_RESEND_PUBREL = const(4)
_CONTROL = const(8)
_FIRST_QUEUED = const(1)
_LAST_QUEUED = const(4)
_WRITE_QOS0 = const(2)
_WRITE_PUBREL = const(5)
_GOT_PUBACK = const(6)
_GOT_PUBREC = const(7)
_GOT_REFUSAL = const(8)
_GOT_PUBCOMP = const(9)
_GOT_SUBACK = const(10)
_SEND_PUBREL = const(2)
_NOT_IN_FLIGHT = const(6)
_NOT_EXPECTED = const(7)

# Session.state, the connection's
_DISCONNECTED = const(0)
_CONNECTING = const(1)  # CONNECT sent
_CONNECTED = const(2)  # CONNACK accepted

# What a server may send (MQTT 3.1.1 and 5.0 section 2.1.2), by packet type: in which connection state.
_RESERVED = const(0)  # type 0: the reader refuses it as malformed
_CLIENT_ONLY = const(1)  # a client's packet: a server never sends it
_BEFORE_CONNACK = const(2)
_AFTER_CONNACK = const(3)
_MQTT5_ONLY = const(4)  # DISCONNECT after CONNACK, AUTH before and after: Session5 takes them
_SERVER_SENDS = (
    _RESERVED,  # 0
    _CLIENT_ONLY,  # CONNECT
    _BEFORE_CONNACK,  # CONNACK
    _AFTER_CONNACK,  # PUBLISH (one that comes before CONNACK is read first, to say what is wrong with it)
    _AFTER_CONNACK,  # PUBACK
    _AFTER_CONNACK,  # PUBREC
    _AFTER_CONNACK,  # PUBREL
    _AFTER_CONNACK,  # PUBCOMP
    _CLIENT_ONLY,  # SUBSCRIBE
    _AFTER_CONNACK,  # SUBACK
    _CLIENT_ONLY,  # UNSUBSCRIBE
    _AFTER_CONNACK,  # UNSUBACK
    _CLIENT_ONLY,  # PINGREQ
    _AFTER_CONNACK,  # PINGRESP
    _MQTT5_ONLY,  # DISCONNECT
    _MQTT5_ONLY,  # AUTH
)
# The first byte of each ack (PUBREL's flags are 0010): the receive path reads these in place.
_ACK_BYTES = (_PUBACK << 4, _PUBREC << 4, _PUBREL << 4 | 2, _PUBCOMP << 4)
# The inbound flows (MQTT 4.3.2, 4.3.3 and 4.4), by the state of a received packet id:
#   NONE: no flow open with this id; RECEIVED: QoS 2, our PUBREC sent, until PUBREL (the id is in _rx_pid);
#   HELD: delivered, the application acknowledges it itself (app_acks.py; the id is in its _held).
#
#   PUBLISH QoS 0 --> deliver
#   PUBLISH QoS 1: NONE --deliver, PUBACK--> NONE
#   PUBLISH QoS 2: NONE --deliver, PUBREC--> RECEIVED --PUBREL: PUBCOMP--> NONE
#                  RECEIVED --PUBLISH again: PUBREC again (a resend, never delivered twice)
#   app_acks.py:   NONE --PUBLISH QoS 1/2: deliver--> HELD --ack(): PUBACK--> NONE (QoS 1), PUBREC--> RECEIVED
#                  HELD --PUBLISH again: nothing (a resend); HELD --PUBREL: no row, a protocol error
#   a PUBREL for an id we do not know gets its PUBCOMP all the same (MQTT 5: 0x92, packet identifier not found)
#   a new session: every id back to NONE (the server has no flow of ours left)
#   stream.py (chunks=True, a message larger than inbuf): the same rows, but the move and the ack are made after
#   the last chunk was handled; a link lost before that leaves the id in NONE, so the resend is delivered again
# A PUBLISH that reuses an id still in a flow without DUP set is a server reusing an id in flight (mosquitto 2.0
# past 65535 unacked): handled as the resend it looks like, and counted (Session.reused).
_IN_NONE = const(0)
_IN_RECEIVED = const(1)
_IN_HELD = const(2)
_IN_QOS0 = const(0)  # events: a PUBLISH, _IN_QOS0 + its QoS
_IN_QOS1 = const(1)
_IN_QOS2 = const(2)
_IN_PUBREL = const(3)
_IN_ACK_QOS1 = const(4)  # the application's ack() of a held message (app_acks.py)
_IN_ACK_QOS2 = const(5)
_IN_DELIVER = const(0)  # actions: deliver, then its ack (none for QoS 0)
_IN_RESEND = const(1)  # a resend: not delivered again (RECEIVED: PUBREC again)
_IN_HOLD = const(2)  # deliver; the application acknowledges it (app_acks.py)
_IN_SEND_ACK = const(3)  # the held message's ack: PUBACK, or PUBREC
_IN_COMPLETE = const(4)  # PUBCOMP
# (state << 4 | event) -> (next state << 4 | action); app_acks.py's sessions take a new QoS 1/2 message to HELD
_INBOUND = {
    # state                 event                next state             action
    _IN_NONE << 4 |         _IN_QOS0:            _IN_NONE << 4 |        _IN_DELIVER,
    _IN_NONE << 4 |         _IN_QOS1:            _IN_NONE << 4 |        _IN_DELIVER,
    _IN_NONE << 4 |         _IN_QOS2:            _IN_RECEIVED << 4 |    _IN_DELIVER,
    _IN_RECEIVED << 4 |     _IN_QOS1:            _IN_RECEIVED << 4 |    _IN_DELIVER,  # an id of an open QoS 2 flow
    _IN_RECEIVED << 4 |     _IN_QOS2:            _IN_RECEIVED << 4 |    _IN_RESEND,
    _IN_HELD << 4 |         _IN_QOS1:            _IN_HELD << 4 |        _IN_RESEND,
    _IN_HELD << 4 |         _IN_QOS2:            _IN_HELD << 4 |        _IN_RESEND,
    _IN_HELD << 4 |         _IN_ACK_QOS1:        _IN_NONE << 4 |        _IN_SEND_ACK,
    _IN_HELD << 4 |         _IN_ACK_QOS2:        _IN_RECEIVED << 4 |    _IN_SEND_ACK,
    _IN_RECEIVED << 4 |     _IN_PUBREL:          _IN_NONE << 4 |        _IN_COMPLETE,
    _IN_NONE << 4 |         _IN_PUBREL:          _IN_NONE << 4 |        _IN_COMPLETE,
}
# const(0) in a board build without tinymqtt/retry.py, without MQTT 5's props.py, or without handlers.py
# (tools/deploy/features.py)
_RETRY = const(1)
_MQTT5 = const(1)
_HANDLERS = const(1)
_STREAM = const(1)  # const(0) in a board build without tinymqtt/stream.py, streamed messages (chunks=True)
_GROW = const(1)  # const(0) in every board build: none has grow.py, CPython's growing buffers
_BYTES = (bytes, bytearray, memoryview)  # a payload in RAM (else a streamed one: stream.Source)
_ROOM = const(64)  # bytes `out` must have free before another packet is processed (acks and pings fit)
_MAX_PACKET = const(268435460)  # the largest packet MQTT can express (a Remaining Length of 2**28 - 1)
_FIRST_SIZE = const(4096)  # the buffers' size when the options leave it to the platform (docs/options.md)
# on_event's event for a received message larger than our receive buffer, skipped unread (value: the
# RemoteProtocolError 0x95 that says so, also the driver's last_error)
OVERSIZE = const(17)


class Session:
    # The server's limits from an MQTT 5 CONNACK (Session5 sets them; a 3.x server announces none), and the
    # reason code of an ack for a packet id we do not know (Session5: 0x92, where it fits)
    if _MQTT5:
        server_receive_maximum = 65535
        maximum_qos = 2  # the server's Maximum QoS
        retain_available = True  # the server's Retain Available
        aliases = None  # the outbound topic aliases the server granted (aliases.py)
        _aliased = False  # the PUBLISH _size() sized carries a Topic Alias (read by its writer right after)
        _not_found = 0
    props = None  # CONNECT properties (Session5's)
    if _HANDLERS:
        _handlers = ()  # [(filter, handler)], once a subscribe names a handler (handlers.py)
    _owed = 0  # a received message's packet id whose ack found `out` full (a handler filled it): sent next
    _inbound = _INBOUND  # the inbound flows (app_acks.py's sessions: with HELD)
    # CPython with the default sizes: the limits the buffers grow to (grow.py; 0: fixed buffers, their size the limit)
    _in_max = _out_max = 0
    _server_max = _MAX_PACKET  # the server's Maximum Packet Size (Session5's, from CONNACK)
    _skip = 0  # bytes still to pass unread of a message too large for inbuf (_oversize), or to stream (stream.py)
    max_stream_size = 0  # the largest payload a chunks=True subscription takes (0: any; MQTT 5 announces it)
    if _STREAM:
        _stream = None  # the chunks=True handler of the message being streamed (stream.py), or None
        _chunked = False  # True once a subscription asked for chunks: stream.py's functions are loaded
        _feed = None  # a streamed payload being written (stream.Source): it owns `out` until its last byte

    def __init__(self, client_id="", version=4, keepalive=60, clean=True, will=None, username=None,
                 password=None, receive_maximum=16, max_packet_size=0, max_inflight=16, out_size=0,
                 manual_ack=False, retry_ms=0, republish_lost=False, connect_timeout_ms=30000,
                 on_event=None, max_stream_size=0):
        # (props, session_expiry, topic_alias_maximum, send_alias_maximum are Session5's: a 3.x session given one
        # raises TypeError; driver.new_session drops the topic_alias_maximum a full board's config.SESSION gives any
        # version. manual_ack: app_acks.py's class takes it before it comes here)
        if (version != _V31 and version != _V311 and (not _MQTT5 or not hasattr(self, "auth")) or manual_ack
                or not _RETRY and retry_ms):
            raise LocalProtocolError(0x84, "MQTT 5 is session5.Session5, and manual_ack the class "
                                           "app_acks.extended(Session or Session5); driver.new_session() builds "
                                           "both when this build has them (profile mqtt311 has neither, nor "
                                           "retry.py, the 3.x timer of retry_ms)")
        if max_stream_size:  # the largest payload a chunks=True subscription takes (MQTT 5 announces it)
            if not _STREAM or not isinstance(max_stream_size, int) or not 0 < max_stream_size < _MAX_PACKET - 4:
                raise LocalProtocolError(0x82 if _STREAM else 0x84, "max_stream_size must be a payload size in bytes "
                                         "below 268435456 (what MQTT's largest packet holds), not %r%s" % (max_stream_size,
                                         "" if _STREAM else "; and this build has no streamed messages (stream.py)"))
            self.max_stream_size = max_stream_size
        if _RETRY and retry_ms:  # the 3.x timer (files frozen or installed by mip without retry.py: ImportError)
            from tinymqtt.retry import resend_late  # (imported once: tick() runs with the heap locked)
            self._late = resend_late
        self.client_id = client_id
        self.version = version
        self.clean = clean
        self.will = will
        self.username = username
        self.password = password
        self.keepalive = keepalive
        self.receive_maximum = receive_maximum
        self.retry_ms = retry_ms
        self.republish_lost = republish_lost
        self.connect_timeout_ms = connect_timeout_ms
        self.on_event = on_event or (lambda ev, value, reason: None)
        # max_packet_size 0 (the default): on MicroPython 4096; on CPython the protocol's largest, as paho takes,
        # in buffers that start at 4096 and grow only when a larger packet comes or goes (docs/options.md)
        if not max_packet_size:
            max_packet_size = _FIRST_SIZE
            if _GROW and const is int:  # (CPython's const)
                try:  # (a board's file set run on CPython has no grow.py: fixed buffers, as on the board)
                    import tinymqtt.grow  # noqa: F401
                    self._in_max = _MAX_PACKET
                    if not out_size:
                        self._out_max = _MAX_PACKET
                except ImportError:
                    pass
        self.inbuf = bytearray(max_packet_size)  # our Maximum Packet Size (_in_max: what it may grow to)
        self.inlen = 0
        self._inmv = memoryview(self.inbuf)
        # Received messages reuse one Packet (valid only while it is being delivered), read in place by
        # packets.read_publish: a steady stream of messages allocates nothing but each payload's view.
        self._msg = Packet(_PUBLISH)
        out_size = out_size or max_packet_size  # (0: as large as inbuf)
        self.out = bytearray(out_size)
        self.out_size = out_size  # what every room check reads (out_size - outlen)
        # The largest packet we may send, the smaller of our own limit (out_size, or what `out` may grow to) and the
        # server's Maximum Packet Size (Session5 sets it at CONNACK): what checks.check_size reads on every publish,
        # kept on the instance (docs/micropython32.md, "What one call costs": a default read from the class costs
        # MicroPython a search of the instance's table first)
        self._send_max = min(self._out_max or out_size, self._server_max)
        self.outlen = 0
        self.flights = Inflight(max_inflight, retry_ms)  # (send times only for the 3.x retry timer)
        self.subs = {}  # filter -> (options, props): what a new session must subscribe again
        self._topics = {}  # str topic -> validated, encoded bytes (bounded)
        # Inbound QoS 2 flows past our PUBREC, until PUBREL: their ids. Once the set has held the most flows open
        # at once, adding and removing ids allocates nothing.
        self._rx_pid = set()
        self._resub_todo = []  # filters to subscribe (again) once connected, in order, when packet ids and room allow
        self.state = _DISCONNECTED
        self.session_present = False
        self.unsolicited = 0  # acks for packet ids we never used (ignored, counted)
        self.reused = 0  # DUP-0 PUBLISHes on a packet id still in use (a server bug; handled as resends, counted)
        self._now = self._last_sent = self._last_recv = self._ping_at = 0
        self.pinging = False  # a PINGREQ awaits its PINGRESP
        self.keepalive_ms = keepalive * 1000
        if will:  # refused now, not by a CONNECT failing at every reconnect
            self.will = check_will(self, will)

    # ------------------------------------------------------------ connection lifecycle

    def connect(self, now):
        """Starts a new network connection: writes CONNECT into out."""
        self._now = self._last_sent = self._last_recv = self._ping_at = now  # (_ping_at: until CONNACK, when CONNECT
        # went; no PINGREQ is out before)
        self.inlen = self.outlen = 0
        self._skip = 0  # (a message cut off with the last link comes again whole, or not at all)
        if _STREAM:
            self._stream = self._feed = None
        self.pinging = False
        self._clean_now = self.clean  # (Session5 sets clean to resume a session the server kept)
        self._send(Packet(_CONNECT, client_id=self.client_id, clean=self.clean, keepalive=self.keepalive,
                          will=self.will, username=self.username, password=self.password, props=self.props), 0, 0)
        self.state = _CONNECTING

    def connection_lost(self):
        """The driver saw the transport close. In-flight state stays for the next connection."""
        self.state = _DISCONNECTED
        if _STREAM:
            self._feed = None  # (a QoS 1/2 message cut off is sent again, from its start, on the next connection)
        self.pinging = False

    def disconnect(self, reason=0, props=None):
        """Writes DISCONNECT (v5: with reason code and props; 0x04 asks the server to publish the will)."""
        if self.state != _DISCONNECTED:
            self._send(Packet(_DISCONNECT, reason=reason, props=props), 0, 0)
        self.state = _DISCONNECTED

    def _on_connack(self, p):
        # (Session5 reads its CONNACK's reason code and properties first, then comes here.)
        if p.reason:  # 3.x return codes 1-5 as v5 reason codes (decode() refuses more)
            raise ConnectError(b"\x80\x84\x85\x88\x86\x87"[p.reason], "server refused the connection (return code %d)"
                               % p.reason)
        # The connection is accepted: resume or drop what the last one left (MQTT 4.4, 3.1.1 4.4). 3.1 has no
        # session-present flag: a non-clean connection resumes what the server kept.
        present = p.session_present or (self.version == _V31 and not self._clean_now)
        if present and self._clean_now:  # [MQTT-3.2.2-1/2]: a clean start never finds a session
            raise protocol_error("CONNACK says session present to a clean start")
        self.session_present = present
        self.state = _CONNECTED
        again = not present
        for t, topics, props in self.flights._renew(present, self.republish_lost, self.on_event):
            # an unanswered SUBSCRIBE/UNSUBSCRIBE: asked again (the kept session may still have what the
            # application unsubscribed from), and every subscription with it, to confirm what stays
            if present and t == _UNSUBSCRIBE:
                self._ask(t, topics, props)
            again = True
        if not present:  # the server has no inbound flow of ours left
            if self._owed:  # an ack still owed belongs to the old session
                self._owed = 0
            self._rx_pid.clear()
        if again:  # every subscription again, in the order of self.subs (pump() makes the SUBSCRIBEs)
            self._resub_todo = list(self.subs)
        self.pump()
        self.on_event(_CONNACK, p, 0)

    # ------------------------------------------------------------ the application's requests

    def publish(self, topic, payload, qos=0, retain=False, props=None, length=None):
        """Queues a message and sends it when the window allows. Returns its packet id (0 for QoS 0), or -1
        when every in-flight slot is taken (wait for acks; a QoS 0 message that can go out at once needs no
        slot). An invalid argument, or breaking a limit, raises, changing nothing (checks.py). length: payload is
        a source of that many bytes, read piece by piece as they are sent (stream.py, docs/streaming.md)."""
        # The publish path, in order: the door (checks.py), the packet's size against the limits, a slot in the
        # flow table (inflight.py), the codec's PUBLISH writer into `out`; the driver then writes `out`. A message
        # that cannot go out at once waits in the flow table's queue for pump().
        check_publish(self, topic, payload if length is None else b"", qos, retain, props)
        k = 0  # a streamed payload's length: only its header must fit `out`
        if length is not None:
            payload = self._source(payload, length, qos)
            k = length
        t = topic
        if isinstance(topic, str):  # encoded once, then looked up (the first 64 topics)
            t = self._topics.get(topic)
            if t is None:
                t = topic.encode()
                if len(self._topics) < 64:
                    self._topics[topic] = t
        if isinstance(payload, str):
            payload = payload.encode()
        # What waits ahead of it goes first (pump() sends what can go, in order, and says True when nothing waits
        # any more, connected); a streamed payload always waits its turn in pump().
        ready = not k and self.pump()
        n = self._size(t, payload, qos, False, props)
        check_size(self, n - k, "PUBLISH", "payload")
        if _MQTT5 and k and n > self._server_max:  # (MQTT 5: the server's Maximum Packet Size)
            raise LocalProtocolError(0x95, "payload: a %d-byte PUBLISH exceeds the server's Maximum Packet Size %d"
                                     % (n, self._server_max))
        if _GROW and self.outlen + n - k > self.out_size and self._out_max:
            self._fit(n - k)
        f = self.flights
        # It goes out now when nothing waits ahead of it, `out` has room, and for QoS 1/2 MQTT 5's window allows
        go = ready and n <= self.out_size - self.outlen and (not _MQTT5 or not qos
                                                             or f.unacked < self.server_receive_maximum)
        pid = 0
        if qos or not go:  # (QoS 0 that goes out now needs no slot)
            # the flow table: QUEUED, and when it is written now (go), on to WAIT_PUBACK or WAIT_PUBREC at once
            i = f.add(t, payload, qos, retain, props, go, self._now)
            if i < 0:
                return -1
            pid = f.pid[i]
        if not go:
            self.pump()  # written now if what waits ahead of it goes, and the window and `out` allow
            return pid
        a = _MQTT5 and self._aliased and self.aliases.lookup(t)  # the Topic Alias _size() counted, for the codec
        self.outlen += encode_publish(self.out, self.version, t, payload, qos, retain, False, pid, props, a,
                                      self.outlen)
        self._last_sent = self._now
        return pid

    def streaming(self):
        """True while a streamed payload (publish(length=n), stream.py) is being written: it owns `out` until its
        last byte, which the driver writes a piece at a time."""
        return _STREAM and self._feed is not None

    def pump(self):
        """Sends the SUBSCRIBEs waiting for a connection, then queued messages and PUBREL resends, in order, while
        packet ids, the window and `out` have room. True when connected and nothing waits any more."""
        # (called at every publish and every ack, where nothing waits: the work is in the two steps below)
        if self.state != _CONNECTED:
            return False
        if _STREAM and self._feed and not self._feed.feed(self):
            return False  # a streamed payload still owns `out`: nothing may come between its bytes
        if self._resub_todo:
            self._resubscribe()
        if self.flights.queued and not self._send_queued():
            return False
        return not self._resub_todo

    def _resubscribe(self):
        # One SUBSCRIBE a filter still subscribed (one unsubscribed meanwhile is skipped), with its options and
        # properties: it fits, as subscribe() checked its whole request. Stops when no packet id or room is left
        # (the queued messages may still go).
        todo = self._resub_todo
        while todo:
            t = todo[0]
            o = self.subs.get(t)
            if o and not self._request(_SUBSCRIBE, [(t, o[0])], o[1]):
                return
            del todo[0]

    def _send_queued(self):
        # The send queue, oldest first (inflight.py's ring, with stale entries), while the window and `out` have
        # room. True when it is empty.
        f = self.flights
        ring = f.ring
        while f.queued:
            i = ring[f.head]
            st = f.state[i]
            if not _FIRST_QUEUED <= st <= _LAST_QUEUED:  # it left the queue meanwhile (acked, or its session ended)
                f.head = (f.head + 1) % f.size
                f.queued -= 1
                continue
            if st == _RESEND_PUBREL:
                if self.out_size - self.outlen < 8:
                    return False
                f.step(i, _WRITE_PUBREL, self._now)
                self._send(_PUBREL, f.pid[i], 0)
                continue
            q = f.qos[i]
            if _MQTT5 and q and f.unacked >= self.server_receive_maximum:  # MQTT 5's window (3.x: the slots alone)
                return False
            # A PUBLISH, with DUP when it is sent again (a build without MQTT 5 keeps no props: 3.x carries none)
            t = f.topic[i]
            pl = f.payload[i]
            dup = st != _QUEUED
            pr = _MQTT5 and f.props[i]
            n = self._size(t, pl, q, dup, pr)
            k = 0  # a streamed payload (stream.Source): only the header must fit now, its bytes follow as `out` empties
            if _STREAM and not isinstance(pl, _BYTES):
                k = len(pl)
                pl = b""
            if n - k > self.out_size - self.outlen:
                return False
            a = _MQTT5 and self._aliased and self.aliases.lookup(t)  # (as in publish())
            self.outlen += encode_publish(self.out, self.version, t, pl, q, f.retain[i], dup, f.pid[i], pr, a,
                                          self.outlen, k)
            self._last_sent = self._now
            if k:
                f.payload[i].begin(self, q)
            f.step(i, _WRITE_QOS0 + q, self._now)  # the flow table: WAIT_PUBACK, WAIT_PUBREC, or FREE for QoS 0
        return True

    def _size(self, t, pl, q, dup, pr):
        # The exact size of a PUBLISH as the codec will write it (a streamed payload counted whole; the packet id's
        # value does not change it). MQTT 5: with a Topic Alias (_aliased True) when the server granted aliases, the
        # message is new (a resend carries its full topic) and the packet still fits with it (queued while aliases
        # were off, it may fit only without).
        n = encode_publish(None, self.version, t, pl, q, False, dup, 1, pr)
        if _MQTT5:
            self._aliased = False
            if self.version == _V5 and self.aliases.max and not dup:
                m = encode_publish(None, self.version, t, pl, q, False, dup, 1, pr, 1)  # with a Topic Alias
                if m <= self._send_max:
                    n = m
                    self._aliased = True
        return n

    if _GROW:
        def _fit(self, n):
            # CPython's growing `out` (grow.py): room for an n-byte packet after what it holds (called only when
            # it lacks that room)
            from tinymqtt.grow import grow_out
            grow_out(self, n)

    def subscribe(self, topics, props=None, handler=None, chunks=False):
        """topics: [(filter, options)] with options from sub_options() (3.x: a QoS). handler(message) gets
        the messages matching these filters (others go to on_event; a build without handlers.py refuses it, 0x84).
        chunks=True: handler(message, total, offset, chunk) gets each message in pieces, however large
        (stream.py, docs/streaming.md). Returns the packet id (0 while offline: sent on connect)."""
        if chunks is not False:
            self._chunks(handler, chunks)
        if handler:
            if _HANDLERS:
                try:
                    from tinymqtt.handlers import matches
                    self._matches = matches
                except ImportError:  # profile mqtt311's files, frozen or installed by mip
                    handler = 0
            if not _HANDLERS or not handler:
                raise LocalProtocolError(0x84, "handler: per-subscription handlers are handlers.py's, which this build "
                                               "leaves out (profile mqtt311): on_message gets every message")
        n = check_subscribe(self, topics, props, _SUBSCRIBE)  # (an invalid one, recorded, would fail at every reconnect)
        if _GROW and self.outlen + n > self.out_size and self._out_max:
            self._fit(n)
        offline = self.state != _CONNECTED  # sent once connected (pump)
        pid = 0 if offline else self._ask(_SUBSCRIBE, topics, props)  # (first: a refusal records nothing)
        for f, o in topics:
            if _HANDLERS and handler:
                self._forget((f,))
                self._handlers.append((f, handler, 1) if chunks else (f, handler))
            self.subs[f] = (o, props)
            if offline:
                self._resub_todo.append(f)
        return pid

    def _source(self, payload, length, qos):
        # publish()'s streamed payload (stream.py), checked at the door
        if _STREAM:
            try:
                from tinymqtt.stream import source
                return source(self, payload, length, qos)
            except ImportError:
                pass
        raise LocalProtocolError(0x84, "length: streamed payloads are stream.py's, which this build leaves out "
                                       "(profile mqtt311)")

    def _chunks(self, handler, chunks):
        # subscribe()'s chunks argument, checked at the door; loads stream.py the first time
        if chunks is not True:
            raise LocalProtocolError(0x82, "chunks must be True (the handler takes each message in chunks) or False, "
                                           "not %r" % (chunks,))
        if not handler:
            raise LocalProtocolError(0x82, "handler: chunks=True needs a handler(message, total, offset, chunk)")
        if getattr(self, "manual_ack", 0):
            raise LocalProtocolError(0x84, "chunks: not with manual_ack; a streamed message is acknowledged when its "
                                           "handler has taken its last chunk, never by ack()")
        if _STREAM:
            try:
                from tinymqtt.stream import start, chunk
                self._start = start  # (functions, kept unbound: the receive path calls them with the session)
                self._chunk = chunk
                self._chunked = True
                return
            except ImportError:
                pass
        raise LocalProtocolError(0x84, "chunks: streamed messages are stream.py's, which this build leaves out "
                                       "(profile mqtt311)")

    def unsubscribe(self, filters, props=None):
        n = check_subscribe(self, filters, props, _UNSUBSCRIBE)
        if _GROW and self.outlen + n > self.out_size and self._out_max:
            self._fit(n)
        pid = self._ask(_UNSUBSCRIBE, filters, props) if self.state == _CONNECTED else 0
        self._forget(filters)
        return pid

    def _forget(self, filters):
        # Drops these filters' subscriptions and handlers.
        if _HANDLERS:  # a new handler list: one that _deliver is walking stays as it was
            hs = []
            for h in self._handlers:
                if h[0] not in filters:
                    hs.append(h)
            self._handlers = hs
        for f in filters:
            self.subs.pop(f, None)

    def _request(self, t, topics, props):
        # A SUBSCRIBE or UNSUBSCRIBE written now, its packet id lent by the flow table (qos 3: the slot keeps the
        # request); 0, changing nothing, when no packet id is free or `out` lacks room for it
        p = Packet(t, pid=1, topics=topics, props=props)  # (pid 1: sized as with any id)
        f = self.flights
        if f.count == f.size or self.out_size - self.outlen < encode(None, p, self.version):
            return 0
        p.pid = f.pid[f.add(topics, None, 3, t, props)]
        self._send(p, 0, 0)
        return p.pid

    def _ask(self, t, topics, props):
        # The application's request, connected: written now, or refused before anything is recorded
        pid = self._request(t, topics, props)
        if not pid:
            raise LocalProtocolError(0x97, "no packet identifier free (%d messages in flight), or `out` holds %d "
                                           "bytes not yet written: write them first" % (self.flights.count, self.outlen))
        return pid

    # ------------------------------------------------------------ input

    def received(self, n, now):
        """n new bytes are in inbuf[inlen:]. Handles every whole packet; returns True when it stopped early
        because `out` is nearly full (write it and call received(0, now) again)."""
        self._now = now
        if n:
            self.inlen += n
            self._last_recv = now
        buf = self.inbuf
        end = self.inlen
        pos = 0
        more = False
        o = self._owed
        if o and self.state == _CONNECTED and self.out_size - self.outlen >= 8:
            self._owed = 0
            self._pay(o)
        try:
            while pos < end:
                if self.out_size - self.outlen < _ROOM:
                    more = True
                    break
                k = self._skip  # bytes still to pass of a message too large for inbuf (_oversize)
                if k:
                    k = min(k, end - pos)
                    if _STREAM and self._stream:  # the next chunk of a streamed message (stream.py)
                        self._chunk(self, pos, k)
                    else:
                        self._skip -= k
                    pos += k
                    continue
                total = frame(buf, end - pos, _MAX_PACKET, pos)
                if total > len(buf):
                    if _STREAM and self._chunked and buf[pos] >> 4 == _PUBLISH and self.state == _CONNECTED:
                        k = self._start(self, buf, pos, end, total)  # its header read: streamed from its payload
                        if not k:
                            break  # (the rest of its header is still to come)
                        if k > 0:
                            pos = k
                            continue
                    if _GROW and total <= self._in_max:  # CPython: inbuf grows as the packet's bytes come (grow.py)
                        if end == len(buf) and not pos:
                            from tinymqtt.grow import grow_in
                            buf = grow_in(self, total)
                        break
                    if self._oversize(buf, pos, end, total) is False:
                        break  # (its packet id is still to come)
                    continue
                if not total or pos + total > end:
                    break
                if self._packet(buf, pos, total):  # (app_acks: a PUBLISH waits, untouched, for room in a queue)
                    more = True
                    break
                pos += total
        except RemoteProtocolError:  # the server broke the rules (Session5 tells it why): the driver closes the link
            self.state = _DISCONNECTED
            raise
        finally:
            if pos:  # keep the partial packet at the front
                k = end - pos
                if k > 64:
                    buf[0:k] = buf[pos:end]  # (the slice is a copy: overlap is safe)
                else:
                    for j in range(k):
                        buf[j] = buf[pos + j]
                self.inlen = k
        return more or (self._owed != 0 and self.state == _CONNECTED)  # (paid at the next call)

    def _oversize(self, buf, pos, end, total):
        # A packet larger than inbuf, our Maximum Packet Size: a PUBLISH is acknowledged as its QoS requires (QoS 2:
        # PUBREC now, PUBCOMP on its PUBREL), reported once (on_event OVERSIZE; the driver's last_error) and its
        # bytes are passed unread as they come (_skip); every other type ends the connection. False until its
        # packet id, which follows the topic, is here.
        first = buf[pos]
        q = first >> 1 & 3
        i = pos + 2  # past the fixed header
        while buf[i - 1] & 0x80:
            i += 1
        if q and end - i >= 2:
            i += 2 + (buf[i] << 8 | buf[i + 1])  # past the topic: the packet id
        e = RemoteProtocolError(0x95, "a %d-byte %s exceeds our Maximum Packet Size %d (the max_packet_size option)"
                                % (total, NAMES.split()[first >> 4], len(buf)))
        if first >> 4 != _PUBLISH or q == 3 or i + 2 - pos > len(buf):
            raise e
        if q and end - i < 2:
            return False
        pid = q and buf[i] << 8 | buf[i + 1]
        if q and not pid:  # as read_publish refuses it in a packet that fits
            raise RemoteProtocolError(0x81, "packet identifier 0")
        self._skip = total
        if q == 2 and self._in_state(pid) == _IN_RECEIVED:  # a resend of one acknowledged and reported before
            return self._send(_PUBREC, pid, 0)
        if q:  # (the loop left room) our own ack: app_acks' _pay would wait for an application that never sees it
            if q == 2:
                self._rx_add(pid)
            self._send(_PUBREC if q == 2 else _PUBACK, pid, 0)
        self.on_event(OVERSIZE, e, 0x95)

    def _packet(self, buf, pos, total):
        # One whole packet at buf[pos:pos + total].
        first = buf[pos]
        pid = reason = 0
        t = first >> 4
        f = self.flights
        if self.state == _CONNECTED:
            # The common acks and PINGRESP, read in place without building a Packet, so nothing is allocated: an
            # ack that is a bare packet id, or in MQTT 5 one with a success code (0x10, no matching subscribers:
            # what mosquitto answers for a topic nobody reads) and no properties or an empty property block.
            # Anything else (packet id 0 too) is read whole below, which validates it.
            if first in _ACK_BYTES:
                if total == 4:
                    pid = buf[pos + 2] << 8 | buf[pos + 3]
                elif _MQTT5 and (total == 5 or (total == 6 and not buf[pos + 5])) and self.version == _V5:
                    reason = buf[pos + 4]
                    if not reason or (reason == 0x10 and t < _PUBREL):
                        pid = buf[pos + 2] << 8 | buf[pos + 3]
            elif total == 2 and first == _PINGRESP << 4:
                self.pinging = False
                return
        if not pid:
            sends = _SERVER_SENDS[t]
            if sends == _CLIENT_ONLY:  # by type: what it holds is moot
                raise protocol_error("a server never sends %s" % NAMES.split()[t])
            mv = self._inmv
            if t == _PUBLISH:  # read in place into the one reused Packet (before CONNACK too: it is checked first)
                p = read_publish(mv, pos, pos + total, self._msg, self.version)
            else:  # in place too, into a new Packet: CONNACK, SUBACK and UNSUBACK go to on_event
                p = Packet(t)
                read_packet(mv, pos, pos + total, p, self.version)
            connecting = self.state == _CONNECTING
            if sends != (_BEFORE_CONNACK if connecting else _AFTER_CONNACK):  # out of turn (DISCONNECT: a 3.x server)
                raise protocol_error("%s %s CONNACK" % (NAMES.split()[t], "before" if connecting else "after"))
            if t == _PUBLISH:
                return self._on_publish(p)
            if connecting:
                return self._on_connack(p)
            if t == _SUBACK or t == _UNSUBACK:
                return self._on_suback(t, p)
            if t == _PINGRESP:
                self.pinging = False
                return
            pid = p.pid
            reason = p.reason
        if t == _PUBREL:
            self._pubrel(pid)
            return
        # PUBACK, PUBREC, PUBCOMP: what each does to a flow is inflight.py's table
        a = f.ack(_GOT_PUBACK if t == _PUBACK else _GOT_PUBCOMP if t == _PUBCOMP
                  else _GOT_PUBREC if reason < 0x80 else _GOT_REFUSAL, pid, self._now)
        if a == _NOT_IN_FLIGHT:
            self.unsolicited += 1
            if t == _PUBREC and reason < 0x80:  # let the server finish a flow we do not know (a refusal ended it)
                self._send(_PUBREL, pid, _MQTT5 and self._not_found)
            return
        if a == _NOT_EXPECTED:
            raise protocol_error("%s for packet id %d, which is a QoS %d flow" % (NAMES.split()[t], pid, f.qos[f.find(pid)]))
        if a == _SEND_PUBREL:
            self._send(_PUBREL, pid, 0)
        else:  # the flow ended
            self.on_event(t, pid, reason)
        self.pump()

    def _on_suback(self, t, p):
        # A SUBACK or UNSUBACK: it ends the request that borrowed its packet id.
        f = self.flights
        i = f.find(p.pid)
        if i < 0 or f.state[i] != _CONTROL:  # not a packet id lent to a SUBSCRIBE/UNSUBSCRIBE
            self.unsolicited += 1
            return
        topics = f.topic[i]
        codes = p.codes
        if t != f.retain[i] + 1 or (codes is not None and len(codes) != len(topics)):
            # (checked before the request is let go: a reconnect asks again)
            raise protocol_error("%s for packet id %d, which is an %s of %d filters, with %s reason codes"
                                 % (NAMES.split()[t], p.pid, NAMES.split()[f.retain[i]], len(topics), codes))
        f.step(i, _GOT_SUBACK, 0)
        if t == _SUBACK:
            for k in range(len(topics)):
                if codes[k] >= 0x80:  # refused: forget it so a new session does not ask again
                    self._forget((topics[k][0],))
        self.on_event(t, p, 0)

    def _in_state(self, pid):
        # The state of an inbound packet id (the table above; app_acks.py adds HELD)
        return _IN_RECEIVED if pid in self._rx_pid else _IN_NONE

    def _on_publish(self, p):
        # A received PUBLISH, as the inbound table says: exactly once for QoS 2, as the id stays in _rx_pid from
        # our PUBREC until PUBREL.
        q = p.qos
        pid = p.pid
        st = self._in_state(pid)
        row = self._inbound[st << 4 | q]
        a = row & 15
        if a == _IN_RESEND:
            if not p.dup:
                self.reused += 1
            if st == _IN_RECEIVED:
                self._send(_PUBREC, pid, 0)
            return
        if a == _IN_HOLD:
            return self._hold(p)
        if row >> 4 != st:  # NONE -> RECEIVED: the id is in the table from before delivery
            self._rx_add(pid)
        self._deliver(p)
        if q:
            self._acknowledge(pid)

    def _acknowledge(self, pid):
        # A delivered QoS 1/2 message (stream.py's too, after its last chunk): its ack now, or once `out` has room
        if self.out_size - self.outlen < 5:  # a handler filled `out`: received() asks for a write first
            self._owed = pid
        else:
            self._pay(pid)

    def _pay(self, pid):
        # The ack of a delivered message, now or once `out` has room: PUBREC while its QoS 2 flow is open.
        self._send(_PUBREC if pid in self._rx_pid else _PUBACK, pid, 0)

    def _deliver(self, p):
        # To the handlers whose filters match (handlers.py), else to on_event; True when a handler took it.
        if _HANDLERS:
            hit = False
            for h in self._handlers:  # (a handler that subscribes or unsubscribes leaves this list)
                if self._matches(h[0], p.topic):
                    if _STREAM and len(h) > 2:  # chunks=True (stream.py): a message that fits, in one chunk
                        h[1](p, len(p.payload), 0, p.payload)
                    else:
                        h[1](p)
                    hit = True
            if hit:
                return True
        self.on_event(_PUBLISH, p, 0)

    def _rx_add(self, pid):
        # 3.x servers never hear our Receive Maximum, and mosquitto 2.0 frees a v5 QoS 2 slot at our PUBREC, so
        # the table may overshoot it, up to 64x (min 1024); beyond, 0x93.
        n = len(self._rx_pid)
        rm = self.receive_maximum
        if n >= max(64 * rm, 1024):
            raise RemoteProtocolError(0x93, "server exceeded our Receive Maximum of %d (%d flows open)" % (rm, n))
        self._rx_pid.add(pid)

    def complete(self, pid):
        """Ends an inbound QoS 2 flow with PUBCOMP (app_acks: a PUBREL that hold_pubrel held). False when `out`
        has no room."""
        if self.out_size - self.outlen < 8:
            return False
        code = _MQTT5 and self._not_found  # an unknown PUBREL still gets its PUBCOMP
        if self._in_state(pid) == _IN_RECEIVED:  # the table's RECEIVED --PUBREL--> NONE
            self._rx_pid.remove(pid)
            code = 0
        self._send(_PUBCOMP, pid, code)
        return True

    _pubrel = complete  # a PUBREL (app_acks may hold it)

    # ------------------------------------------------------------ time

    def tick(self, now):
        """Keep-alive, dead-link detection and 3.x retries. Returns milliseconds until it is due again."""
        self._now = now
        if self.state == _CONNECTING:
            left = self.connect_timeout_ms - ticks_diff(now, self._ping_at)
            if left <= 0:
                self.state = _DISCONNECTED
                raise ConnectionLost(0x88, "no CONNACK within %d ms" % self.connect_timeout_ms)
            return left
        if self.state != _CONNECTED:
            return 1000
        wait = 60000
        ka = self.keepalive_ms
        if ka:
            half = max(ka // 2, 500)  # a PINGRESP must come within half a keepalive: dead links show in 1.5x
            if self.pinging:
                wait = half - ticks_diff(now, self._ping_at)
                if wait <= 0:
                    self.state = _DISCONNECTED
                    raise ConnectionLost(0x8D, "no PINGRESP within %d ms: the link is dead" % half)
            else:
                idle = max(ticks_diff(now, self._last_sent), ticks_diff(now, self._last_recv))
                wait = half if idle >= ka and self.ping(now) else max(ka - idle, 1)
        if _RETRY and self.retry_ms:  # 3.x may resend flows on a timer, with DUP set (retry.py; 0 in Session5)
            wait = self._late(self.flights, now, self.retry_ms, min(wait, self.retry_ms))
        self.pump()
        return wait

    def ping(self, now):
        """Writes a PINGREQ unless one is still unanswered or `out` is full; True if it did. Besides keep-alive,
        a barrier: its PINGRESP means the server has read everything sent before it."""
        if self.pinging or self.out_size - self.outlen < 2:
            return False
        i = self.outlen
        self.out[i] = _PINGREQ << 4
        self.out[i + 1] = 0
        self.outlen = i + 2
        self._last_sent = self._ping_at = now
        self.pinging = True
        return True

    # ------------------------------------------------------------ output

    def _send(self, p, pid, reason):
        # p: a Packet (pid 0), or with pid the type of an ack (PUBACK, PUBREC, PUBREL, PUBCOMP), written here in
        # place with MQTT 5's reason code when one is given: no allocation (the caller made room).
        b = self.out
        i = self.outlen
        if pid:
            b[i] = p << 4 | (p == _PUBREL) << 1
            b[i + 1] = 3 if _MQTT5 and reason else 2
            b[i + 2] = pid >> 8
            b[i + 3] = pid & 0xFF
            i += 4
            if _MQTT5 and reason:
                b[i] = reason
                i += 1
            self.outlen = i
        else:
            self.outlen = i + encode(b, p, self.version, i)
        self._last_sent = self._now
