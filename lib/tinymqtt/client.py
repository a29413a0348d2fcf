# The blocking client: a thin driver over Session (which makes every protocol decision) and a port
# (transport and clock). It writes each batch of packets in one write, reads with a timeout, keeps the
# link alive, and reconnects with exponential backoff and jitter when the link is lost. It holds no received
# message: each reaches its handler during loop() (valid during the call) and is acknowledged after it.
from tinymqtt.driver import Driver, LINK_ERRORS, WAITING, ticks_diff, ConnectionLost, ConnectError, LocalProtocolError


class Client(Driver):
    """client = Client("broker", client_id="dev1", version=5, keepalive=30); client.connect();
    client.publish("a/b", b"hi", qos=1); client.loop(1.0). Options and callbacks: see Driver."""

    # ---------------------------------------------------------------- connection

    def connect(self, timeout=10.0):
        """Opens the connection and waits for CONNACK; raises ConnectError when the server refuses."""
        self._io(self._open)  # a failure (e.g. TLS 1.3: a refused client certificate) is raised by _wait()
        if not self._wait(self.is_connected, timeout, True):
            self._close(ConnectionLost(0x88, "no CONNACK within %.1f s" % timeout))
            raise self.last_error
        return self.session.session_present

    def _open(self):
        p = self.p
        p.network_up()
        self.session.connect(p.ticks_ms())  # first: a CONNECT we may not send (3.1 without a client id) opens no socket
        self.transport = p.open(self.host, self.port, self.tls)
        self.flush()

    def disconnect(self, reason=0, props=None):
        """A clean DISCONNECT (the will is discarded unless reason is 0x04); no reconnect after it."""
        self.reconnect = False
        if self.transport:
            self.session.disconnect(reason, props)
            self._close(None)

    # ---------------------------------------------------------------- requests

    def publish(self, topic, payload, qos=0, retain=False, props=None, timeout=30.0):
        """Queues the message and returns its packet id at once (0 for QoS 0); waits only while every
        in-flight slot is taken. Offline, QoS 1/2 (and QoS 0 while slots last) wait for the reconnect;
        with reconnect=False there is none, so a publish after the link died raises ConnectionLost at once."""
        s = self.session
        if not self.transport and not self.reconnect and s._connected_once:
            raise self._offline()
        pid = s.publish(topic, payload, qos, retain, props)
        if pid < 0 and self._wait(self._has_room, timeout):  # (a method, not a lambda: a closure over `s`
            pid = s.publish(topic, payload, qos, retain, props)  # would allocate a cell on every publish)
        if pid < 0:
            raise LocalProtocolError(0x97, "no in-flight slot freed within %.1f s" % timeout)
        self._done.pop(pid, None)  # the id is reused: what wait_for() says about it is the new message's
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
        if done:
            self._outcome(pid)
        return done

    def subscribe(self, topic, qos=0, handler=None, props=None, timeout=10.0):
        """topic: a filter, or a list of (filter, options). Returns the SUBACK reason codes (None while
        offline: the subscription is made on connect)."""
        topics = [(topic, qos)] if isinstance(topic, str) else topic
        return self._request(self.session.subscribe(topics, props, handler), timeout)

    def unsubscribe(self, topic, props=None, timeout=10.0):
        return self._request(self.session.unsubscribe([topic] if isinstance(topic, str) else topic, props), timeout)

    def _request(self, pid, timeout):
        if not pid:
            return None
        d = self._done
        d[pid] = WAITING
        self._io(self.flush)
        ok = self._wait(lambda: d.get(pid) is not WAITING, timeout)
        p = self._outcome(pid)
        if not ok:
            raise LocalProtocolError(0x80, "no acknowledgement for packet id %d within %.1f s" % (pid, timeout))
        return p.codes

    def ack(self, message):
        """Manual-ack mode: acknowledge a message once it is safely handled."""
        while not self.session.ack(message):
            self._io(self.flush)
        if not self.batch:
            self._io(self.flush)

    # ---------------------------------------------------------------- the loop

    flush = Driver._write  # writes every pending packet (each batch in one write); queued messages follow

    def loop(self, timeout=1.0):
        """Handles traffic for at most timeout seconds (returns after the first read that brings data):
        reads, keep-alive, retries, reconnects. Allocates nothing in steady state (MicroPython too)."""
        ms = self._ms.get(timeout)  # seconds -> ms once per distinct timeout: float arithmetic allocates
        if ms is None:
            ms = int(timeout * 1000)
            if len(self._ms) < 8:
                self._ms[timeout] = ms
        self._loop(ms)

    _ms = {}  # loop()'s timeouts in ms, by their value in seconds (one table: they mean the same to every client)

    def _loop(self, timeout_ms):
        if not self.transport:
            due = ticks_diff(self._next_try, self.p.ticks_ms()) if self.reconnect else timeout_ms
            if due > 0 or not self.reconnect:  # asleep until the next reconnect attempt is due
                import time
                time.sleep(max(1, min(due, timeout_ms)) / 1000)
            else:
                self._io(self._open)
            return
        try:  # not through _io: a bound method and an *args tuple would allocate on every loop()
            self._step(timeout_ms)
        except LINK_ERRORS as e:
            self._fail(e)

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
        try:
            fn()
        except LINK_ERRORS as e:
            self._fail(e)

    def _fail(self, e):
        # Whatever ends the link (a transport error, a protocol error, a dead link) closes it here; the
        # session keeps its state and the next loop() reconnects after the backoff.
        self._close(e)
        if isinstance(e, ConnectError) and not self.reconnect:
            raise e

    def _wait(self, done, timeout, connecting=False):
        # Loops until done() or timeout s; raises when nothing can complete (connecting: the link's error).
        p = self.p
        start, ms = p.ticks_ms(), int(timeout * 1000)
        while not done():
            if not self.transport and (connecting or not self.reconnect):
                raise self.last_error if connecting else self._offline()
            left = ms - ticks_diff(p.ticks_ms(), start)
            if left <= 0:
                return False
            self._loop(min(left, 1000))
        return True

    def _offline(self):
        # The error for a request that needs a connection when none is left and none will come back.
        e = self.last_error
        return e if isinstance(e, ConnectionLost) else ConnectionLost(
            getattr(e, "reason", 0x80), "not connected (reconnect=False): %s" % (e or "disconnect() was called"))

    def __enter__(self):
        self.connect()
        return self

    def __exit__(self, *exc):
        self.disconnect()
