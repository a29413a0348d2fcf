# The asyncio client, one code base for MicroPython's asyncio and CPython's: a thin driver over Session
# (every protocol decision is made there) and a port's async stream. A reader task waits on the stream
# (no polling), a ticker task keeps the link alive; both reconnect with backoff when the link is lost.
# What it holds: the session's buffers and in-flight slots (fixed at construction), and for messages() at
# most Receive Maximum received messages, each acknowledged (QoS 1/2) only when the application takes it.
import asyncio
from collections import namedtuple

from tinymqtt.errors import MQTTError, ConnectionLost, ConnectError, RemoteProtocolError, LocalProtocolError
from tinymqtt.session import Session, CONNECTED, LOST
from tinymqtt.packets import CONNACK, PUBLISH, PUBACK, PUBREC, PUBCOMP, SUBACK, UNSUBACK, AUTH
from tinymqtt.driver import LINK_ERRORS, Backoff, default_port


def _sleep_ms(ms):
    return asyncio.sleep_ms(ms) if hasattr(asyncio, "sleep_ms") else asyncio.sleep(ms / 1000)


# A message from messages(): its own copy (the session reuses its receive buffer), one tuple and the payload.
Message = namedtuple("Message", ("topic", "payload", "qos", "retain", "dup", "pid", "props"))


class Messages:
    """`async for msg in client.messages()`: a class with __anext__, as MicroPython has no async generators."""

    def __init__(self, client):
        self.c = client

    def __aiter__(self):
        return self

    async def __anext__(self):
        c = self.c
        while not c._inbox_n:
            if c._closed:
                raise StopAsyncIteration
            c._inbox_ev.clear()
            await c._inbox_ev.wait()
        return c._take()


