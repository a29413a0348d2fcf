# The asyncio client, one code base for MicroPython's asyncio and CPython's: a thin driver over Session
# (every protocol decision is made there) and a port's async stream. A reader task waits on the stream
# (no polling), a ticker task keeps the link alive; both reconnect with backoff when the link is lost.
# What it holds: the session's buffers and in-flight slots (fixed at construction), and for messages() at
# most Receive Maximum received messages, each acknowledged (QoS 1/2) only when the application takes it.
import asyncio
try:
    from ucollections import namedtuple  # the builtin: a build may freeze a collections package over it (~0.8 KB)
except ImportError:  # CPython
    from collections import namedtuple

from tinymqtt.driver import Driver, LINK_ERRORS, WAITING, const, ticks_diff, ConnectionLost, ConnectError
import tinymqtt.app_acks  # (its session acknowledges what messages() hands out: loaded with the client, not by it)

_CONNACK = const(2)  # (tinymqtt.packets' types, inlined by MicroPython)
_PUBLISH = const(3)


_sleep_ms = getattr(asyncio, "sleep_ms", None) or (lambda ms: asyncio.sleep(ms / 1000))  # (CPython has no sleep_ms)


# A message from messages(): its own copy (the session reuses its receive buffer), one tuple and the payload.
# (Its fields in a list: a tuple of str literals would be a constant of str objects on a board's heap.)
Message = namedtuple("Message", ["topic", "payload", "qos", "retain", "dup", "pid", "props"])


