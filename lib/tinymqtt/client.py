# The blocking client: a thin driver over Session (which makes every protocol decision) and a port
# (transport and clock). It writes each batch of packets in one write, reads with a timeout, keeps the
# link alive, and reconnects with exponential backoff and jitter when the link is lost. It holds no received
# message: each reaches its handler during loop() (valid during the call) and is acknowledged after it.
from tinymqtt.driver import Driver, _LINK_ERRORS, ticks_diff, ConnectionLost, LocalProtocolError, const
from tinymqtt.checks import check_publish

_APP_ACKS = const(1)  # const(0) in a board build without tinymqtt/app_acks.py (tools/deploy/features.py)
_CONNECTED = const(2)  # Session.state
# What wait_for() may wait for besides a packet id's flow (packet ids are 1-65535)
_UNTIL_FREE_SLOT = const(-1)  # an in-flight slot frees (publish() with every slot taken)
_UNTIL_CONNACK = const(-2)  # the CONNACK (connect()); raises the link's error if it closes first
# What _io() does besides one turn of the loop of at most ms >= 0
_FLUSH = const(-1)  # write what is pending
_OPEN = const(-2)  # open the connection: CONNECT goes out, CONNACK comes in a later turn


class Client(Driver):
    """client = Client("broker", client_id="dev1", version=5, keepalive=30); client.connect();
    client.publish("a/b", b"hi", qos=1); client.loop(1.0). Options and callbacks: see Driver."""

    # ---------------------------------------------------------------- connection

    def connect(self, timeout=10):
        """Opens the connection and waits for CONNACK; raises ConnectError when the server refuses."""
        self._io(_OPEN)  # a failure (e.g. TLS 1.3: a refused client certificate) is raised by wait_for()
        if not self.wait_for(_UNTIL_CONNACK, timeout):
            self._close(ConnectionLost(0x88, "no CONNACK within %.1f s" % timeout))
            raise self.last_error
        return self.session.session_present

    def disconnect(self, reason=0, props=None):
        """A clean DISCONNECT (the will is discarded unless reason is 0x04); no reconnect after it."""
        self.reconnect = False
        if self.transport:
            self.session.disconnect(reason, props)
            self._close(None)

    # ---------------------------------------------------------------- requests

    def publish(self, topic, payload, qos=0, retain=False, props=None, timeout=30, length=None):
        """Queues the message and returns its packet id at once (0 for QoS 0); waits only while every
        in-flight slot is taken. Offline, QoS 1/2 (and QoS 0 while slots last) wait for the reconnect;
        with reconnect=False there is none, so a publish after the link died raises ConnectionLost at once.
        length=n: payload is a source of n bytes (a file opened on flash), sent piece by piece (docs/streaming.md)."""
        s = self.session
        while True:  # (offline with reconnect=False once a link was lost, wait_for() raises; _delay 0: none lost yet)
            if self.transport or self.reconnect or not self._delay:
                try:
                    pid = s.publish(topic, payload, qos, retain, props, length)
                except ConnectionLost as e:  # a streamed payload's source ended before its length: the PUBLISH
                    self._close(e)  # begun in `out` cannot be finished, so the connection ends (stream.py)
                    raise
                if pid >= 0:
                    break
            else:  # no connection will come (wait_for raises ConnectionLost): an invalid argument says so first
                check_publish(s, topic, payload if length is None else b"", qos, retain, props)
            if not self.wait_for(_UNTIL_FREE_SLOT, timeout):
                raise LocalProtocolError(0x97, "no in-flight slot freed within %.1f s" % timeout)
        if not self.batch or s.outlen > s.out_size // 2:  # the driver's write (offline: nothing to write)
            try:
                self._write()
            except _LINK_ERRORS as e:  # as in _io(): the link ends, the session keeps the message for the next one
                self._close(e)
        return pid

    def wait_for(self, pid, timeout=30):
        """Waits until the QoS 1/2 flow of packet id pid ends. True: the server acknowledged it; False: still
        in flight after timeout. Raises NotDelivered (with the reason code) when the server refused it or it
        was lost with the session, and ConnectionLost when the link died with reconnect=False."""
        # (Inside the client pid may also be _UNTIL_FREE_SLOT or _UNTIL_CONNACK. A SUBSCRIBE's or UNSUBSCRIBE's
        # returns its ack's codes, or True when its slot went with the link: the new connection asks again.)
        f = self.session.flights
        ms = self._millis(timeout)
        start = self.p.ticks_ms()
        while True:
            if pid >= 0 and f.find(pid) < 0:
                return getattr(self._outcome(pid), "codes", True)  # (a SUBSCRIBE's: its SUBACK's)
            if not self.transport and (pid == _UNTIL_CONNACK or not self.reconnect):
                e = self.last_error  # connecting: the link's error; else a ConnectionLost (none will come back)
                if pid == _UNTIL_CONNACK:
                    raise e
                raise ConnectionLost(getattr(e, "reason", 0x80), "not connected (reconnect=False): %s"
                                     % (e or "disconnect() was called"))
            if pid == _UNTIL_FREE_SLOT:
                if f.count < f.size:
                    return True
            elif pid == _UNTIL_CONNACK and self.session.state == _CONNECTED:
                return True
            left = ms - ticks_diff(self.p.ticks_ms(), start)
            if left <= 0:
                return False
            self._io(left)

    def _millis(self, timeout):
        # seconds -> ms, computed once per distinct timeout: a loop() with the heap locked must not compute it
        c = self._ms
        ms = c.get(timeout)
        if ms is None:
            ms = int(timeout * 1000)
            if len(c) < 8:
                c[timeout] = ms
        return ms

    _ms = {}  # timeouts in ms, by their value in seconds (one table: they mean the same to every client)

    def subscribe(self, topic, qos=0, handler=None, props=None, timeout=10, chunks=False):
        """topic: a filter, or a list of (filter, options). Returns the SUBACK reason codes (None while
        offline: the subscription is made on connect). chunks=True: handler(message, total, offset, chunk) gets
        each message in pieces, however large (docs/streaming.md)."""
        return self._request(self.session.subscribe([(topic, qos)] if isinstance(topic, str) else topic, props,
                                                    handler, chunks), timeout)

    def unsubscribe(self, topic, props=None, timeout=10):
        return self._request(self.session.unsubscribe([topic] if isinstance(topic, str) else topic, props), timeout)

    def _request(self, pid, timeout):
        if not pid:
            return None
        self._done[pid] = ...  # waiting (see Driver.__init__; wait_for()'s first turn writes the request)
        p = self.wait_for(pid, timeout)
        if p is False:
            del self._done[pid]  # (still waiting: the flow is in flight)
            raise LocalProtocolError(0x80, "no acknowledgement for packet id %d within %.1f s" % (pid, timeout))
        return None if p is True else p  # (True: the link dropped first; the new connection asks again)

    if _APP_ACKS:  # (a build without app_acks.py refuses manual_ack: no ack() either)
        def ack(self, message):
            """Manual-ack mode: acknowledge a message once it is safely handled. Without manual_ack there is nothing
            to do (its handler's return acknowledged it; that session has no ack())."""
            a = getattr(self.session, "ack", None)
            if a:
                while not a(message):  # False: `out` is full, written first
                    self._io(_FLUSH)
                if not self.batch:
                    self._io(_FLUSH)

    # ---------------------------------------------------------------- the loop

    flush = Driver._write  # writes every pending packet (each batch in one write); queued messages follow

    def loop(self, timeout=1):
        """Handles traffic for at most timeout seconds (returns after the first read that brings data):
        reads, keep-alive, retries, reconnects. Allocates nothing in steady state (MicroPython too)."""
        self._io(self._millis(timeout))

    def loop_forever(self):
        while self.transport or self.reconnect:
            self._io(1000)

    def _io(self, ms):
        # Every use of the link goes through here: ms >= 0, one turn of the loop of at most ms (offline: the
        # reconnect once its backoff is due); _FLUSH, write what is pending; _OPEN, open the connection. Whatever
        # ends the link (a transport error, a protocol error, a dead link) closes it here; the session keeps its
        # state and the next loop() reconnects after the backoff.
        s = self.session
        p = self.p
        t = self.transport
        try:
            if ms >= 0:
                if t:
                    wait = min(ms, s.tick(p.ticks_ms()))
                    self.flush()
                    n = t.readinto(s.inbuf, s.inlen, wait)
                    while s.received(n, p.ticks_ms()):
                        self.flush()
                        n = 0
                else:
                    due = ticks_diff(self._next_try, p.ticks_ms()) if self.reconnect else ms + 1
                    if due > 0:  # asleep until the next reconnect attempt is due (without reconnect: all of ms)
                        import time
                        time.sleep(min(due, ms) / 1000)
                        return
                    ms = _OPEN
            if ms == _OPEN:
                p.network_up()
                s.connect(p.ticks_ms())  # first: a CONNECT we may not send (3.1 without a client id) opens no socket
                self.transport = p.open(self.host, self.port, self.tls)
            self.flush()
        except _LINK_ERRORS as e:
            self._close(e)

    def __enter__(self):
        self.connect()
        return self

    def __exit__(self, *args):
        self.disconnect()
