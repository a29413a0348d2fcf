# The asyncio client, one code base for MicroPython's asyncio and CPython's: a thin driver over Session
# (every protocol decision is made there) and a port's async stream. A reader task waits on the stream
# (no polling), a ticker task keeps the link alive; both reconnect with backoff when the link is lost. On
# MicroPython a writer task sends the messages publish() left in `out`, a burst in one write.
# What it holds: the session's buffers and in-flight slots (fixed at construction), and for messages() at
# most Receive Maximum received messages, each acknowledged (QoS 1/2) only when the application takes it.
import asyncio
try:
    from ucollections import namedtuple  # the builtin, even where a build freezes a collections package over it
except ImportError:  # CPython
    from collections import namedtuple

from tinymqtt.driver import Driver, _LINK_ERRORS, ticks_diff, ConnectionLost, const
from tinymqtt.checks import check_publish
import tinymqtt.app_acks  # (its session acknowledges what messages() hands out: loaded with the client, not by it)


_sleep_ms = getattr(asyncio, "sleep_ms", None) or (lambda ms: asyncio.sleep(ms / 1000))  # (CPython has no sleep_ms)
# What MicroPython's sleep_ms() returns (one shared object, also a port's drain() when the socket took everything):
# awaiting it allocates nothing and cannot fail. (CPython: None)
_YIELD = getattr(asyncio, "SingletonGenerator", None)
# An awaitable that is already done: what publish() returns when it left the message in `out` for the writer
# task. An iterator with nothing left, which `await` ends at once inside the VM (a SingletonGenerator with no time
# set took two calls of Python methods and a raise). (CPython: None, publish() writes every message)
_DONE = _YIELD and iter(())
_CONNACK = const(2)  # the session's events for CONNACK and a received message (packet types: tinymqtt.wire's NAMES)
_PUBLISH = const(3)
# What _result() may wait for besides a packet id's flow (packet ids are 1-65535)
_UNTIL_FREE_SLOT = const(-1)  # a quarter of the in-flight slots free: publish() again (every slot was taken)
_UNTIL_CONNACK = const(-2)  # the CONNACK, or the end of the link (connect())


class _Changes:
    """MicroPython: an asyncio Event made for waiting often. `await changes.wait()` parks the task until the next
    set() and makes no object (Event.wait() makes a coroutine every wait); every waiter looks at its own condition
    before it waits, with no await in between, so no set() slips by (clear() has nothing to do). Any number of
    tasks may wait: `await` calls __iter__ and then steps at once, so the task stepping right after __iter__ is
    one starting its wait; a task stepping again was woken by set(). The parked tasks sit in a TaskQueue, as an
    Event's do, so cancelling one takes it out (its remove())."""

    def __init__(self):
        self.waiting = asyncio.core.TaskQueue()
        self.starting = None  # the task between __iter__ and its first step
        self.stop = StopIteration()  # (raised again at every wake)

    def wait(self):
        return self

    def clear(self):
        pass

    def set(self):
        q = self.waiting
        while q.peek():
            asyncio.core._task_queue.push(q.pop())

    def __iter__(self):
        self.starting = asyncio.current_task()
        return self

    def __next__(self):
        t = self.starting
        if t is not None:  # the first step parks the task until set()
            self.starting = None
            self.waiting.push(t)
            t.data = self.waiting
            return None
        self.stop.__traceback__ = None  # the second, once woken, ends the await
        raise self.stop


def _next(event):
    # What a waiter awaits once its condition is not met: the Event cleared, then its wait() (no coroutine of ours).
    # A waiter looks at its condition and calls this with no await between: no change slips in.
    event.clear()
    return event.wait()


class SocketWait:
    """MicroPython: `await` it and the task waits in asyncio's IO queue until the socket has bytes to read (or, made
    with writing=True, room to write), as MicroPython's Stream methods wait before they read or write; made once per
    connection: their coroutine was one object per wait. The ports' streams use them; one task at a time awaits
    each (asyncio keeps one waiting reader and one waiting writer per socket)."""

    def __init__(self, sock, writing=False):
        self.sock = sock
        self.writing = writing
        self.waited = False
        self.stop = StopIteration()

    def __iter__(self):
        self.waited = False  # (a wait cut short by a cancel starts again clean)
        return self

    def __next__(self):
        if not self.waited:
            self.waited = True
            q = asyncio.core._io_queue  # (it wakes the task: no rescheduling here)
            if self.writing:
                q.queue_write(self.sock)
            else:
                q.queue_read(self.sock)
            return None
        self.stop.__traceback__ = None
        raise self.stop


