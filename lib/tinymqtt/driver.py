# What the blocking and asyncio clients share: the session they drive (new_session imports only the classes of
# the MQTT version in use), their options, event dispatch, the table of finished flows that wait_for() and
# await read, closing a link, and the reconnect backoff. The port contract is written once, here:
#   The board's port module is tinymqtt_port (ports/NAME/tinymqtt_port.py; a client takes any object with the
#   same functions as port_impl).
#   network_up(timeout_ms=0) -> True once the board is on the network (WLAN joined), else raises.
#   ticks_ms() -> milliseconds that wrap at 2**30, like MicroPython's time.ticks_ms().
#   open(host, port, tls) -> a blocking transport: write(buf, n) writes buf[:n] whole or raises;
#     readinto(buf, off, timeout_ms) -> bytes read into buf[off:] (0: none within timeout_ms), raises
#     ConnectionLost when the peer closed; close().          (the blocking client)
#   open_stream(host, port, tls) -> awaitable of a stream: write(buf, n) queues buf[:n], drain() awaits it,
#     readable(buf, off) awaits bytes for buf[off:] (a port whose read also waits reads them in there), then
#     readinto(buf, off) -> bytes read into buf[off:] now (0: none, or nothing whole yet), raises
#     ConnectionLost when the peer closed; close().         (the asyncio client)
#   tls: None for plain TCP, else True, a dict of options (cafile, server_hostname...) or an SSLContext.
#   Failures raise OSError or ConnectionLost (_LINK_ERRORS below), which end the connection.
from tinymqtt.errors import ConnectionLost, ConnectError, RemoteProtocolError, LocalProtocolError, NotDelivered
from tinymqtt.session import Session, ticks_diff, const  # (the clients import these and the errors from here)
from random import getrandbits  # (the boards' MicroPython has it: esp32, rp2, unix, webassembly)

# session events (packet types, named by tinymqtt.wire's NAMES, and session.LOST) and Session.state: copies that
# tests/test_names.py checks against their sources
_CONNACK = const(2)
_PUBLISH = const(3)
_PUBCOMP = const(7)
_AUTH = const(15)
_LOST = const(16)
_OVERSIZE = const(17)  # (session.OVERSIZE)
_CONNECTED = const(2)  # session.state
# const(0) in a board build without tinymqtt/props.py (MQTT 5), or without app_acks.py (tools/deploy/features.py)
_MQTT5 = const(1)
_APP_ACKS = const(1)

_LINK_ERRORS = (OSError, ConnectionLost, RemoteProtocolError, ConnectError)  # these end a connection
_GONE = const(0x180)  # in Driver._done: a message lost with the session (NotDelivered 0x80; refusals keep their code)


def new_session(on_event, **options):
    """A session for options["version"]: 5 (tinymqtt.session5, loaded only then), 4 (3.1.1) or 3 (3.1); without
    one, the highest this build has (5; 4 where MQTT 5 is left out: profile mqtt311). Extended by app_acks.py when
    the application acknowledges messages itself: manual_ack=True (every one, by ack()) or None (the asyncio
    client's: those no handler takes, once taken from its queue); False: none."""
    S = Session
    if _MQTT5 or _APP_ACKS:
        v = options.get("version")
        try:
            if _MQTT5 and (v or 5) == 5:
                from tinymqtt.session5 import Session5 as S
                options["version"] = 5
            elif _MQTT5:  # (a full board's config.SESSION names MQTT 5's inbound alias limit for every version)
                options.pop("topic_alias_maximum", 0)
        except ImportError:  # profile mqtt311's files, frozen or installed by mip: Session refuses 5 with 0x84
            options.pop("topic_alias_maximum", 0)  # (an MQTT 5 option, which would be a TypeError before that)
            options["version"] = v or 4
        if _APP_ACKS and options.get("manual_ack", 0) != 0:  # the application acknowledges (True; None: aio)
            try:
                from tinymqtt.app_acks import extended
                S = extended(S)
            except ImportError:  # Session refuses manual_ack with 0x84
                pass
    return S(on_event=on_event, **options)