class AsyncClient(Driver):
    """async with AsyncClient("broker", client_id="dev1", version=5) as c:
           await c.subscribe("cmd/#", 1); await c.publish("t", b"x", qos=1)
           async for msg in c.messages(): ...
    Options and callbacks: see Driver (on_message is the blocking client's; here messages() has them)."""

    def __init__(self, *args, **options):  # (Driver's: host, port, tls... without batch, the blocking client's)
        Driver.__init__(self, *args, ack_later=True, **options)  # (a session with app_acks.py's ack())
        self._closed = False
        # Received messages no handler claimed, for messages(): a ring of Receive Maximum entries. QoS 1/2
        # messages are acknowledged when taken (manual_ack: by ack()), so a v5 server sends no more than
        # that many; a PUBLISH that still finds the ring full (QoS 0, or a 3.x server) parks the reader until
        # the application takes one (acks and everything behind it wait too: TCP pushes back to the server).
        # An application that awaits its own publishes without reading messages() needs a receive_maximum
        # as large as what may arrive meanwhile.
        s = self.session
        self._inbox = [None] * s.receive_maximum
        self._inbox_head = self._inbox_n = 0
        self._inbox_ev = asyncio.Event()  # set when a message arrives
        # One Event for every other wait: flows awaited by publish(), subscribe(), unsubscribe() (each waiter
        # looks for its own packet id in _done), publish() waiting for a free in-flight slot, the reader parked
        # behind a full inbox. Set at every session event and when a full inbox frees a place: a flow costs no
        # Event of its own, and each waiter checks its own condition again.
        self._changed = asyncio.Event()
        self._connected = asyncio.Event()
        self._tasks = []

    stream = property(lambda self: self.transport)  # the port's async stream, None while offline

    # ---------------------------------------------------------------- connection

    async def connect(self, timeout=10):
        """Opens the connection, waits for CONNACK (ConnectError when refused) and starts the tasks."""
        await self._open()
        if not self.transport:  # e.g. TLS 1.3: a refused client certificate shows at the first write
            raise self.last_error
        self._tasks = [asyncio.create_task(self._guard(self._reader())),
                       asyncio.create_task(self._guard(self._ticker()))]
        try:
            await asyncio.wait_for(self._connected.wait(), timeout)
        except asyncio.TimeoutError:
            self.last_error = ConnectionLost(0x88, "no CONNACK within %.1f s" % timeout)
        if not self.is_connected():
            await self.close()  # (last_error stays)
            raise self.last_error
        return self.session.session_present

    async def _open(self):
        # A failure that ends the link closes it (last_error tells why); one of the caller's own raises.
        p = self.p
        try:
            p.network_up()
            self.session.connect(p.ticks_ms())  # first: a CONNECT we may not send opens no socket
            self.transport = await p.open_stream(self.host, self.port, self.tls)
            await self.flush()
        except LINK_ERRORS as e:
            self._close(e)

    def _close(self, err):
        self._connected.clear()
        if isinstance(err, ConnectError) or not self.reconnect:
            self._connected.set()  # wake connect(): it reads last_error
        Driver._close(self, err)

    async def disconnect(self, reason=0, props=None):
        """A clean DISCONNECT (the will is discarded unless reason is 0x04), then stops the tasks."""
        self.reconnect = False
        if self.transport and self.is_connected():
            self.session.disconnect(reason, props)
            try:
                await self.flush()
            except LINK_ERRORS:  # the link died meanwhile (a board stream raises ConnectionLost): closing anyway
                pass
        await self.close()

    async def close(self):
        for t in self._tasks:
            t.cancel()
        self._tasks = []
        self._end()

    def _end(self):
        # Stops the client: the link closes and every waiter wakes (awaited flows end with None).
        self._closed = True
        self.reconnect = False
        if self.transport:
            self.transport.close()
            self.transport = None
        self.session.connection_lost()
        self.session.hold = False
        self._inbox_ev.set()
        d = self._done
        for pid in d:
            if d[pid] is WAITING:
                d[pid] = None
        self._changed.set()

    # ---------------------------------------------------------------- requests

    def publish_nowait(self, topic, payload, qos=0, retain=False, props=None):
        """Queues the message; returns its packet id (0 for QoS 0) or -1 when every slot is taken.
        The reader/ticker tasks write it out; call `await flush()` to push it now."""
        return self.session.publish(topic, payload, qos, retain, props)

    async def publish(self, topic, payload, qos=0, retain=False, props=None, wait=True):
        """Publishes and, for QoS 1/2 with wait=True, returns when the flow completes with its reason code
        (0, or 0x10 no matching subscribers). Raises NotDelivered when the server refused the message or it
        was lost with a session the server no longer has."""
        s = self.session
        while True:
            pid = s.publish(topic, payload, qos, retain, props)
            if pid >= 0:
                break
            self._changed.clear()
            await self._changed.wait()
        wait = qos and wait
        if wait:
            self._done[pid] = WAITING
        try:  # (flush() is no coroutine of ours: it costs no allocation)
            await self.flush()
        except LINK_ERRORS as e:
            self._close(e)
        if not wait:
            return pid
        return await self._result(pid)

    async def subscribe(self, topic, qos=0, handler=None, props=None):
        """topic: a filter or a list of (filter, options). Returns the SUBACK reason codes (None offline)."""
        topics = [(topic, qos)] if isinstance(topic, str) else topic
        return await self._request(self.session.subscribe(topics, props, handler))

    async def unsubscribe(self, topic, props=None):
        return await self._request(self.session.unsubscribe([topic] if isinstance(topic, str) else topic, props))

    async def _request(self, pid):
        # Writes what is queued; for a SUBSCRIBE's or UNSUBSCRIBE's pid, returns its reason codes once its ack
        # came (None: offline, pid 0, or the client closed).
        if pid:
            self._done[pid] = WAITING
        try:
            await self.flush()
        except LINK_ERRORS as e:
            self._close(e)
        p = pid and await self._result(pid)
        return p.codes if p else None

    async def ack(self, message):
        """Manual-ack mode: acknowledge a message once it is safely handled."""
        done = False
        while not done:
            done = self.session.ack(message)  # False: `out` is full, written first
            await self._request(0)

    def __aiter__(self):
        return self

    # `async for msg in client.messages()`: the messages no subscribe(handler=...) claimed, oldest first; at most
    # Receive Maximum are held (see __init__). Each msg is a Message the application may keep. The client is its
    # own iterator: MicroPython has no async generators, and a class of its own would cost heap.
    messages = __aiter__

    async def __anext__(self):
        while not self._inbox_n:
            if self._closed:
                raise StopAsyncIteration
            self._inbox_ev.clear()
            await self._inbox_ev.wait()
        # The oldest message leaves the inbox; QoS 1/2 is acknowledged now (unless manual_ack), at once.
        box, i, s = self._inbox, self._inbox_head, self.session
        m = box[i]
        box[i] = None
        self._inbox_head = (i + 1) % len(box)
        self._inbox_n -= 1
        if s.hold:
            s.hold = False
            self._changed.set()
        if m.qos and not s.manual_ack:
            try:
                if not s.ack(m):  # `out` is full: write it first
                    self._write()
                    s.ack(m)
                self._write()  # the stream keeps what the socket cannot take; the next flush drains it
            except LINK_ERRORS as e:
                self._close(e)
        return m

    async def _result(self, pid):
        # How the flow of pid ended (None: the client closed, also before the flow began, or its slot went with
        # the link without an ack: a SUBSCRIBE the new connection makes again); raises NotDelivered for a refused
        # or lost message.
        d = self._done
        try:
            while d.get(pid) is WAITING and not self._closed and self.session.flights.find(pid) >= 0:
                self._changed.clear()  # (no await since the check: a completion cannot slip in between)
                await self._changed.wait()
        finally:  # (cancelled by wait_for...: nobody waits any more)
            r = self._outcome(pid)
        return None if r is WAITING else r

    # ---------------------------------------------------------------- tasks

    def flush(self):
        """Writes what is queued now: `await client.flush()`. Returns the stream's drain() itself (a bare yield
        when the socket took everything), not a coroutine of ours: publish_nowait() + flush() allocates nothing."""
        self._write()
        return self.transport.drain() if self.transport else _sleep_ms(0)

    async def _guard(self, task):
        # An error in a task that is not the link's (those end a connection and are handled inside): a handler's
        # own, or MemoryError. The client stops with it as last_error, on_disconnect and connect() see it, and
        # every waiter wakes, rather than awaiting a task that is gone; asyncio still reports it.
        try:
            await task
        except Exception as e:
            self.reconnect = False
            if self.transport:
                self._close(e)
            self.last_error = e
            self._connected.set()
            self._end()
            raise

    async def _reader(self):
        s, p = self.session, self.p
        while not self._closed:
            st = self.transport
            if not st:
                if not self.reconnect:
                    return
                await _sleep_ms(ticks_diff(self._next_try, p.ticks_ms()))  # (<= 0: at once)
                await self._open()
                continue
            try:
                n = await st.readinto(s.inbuf, s.inlen)
                while True:
                    more = s.received(n, p.ticks_ms())  # True: stopped early, `out` is nearly full or parked
                    n = 0
                    if s.outlen:  # acks to send (flush() inlined: a call costs an allocation)
                        self._write()
                        await st.drain()
                    if not more:
                        break
                    while s.parked and s.hold and self.transport is st:  # a message arrived; the inbox is full
                        self._changed.clear()
                        await self._changed.wait()
            except LINK_ERRORS as e:
                if self.transport is st:  # else the ticker (keep-alive) or close() ended it: EBADF is no news
                    self._close(e)

    async def _ticker(self):
        s, p = self.session, self.p
        while not self._closed:
            wait = 1000
            if self.transport:
                try:
                    wait = s.tick(p.ticks_ms())
                    if s.outlen:  # a PINGREQ, a retry
                        await self.flush()
                except LINK_ERRORS as e:
                    self._close(e)
            await _sleep_ms(max(10, min(wait, 1000)))

    def _event(self, ev, value, reason):
        if ev == _PUBLISH:  # the session reuses the message and its buffer once this returns: keep a copy
            box, n = self._inbox, self._inbox_n
            m = box[(self._inbox_head + n) % len(box)] = Message(value.topic, bytes(value.payload), value.qos,
                                                                 value.retain, value.dup, value.pid, value.props)
            if m.qos:  # held by app_acks.py: only this copy acknowledges it (not one from a lost session)
                self.session._held[m.pid] = m
            self._inbox_n = n + 1
            if n + 1 == len(box):
                self.session.hold = True  # received() stops before the next packet
            self._inbox_ev.set()
            return
        Driver._event(self, ev, value, reason)
        if ev == _CONNACK:
            self._connected.set()
        self._changed.set()  # a flow ended, a slot freed, or the session lost messages: waiters look again

    async def __aenter__(self):
        await self.connect()
        return self

    async def __aexit__(self, *exc):
        await self.disconnect()