class SocketStream:
    """MicroPython: its asyncio stream used through the socket (.s) as its own Stream methods do, without their
    coroutine per call: awaiting a read or a drain makes no object. What the socket does not take is kept here,
    not in the Stream's out_buf: its drain() drops what another task writes meanwhile, and a second task's drain
    would take the first one's place in asyncio's IO queue (that one would never wake). The ports' open_stream()
    make it with failed(e): what a socket's error means on that port (the error to raise; None when the socket
    was only busy)."""

    _pending = b""  # what the socket has not taken yet: a copy, as the caller reuses its buffer
    _draining = None  # an Event while a task writes _pending out (one at a time)

    def __init__(self, writer, failed):
        self.w = writer
        self.failed = failed
        self._raw = writer.s
        self._wait = SocketWait(writer.s)  # awaited for every read: made once
        self._room = SocketWait(writer.s, writing=True)
        self._buf = self._mv = None

    def _check(self, e):
        # Raises what e means; returns when the socket was only busy. (ValueError: MicroPython's TLS handshake
        # runs in the first reads and writes)
        e = self.failed(e)
        if e:
            raise e

    def readable(self, buf, off):
        return self._wait

    def readinto(self, buf, off):
        """Bytes read into buf[off:] now, 0 when none (or no whole TLS record yet)."""
        if buf is not self._buf:
            self._buf, self._mv = buf, memoryview(buf)
        try:
            n = self._raw.readinto(self._mv[off:] if off else self._mv)  # no view made at offset 0
        except (OSError, ValueError) as e:
            self._check(e)
            return 0
        if n == 0:  # (None: nothing after all, or no whole TLS record yet)
            raise ConnectionLost(0x80, "the server closed the connection")
        return n or 0

    def write(self, buf, n):
        k = 0
        try:
            if not self._pending:  # (else behind it, in order)
                k = self._raw.write(buf, 0, n) or 0
        except (OSError, ValueError) as e:
            self._check(e)  # (some boards raise EAGAIN where others return None: the whole packet waits)
        if k < n:  # the socket is full: a copy of the rest, for drain()
            self._pending += memoryview(buf)[k:n]

    def drain(self):
        """An awaitable. When write() left nothing pending (the usual case), only the yield that MicroPython's own
        Stream.drain() makes then: without its coroutine and ours, two objects per publish, which kept
        MicroPython's allocator busy enough to cut asyncio QoS 0 eightfold."""
        return self._drain() if self._pending else _sleep_ms(0)

    async def _drain(self):
        while self._draining:  # another task is writing it out: wait for the end of its drain
            await self._draining.wait()
        ev = self._draining = asyncio.Event()
        try:
            while self._pending:  # (with what other tasks write meanwhile)
                await self._room
                k = 0
                try:
                    k = self._raw.write(self._pending) or 0
                except (OSError, ValueError) as e:
                    self._check(e)
                self._pending = self._pending[k:]
        finally:
            self._draining = None
            ev.set()

    def close(self):
        try:
            self.w.close()  # a no-op in MicroPython's asyncio (wait_closed() closes): close the socket too
            self._raw.close()
        except (OSError, RuntimeError):
            pass


# A message from messages(): its own copy (the session reuses its receive buffer), one tuple and the payload.
Message = namedtuple("Message", ["topic", "payload", "qos", "retain", "dup", "pid", "props"])