class Driver:
    """The base of Client and AsyncClient. Session options pass through (see Session); version defaults to the
    highest this build has (5; profile mqtt311: 4).
    on_message(message): messages no subscribe(handler=...) claimed (blocking client); on_connect(connack);
    on_disconnect(error): every end of a connection (None: our own disconnect()); on_event(event, value,
    reason): every other session event (LOST, acks, AUTH...). on_auth(auth_packet) -> (reason, props) or None:
    MQTT 5 enhanced authentication (props={AUTHENTICATION_METHOD: ...}), called for each AUTH the server sends
    (0x18: continue, also before CONNACK; 0x00: a re-authentication succeeded); the answer goes out as our
    AUTH. Re-authenticate with client.session.auth(0x19, props), then flush."""

    # (defaults in the class: an instance holds only what it changed)
    transport = last_error = on_message = on_connect = on_disconnect = on_event = None
    if _MQTT5:  # (a build without MQTT 5 has no AUTH to answer)
        on_auth = None
    _delay = 0  # the next reconnect backoff, ms (0: backoff_min_ms)

    def __init__(self, host="127.0.0.1", port=1883, tls=None, reconnect=True, backoff_min_ms=500,
                 backoff_max_ms=30000, batch=False, port_impl=None, on_message=None, on_connect=None,
                 on_disconnect=None, on_event=None, **options):
        # (the callbacks as arguments too; set only when given, the class holds the defaults)
        if on_message:
            self.on_message = on_message
        if on_connect:
            self.on_connect = on_connect
        if on_disconnect:
            self.on_disconnect = on_disconnect
        if on_event:
            self.on_event = on_event
        if _MQTT5 and "on_auth" in options:
            self.on_auth = options.pop("on_auth")
        self.host = host
        self.port = port
        self.tls = tls
        self.reconnect = reconnect
        self.backoff_min_ms = backoff_min_ms
        self.backoff_max_ms = backoff_max_ms
        self.batch = batch  # (blocking) True: publish() leaves packets in the buffer until it fills or loop() runs
        if not port_impl:  # the board's (or Linux's) port module, deployed next to the library
            import tinymqtt_port as port_impl
        self.p = port_impl
        self.session = new_session(self._event, **options)
        # packet id -> how its flow ended, for wait_for() and await: a SUBACK/UNSUBACK or a reason code while
        # someone awaits it (... until then), and the reason code of every QoS 1/2 message refused (_GONE: lost),
        # kept until asked
        self._done = {}
        self._next_try = port_impl.ticks_ms()  # when the next reconnect may start

    def _event(self, ev, value, reason):
        # Returns True when it recorded a flow's end in _done (one awaited, or a failure): the asyncio client wakes
        # the tasks awaiting flows then, not at every ack.
        ended = False
        if ev == _PUBLISH:
            if self.on_message:
                self.on_message(value)
            return
        if ev == _CONNACK:
            if self._delay:  # a connection is up: the next lost link starts the backoff again
                self._delay = 0
            if self.on_connect:
                self.on_connect(value)
        elif ev == _OVERSIZE:  # a message too large for our receive buffer, skipped: value is the error saying so
            self.last_error = value
        elif _MQTT5 and ev == _AUTH and self.on_auth:
            answer = self.on_auth(value)
            if answer:
                self.session.auth(*answer)
        else:
            ended = self._record(ev, value, reason)
        if self.on_event:
            self.on_event(ev, value, reason)
        return ended

    def _record(self, ev, value, reason):
        # A flow ended: PUBACK, PUBREC (refused), PUBCOMP (value: the packet id) or SUBACK, UNSUBACK, LOST (value:
        # a Packet). Kept in _done while awaited, and a failure until wait_for() asks; True when kept. (DISCONNECT,
        # AUTH: their Packet's pid is 0, which is never awaited)
        pid = value
        if ev == _PUBCOMP:  # past PUBREC the server has the message: 0x92 (it forgot the id) is no refusal
            reason = 0
        elif ev > _PUBCOMP:
            pid = value.pid
            reason = _GONE if ev == _LOST else value
        d = self._done
        if pid in d or isinstance(reason, int) and reason >= 0x80 and len(d) < 64:  # (bounded: past 64 failures
            d[pid] = reason  # nobody asked about, no more are kept; on_event had each)
            return True
        return False

    def _outcome(self, pid):
        # How the flow of pid ended, taken from the table (None: not recorded, or the client closed); raises
        # NotDelivered for a message the server refused or that was lost with the session.
        r = self._done.pop(pid, None)
        if isinstance(r, int) and r >= 0x80:
            raise NotDelivered(r & 0xFF, "packet id %d %s" % (pid, "refused by the server" if r < _GONE
                               else "lost: the server no longer has the session"), pid)
        return r

    _piecewise = False  # (the asyncio client's True: see _write)

    def _write(self):
        # Every pending packet (each batch in one write), then what the session queued behind them. A streamed
        # payload (stream.py) is written whole here; with _piecewise (the asyncio client's) a piece per call: each
        # piece is written once the stream sent the last (flush() drains between them), so what the socket has
        # not taken yet, which MicroPython's stream keeps a copy of, is never more than a piece.
        s = self.session
        t = self.transport
        while s.outlen and t:
            n = s.outlen
            s.outlen = 0
            t.write(s.out, n)
            s.pump()  # (a streamed payload: its next piece, read from the source into `out`)
            if self._piecewise and s.streaming():
                return

    def _close(self, err):
        # Ends the link (the session keeps its state); a reconnect may follow after the backoff.
        self.last_error = err
        t = self.transport
        if t:
            try:
                self._write()  # a DISCONNECT with the reason code may be waiting
            except Exception:  # closing anyway (a board stream raises ConnectionLost for a dead socket)
                pass
            t.close()
            self.transport = None
        self.session.connection_lost()
        d = self._delay or self.backoff_min_ms  # exponential, +-25% jitter: a fleet does not return in lockstep
        self._delay = min(d * 2, self.backoff_max_ms)
        self._next_try = self.p.ticks_ms() + d - d // 4 + getrandbits(16) % (d // 2 + 1)
        if self.on_disconnect:
            self.on_disconnect(err)

    def is_connected(self):
        return self.session.state == _CONNECTED