class AsyncClient:
    """async with AsyncClient("broker", client_id="dev1", version=5) as c:
           await c.subscribe("cmd/#", 1); await c.publish("t", b"x", qos=1)
           async for msg in c.messages(): ..."""

    def __init__(self, host="127.0.0.1", port=1883, tls=None, reconnect=True, backoff_min_ms=500,
                 backoff_max_ms=30000, port_impl=None, **session_options):
        self.host, self.port, self.tls = host, port, tls
        self.reconnect, self.backoff_min_ms, self.backoff_max_ms = reconnect, backoff_min_ms, backoff_max_ms
        self.p = port_impl or default_port()
        S = Session  # (temporary: tinymqtt.driver will choose the class)
        if session_options.get("version", 5) == 5:
            from tinymqtt.session5 import Session5 as S
        self.session = S(on_event=self._event, **session_options)
        self.stream = None
        self.on_connect = self.on_disconnect = self.on_event = None
        self.on_auth = None  # MQTT 5 enhanced authentication: fn(auth_packet) -> (reason, props) or None (see Client)
        self.last_error = None
        self._closed = False
        # Received messages no handler claimed, for messages(): a ring of Receive Maximum entries. QoS 1/2
        # messages are acknowledged when taken (manual_ack: by ack()), so a v5 server sends no more than
        # that many; a PUBLISH that still finds the ring full (QoS 0, or a 3.x server) parks the reader until
        # the application takes one (acks and everything behind it wait too: TCP pushes back to the server).
        # An application that awaits its own publishes without reading messages() needs a receive_maximum
        # as large as what may arrive meanwhile.
        s = self.session
        s.ack_later = True
        self._inbox = [None] * s.receive_maximum
        self._inbox_head = self._inbox_n = 0
        self._inbox_ev = asyncio.Event()  # set when a message arrives
        self._taken = asyncio.Event()  # set when the application takes one from a full inbox
        # Flows awaited by publish(), subscribe(), unsubscribe(): packet id -> result once it completed. One
        # Event for all of them (set at every completion; each waiter looks for its own packet id), so a
        # flow costs no Event of its own.
        self._results = {}
        self._waiting = {}  # packet id -> True while someone awaits it (results of the others are not kept)
        self._done = asyncio.Event()
        self._room = asyncio.Event()  # set when an in-flight slot frees
        self._connected = asyncio.Event()
        self._tasks = []
        self._backoff = Backoff()

    # ---------------------------------------------------------------- connection

    async def connect(self, timeout=10.0):
        """Opens the connection, waits for CONNACK (ConnectError when refused) and starts the tasks."""
        try:
            await self._open()
        except LINK_ERRORS as e:  # e.g. TLS 1.3: a refused client certificate shows at the first write
            self._lost(e)
            raise
        self._tasks = [asyncio.create_task(self._reader()), asyncio.create_task(self._ticker())]
        try:
            await asyncio.wait_for(self._connected.wait(), timeout)
        except asyncio.TimeoutError:
            await self.close()
            raise ConnectionLost(0x88, "no CONNACK within %.1f s" % timeout)
        if self.session.state != CONNECTED:
            err = self.last_error
            await self.close()
            raise err
        return self.session.session_present

    async def _open(self):
        self.p.network_up()
        self.stream = await self.p.open_stream(self.host, self.port, self.tls)
        self.session.connect(self.p.ticks_ms())
        await self._flush()

    def _lost(self, err):
        self.last_error = err
        self._connected.clear()
        if self.stream:
            try:  # a DISCONNECT with the reason code may be waiting
                if self.session.outlen:
                    self.stream.write(self.session.out, self.session.outlen)
                self.session.outlen = 0
            except (OSError, MQTTError):  # a board stream raises ConnectionLost for a dead socket
                pass
            self.stream.close()
            self.stream = None
        self.session.connection_lost()
        if isinstance(err, ConnectError) or not self.reconnect:
            self._connected.set()  # wake connect(): it reads last_error
        if self.on_disconnect:
            self.on_disconnect(err)

    async def disconnect(self, reason=0, props=None):
        """A clean DISCONNECT (the will is discarded unless reason is 0x04), then stops the tasks."""
        self.reconnect = False
        if self.stream and self.session.state == CONNECTED:
            self.session.disconnect(reason, props)
            try:
                await self._flush()
            except OSError:
                pass
        await self.close()

    async def close(self):
        self._closed = True
        self.reconnect = False
        for t in self._tasks:
            t.cancel()
        self._tasks = []
        if self.stream:
            self.stream.close()
            self.stream = None
        self.session.connection_lost()
        self.session.hold = False
        self._inbox_ev.set()
        self._taken.set()
        for pid in list(self._waiting):
            self._finish(pid, None)

    def is_connected(self):
        return self.session.state == CONNECTED

    # ---------------------------------------------------------------- requests

    def publish_nowait(self, topic, payload, qos=0, retain=False, props=None):
        """Queues the message; returns its packet id (0 for QoS 0) or -1 when every slot is taken.
        The reader/ticker tasks write it out; call `await flush()` to push it now."""
        return self.session.publish(topic, payload, qos, retain, props)

    async def publish(self, topic, payload, qos=0, retain=False, props=None, wait=True):
        """Publishes and, for QoS 1/2 with wait=True, returns when the flow completes with its reason code
        (0, or 0x10 no matching subscribers). Raises MQTTError when the server refuses the message."""
        s = self.session
        while True:
            pid = s.publish(topic, payload, qos, retain, props)
            if pid >= 0:
                break
            self._room.clear()
            await self._room.wait()
        wait = qos and wait
        if wait:
            self._waiting[pid] = True
        st = self.stream
        try:  # _flush_safely() inlined: each coroutine called costs an allocation
            self._write()
            if st:
                await st.drain()
        except LINK_ERRORS as e:
            self._lost(e)
        if not wait:
            return pid
        return await self._result(pid)

    async def subscribe(self, topic, qos=0, handler=None, props=None):
        """topic: a filter or a list of (filter, options). Returns the SUBACK reason codes (None offline)."""
        topics = [(topic, qos)] if isinstance(topic, str) else topic
        pid = self.session.subscribe(topics, props, handler)
        return await self._request(pid)

    async def unsubscribe(self, topic, props=None):
        pid = self.session.unsubscribe([topic] if isinstance(topic, str) else topic, props)
        return await self._request(pid)

    async def _request(self, pid):
        if not pid:
            return None
        self._waiting[pid] = True
        await self._flush_safely()
        p = await self._result(pid)
        return p.codes if p is not None else None

    async def ack(self, message):
        """Manual-ack mode: acknowledge a message once it is safely handled."""
        while not self.session.ack(message):
            await self._flush_safely()
        await self._flush_safely()

    def messages(self):
        """`async for msg in client.messages()`: the messages no subscribe(handler=...) claimed, oldest first;
        at most Receive Maximum are held (see __init__). Each msg is a Message the application may keep."""
        return Messages(self)

    def _take(self):
        # The oldest message leaves the inbox; QoS 1/2 is acknowledged now (unless manual_ack), at once.
        box, i, s = self._inbox, self._inbox_head, self.session
        m = box[i]
        box[i] = None
        self._inbox_head = (i + 1) % len(box)
        self._inbox_n -= 1
        if s.hold:
            s.hold = False
            self._taken.set()
        if m.qos and not s.manual_ack:
            try:
                if not s.ack(m):  # `out` is full: write it first
                    self._write()
                    s.ack(m)
                self._write()  # the stream keeps what the socket cannot take; the next flush drains it
            except LINK_ERRORS as e:
                self._lost(e)
        return m

    # ---------------------------------------------------------------- waiting for flows

    def _finish(self, pid, result):
        if self._waiting.pop(pid, None):
            self._results[pid] = result
            self._done.set()

    async def _result(self, pid):
        results = self._results
        try:
            while pid not in results:
                self._done.clear()  # (no await since the check: a completion cannot slip in between)
                await self._done.wait()
        finally:  # cancelled (wait_for...): nobody waits any more
            self._waiting.pop(pid, None)
        r = results.pop(pid)
        if isinstance(r, MQTTError):
            raise r
        return r

    # ---------------------------------------------------------------- tasks

    def flush(self):
        """Writes what is queued now: `await client.flush()`. Returns the stream's drain() itself (a bare yield
        when the socket took everything), not a coroutine of ours: publish_nowait() + flush() allocates nothing."""
        self._write()
        return self.stream.drain() if self.stream else _sleep_ms(0)

    def _write(self):
        s, st = self.session, self.stream
        while s.outlen and st:
            n = s.outlen
            s.outlen = 0
            st.write(s.out, n)
            s.pump()

    async def _flush(self):
        self._write()
        if self.stream:
            await self.stream.drain()

    async def _flush_safely(self):
        try:
            await self._flush()
        except LINK_ERRORS as e:
            self._lost(e)

    async def _reader(self):
        s, p = self.session, self.p
        while not self._closed:
            if not self.stream:
                if not self.reconnect:
                    return
                await _sleep_ms(self._backoff.next(self.backoff_min_ms, self.backoff_max_ms))
                try:
                    await self._open()
                except LINK_ERRORS as e:
                    self._lost(e)
                continue
            st = self.stream
            try:
                n = await st.readinto(s.inbuf, s.inlen)
                while s.received(n, p.ticks_ms()):  # stopped early: `out` is nearly full, or parked
                    n = 0
                    if s.outlen:
                        self._write()
                        await st.drain()
                    while s.parked and s.hold and self.stream is st:  # a message arrived; the inbox is full
                        self._taken.clear()
                        await self._taken.wait()
                if s.outlen:  # acks to send (_flush() inlined: a coroutine called costs an allocation)
                    self._write()
                    await st.drain()
            except LINK_ERRORS as e:
                if self.stream is st:  # else the ticker (keep-alive) or close() ended it: EBADF is no news
                    self._lost(e)

    async def _ticker(self):
        s, p = self.session, self.p
        while not self._closed:
            wait = 1000
            if self.stream:
                try:
                    wait = s.tick(p.ticks_ms())
                    if s.outlen:  # a PINGREQ, a retry
                        await self._flush()
                except LINK_ERRORS as e:
                    self._lost(e)
            await _sleep_ms(max(10, min(wait, 1000)))

    def _event(self, ev, value, reason):
        if ev == PUBLISH:  # the session reuses the message and its buffer once this returns: keep a copy
            box, n = self._inbox, self._inbox_n
            box[(self._inbox_head + n) % len(box)] = Message(value.topic, bytes(value.payload), value.qos,
                                                             value.retain, value.dup, value.pid, value.props)
            self._inbox_n = n + 1
            if n + 1 == len(box):
                self.session.hold = True  # received() stops before the next packet
            self._inbox_ev.set()
        elif ev == CONNACK:
            self._backoff = Backoff()
            self._connected.set()
            if self.on_connect:
                self.on_connect(value)
        elif ev == PUBACK or ev == PUBCOMP or ev == PUBREC:
            self._finish(value, MQTTError(reason, "server refused the message") if reason >= 0x80 else reason)
            self._room.set()
        elif ev == LOST:
            self._finish(value.pid, ConnectionLost(0x80, "the session was lost before the server acknowledged"))
            self._room.set()
        elif ev == SUBACK or ev == UNSUBACK:
            self._finish(value.pid, value)
        elif ev == AUTH and self.on_auth:
            answer = self.on_auth(value)
            if answer:
                self.session.auth(answer[0], answer[1])
        if self.on_event and ev != PUBLISH:
            self.on_event(ev, value, reason)

    async def __aenter__(self):
        await self.connect()
        return self

    async def __aexit__(self, *exc):
        await self.disconnect()