class AsyncClient(Driver):
    """async with AsyncClient("broker", client_id="dev1", version=5) as c:
           await c.subscribe("cmd/#", 1); await c.publish("t", b"x", qos=1)
           async for msg in c.messages(): ...
    Options and callbacks: see Driver (on_message is the blocking client's; here messages() has them)."""

    def __init__(self, *args, **options):  # (Driver's: host, port, tls... without batch, the blocking client's)
        # (a session with app_acks.py's ack(): manual_ack None acknowledges those no handler takes once taken)
        options["manual_ack"] = options.get("manual_ack") or None
        Driver.__init__(self, *args, **options)
        # Received messages no handler claimed, for messages(): a ring of Receive Maximum entries. QoS 1/2
        # messages are acknowledged when taken (manual_ack: by ack()), so a v5 server sends no more than
        # that many; a PUBLISH that still finds the ring full (QoS 0, or a 3.x server) parks the reader until
        # the application takes one (acks and everything behind it wait too: TCP pushes back to the server).
        # An application that awaits its own publishes without reading messages() needs a receive_maximum
        # as large as what may arrive meanwhile.
        self._inbox = [None] * self.session.receive_maximum
        self._inbox_head = self._inbox_n = 0
        # Three Events, one per kind of wait, each set only when what its waiters wait for may have come; a
        # woken waiter checks its own condition again (docs/size.md: why not an Event per flow). Every end of a
        # link or of the client sets all three. MicroPython: _Changes, whose waits make no object.
        # _changed: messages() for a message, connect() for CONNACK or an end of the link that stops it, the
        # reader parked behind a full inbox (set when messages() frees a place).
        E = _Changes if _DONE else asyncio.Event
        self._changed = E()
        # _ended: flows awaited by publish(), subscribe(), unsubscribe(), each looking for its own packet id in
        # _done; set when an awaited flow ends, not at every ack: a task awaiting its PUBACK behind a window of
        # others' messages sleeps through theirs.
        self._ended = E()
        # _room: publish() waiting for a free in-flight slot, set once a quarter of the window is free, not at
        # the first free slot: a publisher that took every slot would else send one message per PUBACK, a read,
        # a write and a task switch each (the sender's silly window syndrome); the other three quarters stay in
        # flight meanwhile. Not at every ack either: woken at each read of acks, it would find the window still
        # full and wait again, a task switch per read for nothing.
        self._room = E()
        f = self.session.flights
        self._room_at = f.size - (f.size + 3) // 4  # (flights in use at most, for _room)
        # Where the writer task waits for publish() to leave a message in `out` (MicroPython): it writes it, with
        # every message queued behind it, once the publishing task waits: a burst leaves in few large writes.
        self._queued = _DONE and _Changes()

    _closed = False
    _piecewise = True  # a streamed payload leaves a piece per _write() (Driver's)
    _tasks = ()  # the reader and the ticker, once connect() started them
    stream = property(lambda self: self.transport)  # the port's async stream, None while offline

    # ---------------------------------------------------------------- connection

    async def connect(self, timeout=10):
        """Opens the connection, waits for CONNACK (ConnectError when refused) and starts the tasks."""
        await self._open()
        if self.transport:  # (else e.g. TLS 1.3: a refused client certificate shows at the first write)
            self._tasks = (asyncio.create_task(self._reader()), asyncio.create_task(self._ticker()))
            if self._queued:
                self._tasks += (asyncio.create_task(self._writer()),)
            try:
                await asyncio.wait_for(self._result(_UNTIL_CONNACK, 0), timeout)
            except asyncio.TimeoutError:  # (an end of the link: on_disconnect hears it, as from the blocking client)
                self._close(ConnectionLost(0x88, "no CONNACK within %.1f s" % timeout))
            if self.is_connected():
                return self.session.session_present
            await self.close()  # (last_error stays)
        raise self.last_error

    async def _open(self):
        # A failure that ends the link closes it (last_error tells why); one of the caller's own raises.
        p = self.p
        try:
            p.network_up()
            self.session.connect(p.ticks_ms())  # first: a CONNECT we may not send opens no socket
            self.transport = await p.open_stream(self.host, self.port, self.tls)
            await self.flush()
        except _LINK_ERRORS as e:
            self._close(e)

    def _wake_all(self):
        # The link or the client ended: every waiter looks again (connect() at last_error, flows at _closed and
        # the link, a publisher waiting for a slot at reconnect)
        self._changed.set()
        self._ended.set()
        self._room.set()

    def _close(self, err):
        Driver._close(self, err)
        self._wake_all()

    async def disconnect(self, reason=0, props=None):
        """A clean DISCONNECT (the will is discarded unless reason is 0x04), then stops the tasks."""
        self.reconnect = False
        if self.transport and self.is_connected():
            self.session.disconnect(reason, props)
            await self.flush()
        await self.close()

    async def close(self):
        for t in self._tasks:
            t.cancel()
        self._tasks = ()
        self._end(None)

    def _end(self, err):
        # Stops the client: the link closes and every waiter wakes (awaited flows end with None). err: an error
        # in a task that is not the link's (those end a connection and are handled inside): a handler's own, or
        # MemoryError. The client stops with it as last_error (on_disconnect and connect() see it) rather than
        # leave waiters awaiting a task that is gone; the task raises it again, so asyncio still reports it.
        self.reconnect = False
        if self.transport:  # an end of the connection: on_disconnect hears it (None: our own disconnect/close)
            self._close(err)
        if err:
            self.last_error = err
        self._closed = True
        self.session.connection_lost()
        self.session.hold = False
        self._wake_all()  # (each awaited flow sees _closed and ends)

    # ---------------------------------------------------------------- requests

    def publish_nowait(self, topic, payload, qos=0, retain=False, props=None, length=None):
        """Queues the message; returns its packet id (0 for QoS 0) or -1 when every slot is taken.
        The reader/ticker tasks write it out; call `await flush()` to push it now. length=n: payload is a source
        of n bytes, sent piece by piece (docs/streaming.md)."""
        return self.session.publish(topic, payload, qos, retain, props, length)

    def publish(self, topic, payload, qos=0, retain=False, props=None, wait=True, length=None):
        """`await publish(...)`: for QoS 1/2 with wait=True, returns when the flow completes with its reason code
        (0, or 0x10 no matching subscribers), and raises NotDelivered when the server refused the message or it
        was lost with a session the server no longer has; else returns None once the message is queued
        (publish_nowait() gives its packet id). On MicroPython a message that leaves `out` less than half full
        returns at once and goes out when this task next waits (the writer task writes the burst in one go);
        else it is written now (`await flush()` or disconnect() also write it now: before a deep sleep).
        No coroutine of its own: QoS 0 allocates nothing, as it returns an awaitable already done (_DONE) or
        asyncio's bare yield; QoS 1/2 awaiting its flow, one coroutine (_result). Await it directly
        (asyncio.create_task() and wait_for() want a coroutine of yours around it). Raises ConnectionLost when no
        connection can carry it: after disconnect() or close(), and, awaiting a QoS 1/2 flow, before connect()
        (publish_nowait() or wait=False queues it for the connection).
        length=n: payload is a source of n bytes (a file opened on flash), read piece by piece into `out` as the
        stream sends them (docs/streaming.md); the await ends once the whole payload is written, at the earliest. A
        source that ends short ends the connection (the server was promised n bytes): ConnectionLost, raised here
        when it ended within the first piece, else in last_error."""
        if self._closed or (qos and wait and not self._tasks):  # (an invalid argument says so first)
            check_publish(self.session, topic, payload if length is None else b"", qos, retain, props)
            raise ConnectionLost(0x80, "not connected: %s" % ("the client was closed (disconnect() or close())"
                                                              if self._closed else "call connect() first"))
        s = self.session
        try:
            pid = s.publish(topic, payload, qos, retain, props, length)
        except ConnectionLost as e:  # a streamed payload's source ended short: the PUBLISH begun in `out` cannot
            self._close(e)  # be finished, so the connection ends (stream.py)
            raise
        if pid < 0:  # every in-flight slot is taken
            return self._result(_UNTIL_FREE_SLOT, (topic, payload, qos, retain, props, wait, length))
        if qos and wait:
            return self.flush(pid)
        if length is not None:  # (written now, piece by piece: not left to the writer task)
            return self.flush()
        if _DONE and self._tasks and s.outlen * 2 < s.out_size:  # room for more: the writer task sends it
            if self._queued.waiting.peek():  # it waits: wake it (else it is due to run, and writes this too)
                self._queued.set()
            return _DONE
        return self.flush()

    async def subscribe(self, topic, qos=0, handler=None, props=None, chunks=False):
        """topic: a filter or a list of (filter, options). Returns the SUBACK reason codes (None offline).
        chunks=True: handler(message, total, offset, chunk), each message in pieces (docs/streaming.md)."""
        return await self.flush(self.session.subscribe([(topic, qos)] if isinstance(topic, str) else topic, props,
                                                       handler, chunks))

    async def unsubscribe(self, topic, props=None):
        return await self.flush(self.session.unsubscribe([topic] if isinstance(topic, str) else topic, props))

    def flush(self, pid=0):
        """Writes what is queued now: `await client.flush()`. A link error closes the link (the reader task
        reconnects; the session keeps every QoS 1/2 message) rather than reaching the caller. Returns the stream's
        drain() itself when that is MicroPython's bare yield (the socket took everything), not a coroutine of
        ours: publish_nowait() + flush() allocates nothing."""
        # (pid: a flow to await after the drain, for publish(), subscribe()...: the awaitable returns its result)
        if pid:
            self._done[pid] = ...  # (waiting: see Driver.__init__)
        try:
            self._write()
            t = self.transport
            d = t.drain() if t else _sleep_ms(0)
            if self.session.streaming():  # a streamed payload's next piece waits in `out`: write them all
                d = self._pieces(d)
        except _LINK_ERRORS as e:
            self._close(e)
            d = _sleep_ms(0)
        return d if not pid and type(d) is _YIELD else self._result(pid, d)

    async def _pieces(self, drain):
        # The rest of a streamed payload once drain (the last piece's) is done: a piece written, then drained.
        # (A link error reaches _result(), which closes the link.)
        await drain
        while self.session.streaming() and self.transport:
            self._write()
            await self.transport.drain()

    async def ack(self, message):
        """Manual-ack mode: acknowledge a message once it is safely handled."""
        while not self.session.ack(message):  # `out` is full: write it first
            await self.flush()
        await self.flush()

    def __aiter__(self):
        return self

    # `async for msg in client.messages()`: the messages no subscribe(handler=...) claimed, oldest first; at most
    # Receive Maximum are held (see __init__). Each msg is a Message the application may keep. The client is its
    # own iterator: MicroPython has no async generators.
    messages = __aiter__

    async def __anext__(self):
        while not self._inbox_n:
            if self._closed:
                raise StopAsyncIteration
            await _next(self._changed)
        # The oldest message leaves the inbox; QoS 1/2 is acknowledged now (unless manual_ack), at once.
        box = self._inbox
        i = self._inbox_head
        s = self.session
        m = box[i]
        box[i] = None
        self._inbox_head = (i + 1) % len(box)
        self._inbox_n -= 1
        if s.hold:
            s.hold = False
            self._changed.set()
        if m.qos and not s.manual_ack:
            while not s.ack(m):  # `out` is full: write it first
                await self.flush()
            await self.flush()  # (written at once; the drain is MicroPython's bare yield, mostly)
        return m

    async def _result(self, pid, arg):
        # The coroutine behind every awaited request. pid > 0: awaits arg (flush()'s drain), then returns how the
        # flow of pid ended: a reason code, SUBACK/UNSUBACK's codes, or None (the client closed, also before the
        # flow began, or its slot went with the link without an ack: a SUBSCRIBE the new connection makes again);
        # raises NotDelivered for a refused or lost message. pid 0: only the drain (_done never holds 0).
        # _UNTIL_FREE_SLOT: every in-flight slot was taken; arg: publish()'s arguments, published again after a
        # change. _UNTIL_CONNACK: connect()'s wait, until CONNACK or the end of the link (connect() raises its
        # error, as the blocking client's does, also with reconnect: the reader task has not reconnected yet).
        while pid < 0:
            if pid == _UNTIL_CONNACK and (self.is_connected() or not self.transport):
                return
            if not (self.transport or self.reconnect):  # no slot frees without a link: the message is not queued
                raise ConnectionLost(0x80, "not connected (reconnect=False): %s" % (self.last_error or "closed"))
            if pid == _UNTIL_CONNACK:
                await _next(self._changed)
            else:
                await _next(self._room)
                if self.session.flights.count <= self._room_at:  # (else the link ended: look again above)
                    return await self.publish(*arg)
        try:
            await arg
            # (a link gone with reconnect off ends the wait too: no outcome can come, the session keeps the flow)
            while self._done.get(pid) is ... and not self._closed and self.session.flights.find(pid) >= 0 \
                    and (self.transport or self.reconnect):
                await _next(self._ended)  # (no await since the check: a completion cannot slip in between)
        except _LINK_ERRORS as e:  # the drain: the link closes, the session resends the flow on the next one, and
            self._close(e)  # it is awaited on
            if pid:
                return await self._result(pid, _sleep_ms(0))
        finally:  # (cancelled by wait_for...: nobody waits any more)
            arg = self._outcome(pid)
        return None if arg is ... else getattr(arg, "codes", arg)

    # ---------------------------------------------------------------- tasks

    # The two tasks: each runs until the client stops; an error that is not the link's stops the client (_end).

    async def _reader(self):
        s = self.session
        p = self.p
        while not self._closed:
            st = self.transport
            try:
                if not st:
                    if not self.reconnect:
                        return
                    await _sleep_ms(ticks_diff(self._next_try, p.ticks_ms()))  # (<= 0: at once)
                    await self._open()
                    continue
                # What came already is read before any wait: on MicroPython each wait in asyncio's IO queue registers
                # the socket with its poller and unregisters it at the wake (asyncio makes objects for both), which
                # a read skips whenever the server's packets came while the other tasks ran (the yield below).
                n = st.readinto(s.inbuf, s.inlen)
                if not n:
                    await st.readable(s.inbuf, s.inlen)  # (MicroPython: the stream's SocketWait, no object of ours)
                    continue
                while True:
                    more = s.received(n, p.ticks_ms())  # True: stopped early, `out` is nearly full or parked
                    n = 0
                    if s.outlen:  # acks to send (not flush(): a link error is this task's to handle, below)
                        self._write()
                        await st.drain()  # (a yield too, as below)
                    elif not more:  # the other tasks run before the next read (a publisher's burst: its acks come)
                        await _sleep_ms(0)
                    if not more:
                        break
                    while s.parked and s.hold and self.transport is st:  # a message arrived; the inbox is full
                        await _next(self._changed)
            except _LINK_ERRORS as e:
                if self.transport is st:  # else the ticker (keep-alive) or close() ended it: EBADF is no news
                    self._close(e)
            except Exception as e:
                self._end(e)
                raise

    async def _ticker(self):
        s = self.session
        while not self._closed:
            wait = 1000
            if self.transport:
                try:
                    wait = s.tick(self.p.ticks_ms())
                    if s.outlen:  # a PINGREQ, a retry
                        await self.flush()
                except _LINK_ERRORS as e:
                    self._close(e)
                except Exception as e:
                    self._end(e)
                    raise
            await _sleep_ms(max(10, min(wait, 1000)))

    async def _writer(self):
        # Writes what publish() left in `out`, at the event loop's next turn (on MicroPython only: see _DONE).
        s = self.session
        while not self._closed:
            if s.outlen and self.transport:
                await self.flush()  # (a link error closes the link: the reader task reconnects)
            else:
                await self._queued.wait()  # (no await since the check: a message queued meanwhile wakes it)

    def _event(self, ev, value, reason):
        # Every ack passes here: the dispatch only (a received message's copy is _keep()'s)
        if ev == _PUBLISH:
            self._keep(value)
            return
        if Driver._event(self, ev, value, reason):  # a flow someone awaits ended
            self._ended.set()
        if ev == _CONNACK:  # a new connection: connect() returns; a SUBSCRIBE or UNSUBSCRIBE awaited is asked
            self._wake_all()  # again under a new packet id; a new session's flights may have freed every slot
        elif self.session.flights.count <= self._room_at:  # (an ack, a flow lost: a slot may be free)
            self._room.set()

    def _keep(self, message):
        # A received message into the inbox for messages(): a copy, as the session reuses the message and its buffer
        # once _event() returns
        box = self._inbox
        n = self._inbox_n
        m = box[(self._inbox_head + n) % len(box)] = Message(message.topic, bytes(message.payload), message.qos,
                                                             message.retain, message.dup, message.pid, message.props)
        if m.qos:  # held by app_acks.py: only this copy acknowledges it (not one from a lost session)
            self.session._held[m.pid] = m
        self._inbox_n = n + 1
        if n + 1 == len(box):
            self.session.hold = True  # received() stops before the next packet
        self._changed.set()

    async def __aenter__(self):
        await self.connect()
        return self

    def __aexit__(self, *exc):
        return self.disconnect()  # (the coroutine `async with` awaits: no coroutine of its own around it)
