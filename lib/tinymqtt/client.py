# The blocking client: a thin driver over Session (which makes every protocol decision) and a port
# (transport and clock). It writes each batch of packets in one write, reads with a timeout, keeps the
# link alive, and reconnects with exponential backoff and jitter when the link is lost. It holds no received
# message: each reaches its handler during loop() (valid during the call) and is acknowledged after it.
from tinymqtt.errors import (MQTTError, ConnectionLost, ConnectError, RemoteProtocolError, LocalProtocolError,
                             NotDelivered)
from tinymqtt.session import Session, ticks_diff, CONNECTED, DISCONNECTED, LOST
from tinymqtt.packets import CONNACK, PUBLISH, PUBACK, PUBREC, PUBCOMP, SUBACK, UNSUBACK, DISCONNECT, AUTH
from tinymqtt.driver import LINK_ERRORS, Backoff, default_port



class Client:
    """client = Client("broker", client_id="dev1", version=5, keepalive=30); client.connect();
    client.publish("a/b", b"hi", qos=1); client.loop(1.0). Session options pass through (see Session)."""

    def __init__(self, host="127.0.0.1", port=1883, tls=None, reconnect=True, backoff_min_ms=500,
                 backoff_max_ms=30000, batch=False, port_impl=None, **session_options):
        self.host, self.port, self.tls = host, port, tls
        self.reconnect, self.backoff_min_ms, self.backoff_max_ms = reconnect, backoff_min_ms, backoff_max_ms
        self.batch = batch  # True: publish() leaves packets in the buffer until it fills or loop() runs
        self.p = port_impl or default_port()
        S = Session  # (temporary: tinymqtt.driver will choose the class)
        if session_options.get("version", 5) == 5:
            from tinymqtt.session5 import Session5 as S
        self.session = S(on_event=self._event, **session_options)
        self.transport = None
        self.on_message = None  # fn(message) for messages no subscribe(handler=...) claimed
        self.on_connect = None  # fn(connack)
        self.on_disconnect = None  # fn(error): every end of a connection (None: our own disconnect())
        self.on_event = None  # fn(event, value, reason): every other session event (LOST, acks, AUTH...)
        # MQTT 5 enhanced authentication (props={AUTHENTICATION_METHOD: ...} in the options): fn(auth_packet)
        # -> (reason, props) or None, called for each AUTH the server sends (0x18: continue, also before
        # CONNACK; 0x00: a re-authentication succeeded). The answer goes out as our AUTH, with the method
        # added; None sends nothing. Re-authenticate with client.session.auth(0x19, props); client.flush().
        self.on_auth = None
        self.last_error = None
        self._acks = {}  # SUBACK/UNSUBACK packets by packet id, for the calls waiting on them
        self._failed = {}  # packet id -> reason code of a QoS 1/2 message refused (or 0x80: lost), for wait_for()
        self._backoff = Backoff()
        self._next_try = self.p.ticks_ms()  # a tick time like any other: the first loop() connects at once
        self._ms = {}  # loop()'s timeouts in ms, by their value in seconds (a float op allocates on 32-bit)

    # ---------------------------------------------------------------- connection

    def connect(self, timeout=10.0):
        """Opens the connection and waits for CONNACK; raises ConnectError when the server refuses."""
        try:
            self._open()
        except LINK_ERRORS as e:  # e.g. TLS 1.3: a refused client certificate shows at the first write
            self._close(e)
            raise
        deadline_ok = self._wait(lambda: self.session.state == CONNECTED, timeout, raise_errors=True)
        if not deadline_ok:
            self._close(ConnectionLost(0x88, "no CONNACK within %.1f s" % timeout))
            raise self.last_error
        return self.session.session_present

    def _open(self):
        s = self.session
        self.p.network_up()
        self.transport = self.p.open(self.host, self.port, self.tls)
        try:
            s.connect(self.p.ticks_ms())
        except LocalProtocolError:  # a CONNECT we may not send (3.1 without a client id...): no socket left open
            self.transport.close()
            self.transport = None
            raise
        self.flush()

    def _close(self, err):
        self.last_error = err
        if self.transport:
            try:
                self.flush()  # a DISCONNECT with the reason code may be waiting
            except (OSError, MQTTError):
                pass
            self.transport.close()
            self.transport = None
        self.session.connection_lost()
        self._next_try = self.p.ticks_ms() + self._backoff.next(self.backoff_min_ms, self.backoff_max_ms)
        if self.on_disconnect:
            self.on_disconnect(err)

    def disconnect(self, reason=0, props=None):
        """A clean DISCONNECT (the will is discarded unless reason is 0x04); no reconnect after it."""
        self.reconnect = False
        if self.transport:
            self.session.disconnect(reason, props)
            self._close(None)

    def is_connected(self):
        return self.session.state == CONNECTED

    # ---------------------------------------------------------------- requests

    def publish(self, topic, payload, qos=0, retain=False, props=None, timeout=30.0):
        """Queues the message and returns its packet id at once (0 for QoS 0); waits only while every
        in-flight slot is taken. Offline, QoS 1/2 (and QoS 0 while slots last) wait for the reconnect;
        with reconnect=False there is none, so a publish after the link died raises ConnectionLost at once."""
        s = self.session
        if not self.transport and not self.reconnect and self.session._connected_once:
            raise self._offline()
        pid = s.publish(topic, payload, qos, retain, props)
        if self._failed and pid > 0:
            self._failed.pop(pid, None)  # the id is reused: what wait_for() says about it is the new message's
        if pid < 0:  # (a method, not a lambda: a closure over `s` would allocate a cell on every publish)
            self._wait(self._has_room, timeout)
            pid = s.publish(topic, payload, qos, retain, props)
            if pid < 0:
                raise LocalProtocolError(0x97, "no in-flight slot freed within %.1f s" % timeout)
        if self.transport and (not self.batch or s.outlen > len(s.out) // 2):
            try:  # inline rather than through _io: a bound method would allocate on every publish
                self.flush()
            except LINK_ERRORS as e:
                self._close(e)
        return pid

    def _has_room(self):
        f = self.session.flights
        return f.count < f.size

    def wait_for(self, pid, timeout=30.0):
        """Waits until the QoS 1/2 flow of packet id pid ends. True: the server acknowledged it; False: still
        in flight after timeout. Raises NotDelivered (with the reason code) when the server refused it or it
        was lost with the session, and ConnectionLost when the link died with reconnect=False."""
        f = self.session.flights
        done = self._wait(lambda: f.find(pid) < 0, timeout)
        if done and pid in self._failed:
            reason = self._failed.pop(pid)
            raise NotDelivered(reason, "packet id %d %s" % (pid, "refused by the server" if reason != 0x80
                                                           else "lost: the server no longer has the session"), pid)
        return done

    def subscribe(self, topic, qos=0, handler=None, props=None, timeout=10.0):
        """topic: a filter, or a list of (filter, options). Returns the SUBACK reason codes (None while
        offline: the subscription is made on connect)."""
        topics = [(topic, qos)] if isinstance(topic, str) else topic
        return self._request(self.session.subscribe(topics, props, handler), timeout)

    def unsubscribe(self, topic, props=None, timeout=10.0):
        filters = [topic] if isinstance(topic, str) else topic
        return self._request(self.session.unsubscribe(filters, props), timeout)

    def _request(self, pid, timeout):
        if not pid:
            return None
        self._io(self.flush)
        if not self._wait(lambda: pid in self._acks, timeout):
            raise LocalProtocolError(0x80, "no acknowledgement for packet id %d within %.1f s" % (pid, timeout))
        return self._acks.pop(pid).codes

    def ack(self, message):
        """Manual-ack mode: acknowledge a message once it is safely handled."""
        while not self.session.ack(message):
            self._io(self.flush)
        if not self.batch:
            self._io(self.flush)

    # ---------------------------------------------------------------- the loop

    def flush(self):
        """Writes every pending packet (each batch in one write) and lets queued messages follow."""
        s = self.session
        while s.outlen and self.transport:
            n = s.outlen
            s.outlen = 0
            self.transport.write(s.out, n)
            s.pump()

    def loop(self, timeout=1.0):
        """Handles traffic for at most timeout seconds (returns after the first read that brings data):
        reads, keep-alive, retries, reconnects. Allocates nothing in steady state (MicroPython too)."""
        ms = self._ms.get(timeout)  # seconds -> ms once per distinct timeout: float arithmetic allocates
        if ms is None:
            ms = int(timeout * 1000)
            if len(self._ms) < 8:
                self._ms[timeout] = ms
        self._loop(ms)

    def _loop(self, timeout_ms):
        if not self.transport:
            if self.reconnect and ticks_diff(self.p.ticks_ms(), self._next_try) >= 0:
                self._io(self._open)
            else:
                self._sleep(timeout_ms)
            return
        try:  # _io inlined: a bound method and an *args tuple would allocate on every loop()
            self._step(timeout_ms)
        except LINK_ERRORS as e:
            self._close(e)
            if isinstance(e, ConnectError) and not self.reconnect:
                raise

    def _step(self, timeout_ms):
        s, p = self.session, self.p
        self.flush()
        wait = min(timeout_ms, s.tick(p.ticks_ms()))
        self.flush()
        n = self.transport.readinto(s.inbuf, s.inlen, wait)
        while s.received(n, p.ticks_ms()):
            self.flush()
            n = 0
        self.flush()

    def loop_forever(self):
        while self.transport or self.reconnect:
            self.loop(1.0)

    def _io(self, fn):
        # Whatever ends the link (a transport error, a protocol error, a dead link) closes it here; the
        # session keeps its state and the next loop() reconnects after the backoff.
        try:
            fn()
        except LINK_ERRORS as e:
            self._close(e)
            if isinstance(e, ConnectError) and not self.reconnect:
                raise

    def _wait(self, done, timeout, raise_errors=False):
        p = self.p
        start, ms = p.ticks_ms(), int(timeout * 1000)
        while not done():
            left = ms - ticks_diff(p.ticks_ms(), start)
            if left <= 0:
                return False
            if raise_errors and not self.transport:
                raise self.last_error
            if not self.transport and not self.reconnect:  # nothing can complete without a connection
                raise self._offline()
            if raise_errors:
                try:
                    self._step(min(left, 1000))
                except LINK_ERRORS as e:
                    self._close(e)
                    raise
            else:
                self._loop(min(left, 1000))
        return True

    def _offline(self):
        # The error for a request that needs a connection when none is left and none will come back.
        e = self.last_error
        if isinstance(e, ConnectionLost):
            return e
        return ConnectionLost(e.reason if isinstance(e, MQTTError) else 0x80,
                              "not connected (reconnect=False): %s" % (e or "disconnect() was called"))

    def _sleep(self, ms):
        import time
        if self.reconnect:  # wake up when the next reconnect attempt is due
            ms = min(ms, ticks_diff(self._next_try, self.p.ticks_ms()))
        time.sleep(max(ms, 1) / 1000)

    def _event(self, ev, value, reason):
        if ev == CONNACK:
            self._backoff.reset()
            if self.on_connect:
                self.on_connect(value)
        elif ev == PUBLISH and self.on_message:
            self.on_message(value)
        elif ev == SUBACK or ev == UNSUBACK:
            self._acks[value.pid] = value
        elif reason >= 0x80 and (ev == PUBACK or ev == PUBREC or ev == PUBCOMP):
            self._failed_add(value, reason)
        elif ev == LOST:
            self._failed_add(value.pid, 0x80)
        elif ev == AUTH and self.on_auth:
            answer = self.on_auth(value)
            if answer:
                self.session.auth(answer[0], answer[1])
        if self.on_event and ev != PUBLISH:
            self.on_event(ev, value, reason)

    def _failed_add(self, pid, reason):
        if len(self._failed) >= 64:  # bounded: a failure nobody asked about goes (the oldest on CPython)
            self._failed.pop(next(iter(self._failed)))
        self._failed[pid] = reason

    def __enter__(self):
        self.connect()
        return self

    def __exit__(self, *exc):
        self.disconnect()
