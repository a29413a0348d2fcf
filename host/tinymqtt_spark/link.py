# One persistent MQTT session feeding a Spool, in a thread of its own: QoS 1/2 messages are received in
# tinymqtt's manual-ack mode, written to the spool, and acknowledged (PUBACK / PUBREC) as soon as the spool has
# them on disk; the spool keeps them until the consumer committed their offsets. The consumer (the Spark source,
# or a scale-out ingest process) calls expose(), commit() and stop(); everything that touches the client runs
# on the link's thread.
#
# The spool is the receiver's write-ahead log (as Spark Streaming's receiver WAL was): it lives with the
# consumer's own state (the Spark source puts it in the query's checkpoint), a message is acknowledged only
# once the spool segment holding it is fsynced, and segments are deleted only once the consumer committed
# them. A crash after the ack loses nothing: the restarted consumer replays its uncommitted offsets from the
# spool, not from the broker. Acknowledging at durability rather than at the consumer's commit means our side of
# every MQTT flow is answered within a group commit (ack_interval, 20 ms), whatever the consumer's batch cycle,
# so the ids the broker has in flight stay far from 65,535 (mosquitto 2.0.11 frees a QoS 2 message's slot at
# our PUBREC and queues the PUBREL behind what it sends meanwhile; when acks waited for Spark's commits, those
# flows grew with rate x two batch cycles until it reused ids still in flight: docs/spark.md, "Overload").
#
# Why this gives at-least-once, and exactly-once for QoS 2, across crashes: nothing is acknowledged before it
# is on disk in the spool, so whatever a crash interrupts before that is still in the broker's session (clean
# start off, session expiry) and comes back, DUP set, to the next process with this client id. Such a
# copy is recognised by its MQTT identity, never by its content: a packet id stays taken from the PUBLISH
# until our PUBACK (QoS 1) or PUBCOMP (QoS 2), so a DUP PUBLISH whose id is held by a spooled message we have
# not acknowledged is that message, and a QoS 2 one whose PUBREC went out but whose PUBREL we have not answered
# (AckState.rel) is a copy the spool has already. What we acknowledged is never consulted: the broker may
# reuse its packet id for a new message at once. AckState is written before any ack or PUBCOMP goes out, so a
# crash can only make us think an id is free when it is not for QoS 1 (a duplicate, allowed), never the
# reverse (a loss). Spool segments go once committed and acknowledged: nothing needs them any more.
#
# Bounded by construction: the link stops reading its socket (TCP back-pressure; the broker's queue,
# max_queued_messages, holds what is published meanwhile) when the spool holds max_spooled records the consumer
# has not committed (default 1,000,000), or when max_unacked QoS 1/2 messages are received and not yet on disk
# (default 20,000; with acks at durability a full window means a disk slower than the link). The Receive
# Maximum we send asks the broker for no more than the window plus one read. A write error while acknowledging
# is a lost link: the client reconnects into the session, and what the acks did not reach comes back as
# resends.
#
# One session, one holder: the spool directory and the client id are each locked (flock) for the life of a link,
# so a second query on a session already held is refused (SessionHeld) instead of taking it over; and a
# DISCONNECT "Session taken over" (0x8E) from the broker, someone elsewhere using our client id, stops the link
# with an error rather than a reconnect that would take it back (two holders would take turns for ever).
import collections
import fcntl
import hashlib
import json
import logging
import os
import tempfile
import threading
import time

from tinymqtt import props as P
from tinymqtt.client import Client
from tinymqtt.errors import ConnectionLost, MQTTError
from tinymqtt.packets import SUBACK, sub_options

from tinymqtt_spark.ackstate import AckState
from tinymqtt_spark.faults import crashpoint
from tinymqtt_spark.spool import Spool, records

PROP_NAMES = {
    P.PAYLOAD_FORMAT_INDICATOR: "payload_format_indicator",
    P.MESSAGE_EXPIRY_INTERVAL: "message_expiry_interval",
    P.CONTENT_TYPE: "content_type",
    P.RESPONSE_TOPIC: "response_topic",
    P.CORRELATION_DATA: "correlation_data",
    P.SUBSCRIPTION_IDENTIFIER: "subscription_identifier",
    P.TOPIC_ALIAS: "topic_alias",
}


def props_to_map(props):
    """MQTT 5 PUBLISH properties as a str -> str map (user properties under their own names)."""
    if not props:
        return None
    out = {}
    for k, v in props.items():
        if k == P.USER_PROPERTY:
            for name, value in v:
                out[name] = value if name not in out else out[name] + "," + value
        else:
            if isinstance(v, (bytes, bytearray, memoryview)):
                v = bytes(v).hex()
            elif isinstance(v, list):
                v = ",".join(str(x) for x in v)
            out[PROP_NAMES.get(k, "0x%02x" % k)] = str(v)
    return out


class _Ack:
    """What Session.ack() needs of a delivered message: its packet id (the payload is not kept alive)."""
    __slots__ = ("pid", "qos")

    def __init__(self, pid, qos):
        self.pid, self.qos = pid, qos


log = logging.getLogger("tinymqtt_spark")

SESSION_TAKEN_OVER = 0x8E  # DISCONNECT reason: another connection with our client id


class LinkError(RuntimeError):
    pass


class SessionHeld(LinkError):
    """A second holder for a session (spool directory or client id) that a running link holds."""


class DataLoss(LinkError):
    """The broker lost the session or downgraded the subscription (failOnDataLoss)."""


def receive_maximum_for(max_unacked):
    """The Receive Maximum the link sends: its window plus room for one socket read. The link stops reading at
    the window, but the read that reaches it may bring a buffer's worth more, and mosquitto 2.0.11 sends past
    the Receive Maximum once acks come back: tinymqtt's session refuses a server that exceeds it (0x93)."""
    return min(65535, max_unacked + max(1000, max_unacked // 2))


class _WindowPort:
    """The Linux port (tinymqtt_port) as the link's client uses it (Client's port_impl): the same, except that
    its connections read no more than the unacknowledged window has room for. One read otherwise takes what
    the receive buffer holds (maxPacketSize, 1 MB: tens of thousands of small messages at once)."""

    def __init__(self, link):
        import tinymqtt_port
        self._port, self._link = tinymqtt_port, link

    def __getattr__(self, name):  # ticks_ms, network_up, ...: the port's own
        return getattr(self._port, name)

    def open(self, host, port, tls=None):
        return _WindowTransport(self._port.open(host, port, tls), self._link)


class _WindowTransport:
    def __init__(self, t, link):
        self._t, self._link = t, link

    def __getattr__(self, name):
        return getattr(self._t, name)

    def readinto(self, buf, off, timeout_ms):
        room = self._link.read_room()
        if len(buf) - off > room:
            buf = memoryview(buf)[:off + room]
        n = self._t.readinto(buf, off, timeout_ms)
        self._link.rx_bytes += n
        return n


def _flock(path, timeout):
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    deadline = time.monotonic() + timeout
    while True:  # a previous holder may still be on its way out
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if time.monotonic() >= deadline:
                os.close(fd)
                return None
            time.sleep(0.1)


class SessionLock:
    """The spool directory and the client id (per broker, machine-wide) locked by one process: a link, or the
    session set-up at load(). acquire() raises SessionHeld naming the holder after `timeout` seconds."""

    def __init__(self, spool_dir, host, port, client_id):
        self.spool_dir, self.client_id = spool_dir, client_id
        key = hashlib.sha1(("%s:%s/%s" % (host, port, client_id)).encode()).hexdigest()[:20]
        d = os.path.join(tempfile.gettempdir(), "tinymqtt-spark-sessions-%d" % os.getuid())
        self.paths = [os.path.join(spool_dir, "lock"), os.path.join(d, key + ".lock")]
        self.fds = []

    def acquire(self, timeout):
        os.makedirs(self.spool_dir, exist_ok=True)
        os.makedirs(os.path.dirname(self.paths[1]), exist_ok=True)
        for path in self.paths:
            fd = _flock(path, timeout)
            if fd is None:
                self.release()
                raise SessionHeld(
                    "the MQTT session %r is held by a running query (process %s, spool %s): a second query on "
                    "one session is refused. Stop that query, or give this one its own checkpointLocation "
                    "(and no clientId option, so that its client id is derived from it)"
                    % (self.client_id, _read(path + ".pid") or "?", _read(path + ".spool") or self.spool_dir))
            self.fds.append(fd)
        for path in self.paths:
            _write(path + ".pid", str(os.getpid()))
            _write(path + ".spool", self.spool_dir)
        return self

    def release(self):
        for fd in self.fds:
            os.close(fd)
        self.fds = []


def _read(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def _write(path, text):
    tmp = "%s.%d.tmp" % (path, os.getpid())
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def open_session(host, port, client_id, topics, spool_dir, qos=2, session_expiry=3600, tls=None, username=None,
                 password=None, timeout=30.0, lock_timeout=10.0):
    """Creates the persistent session and its subscription on the broker now (the source calls it when the
    query's DataFrame is defined, at load()), so the broker keeps every QoS 1/2 message published from then on
    for the query, before its link is up. A spool that has a session already (a resumed query) is left alone:
    whether the broker still has it is the link's to find out (CONNACK session present). Refuses, with
    SessionHeld, a session a running link holds. Returns True when it created the session."""
    lock = SessionLock(spool_dir, host, port, client_id).acquire(lock_timeout)
    try:
        for name in ("live", "subscribed"):  # the previous link's: wait_live() must see this query's
            try:
                os.remove(os.path.join(spool_dir, name))
            except FileNotFoundError:
                pass
        if os.path.exists(os.path.join(spool_dir, "session")):
            return False
        # Receive Maximum 1 and no acks: whatever the broker sends now (a retained message, a backlog of a
        # session this id had) stays unacknowledged and comes back to the link, DUP set. PUBRELs are held, never
        # completed here: a PUBCOMP would free an id the link's ack state may still hold.
        c = Client(host, port, tls=tls, reconnect=False, client_id=client_id, version=5, clean=False,
                   session_expiry=session_expiry, receive_maximum=1, manual_ack=True, username=username,
                   password=password)
        c.on_message = lambda p: None
        c.session.hold_pubrel = lambda pid: True
        c.connect(timeout=timeout)
        try:
            codes = c.subscribe([(t, sub_options(qos, retain_handling=1)) for t in topics], timeout=timeout)
            if not codes or any(code >= 0x80 for code in codes):
                raise LinkError("the broker refused the subscription %r: reason codes %r" % (topics, codes))
        finally:
            c.disconnect()
        _write(os.path.join(spool_dir, "session"), "%s %s\n" % (client_id, time.time()))
        return True
    finally:
        lock.release()


class MqttLink:
    def __init__(self, host, port, client_id, topics, spool_dir, qos=2, session_expiry=3600,
                 receive_maximum=None, keepalive=30, max_packet_size=1 << 20, segment_records=5000, fsync=True,
                 username=None, password=None, lock_timeout=60.0, max_unacked=20000, tls=None,
                 fail_on_data_loss=False, committed_end=None, max_spooled=1000000, ack_interval=0.02):
        self.host, self.port, self.client_id = host, int(port), client_id
        self.topics, self.qos = list(topics), qos
        self.spool_dir = spool_dir
        if not 0 < max_unacked <= 60000:
            raise ValueError("max_unacked %r: between 1 and 60000 (a session has 65,535 packet ids)" % max_unacked)
        self.max_unacked = max_unacked
        if max_spooled < 1:
            raise ValueError("max_spooled %r: at least 1 (records spooled and not yet committed)" % max_spooled)
        self.max_spooled = max_spooled
        self.ack_interval = ack_interval  # seconds between group commits (fsync, then the acks they allow)
        self._synced_at = 0.0
        self.tls = tls
        self.fail_on_data_loss = fail_on_data_loss
        self.committed_end = committed_end  # fn() -> the consumer's own record of what it committed, or None
        self._polled = 0.0
        self.session_options = dict(client_id=client_id, version=5, keepalive=keepalive, clean=False,
                                    session_expiry=session_expiry,
                                    receive_maximum=min(receive_maximum or receive_maximum_for(max_unacked), 65535),
                                    max_packet_size=max_packet_size, manual_ack=True, username=username,
                                    password=password)
        self.segment_records, self.fsync = segment_records, fsync
        self.lock_timeout = lock_timeout
        self.lock = threading.Lock()
        self.spool = None
        self.state = None  # AckState
        self.client = None
        self.error = None  # what stopped the thread, re-raised to the consumer
        self.last_error = None  # the last connection problem (the link keeps retrying)
        self.subscribed = threading.Event()
        self.stats = collections.Counter({k: 0 for k in ("received", "acked", "redeliveries_matched", "connects",
                                                         "sessions_resumed", "heartbeats")})
        self._handles = {}  # offset -> _Ack: spooled, delivered on this connection's session, not acked yet
        self._inbox = []  # messages of the current socket read, not spooled yet (_on_message, _take)
        self._ack_now = []  # QoS 2 copies whose PUBREC went out before: PUBREC again at once
        self._unacked = {}  # pid -> offset of every spooled QoS 1/2 record whose ack has not been written
        self._rel_todo = {}  # PUBRELs received, answered (PUBCOMP) once AckState has forgotten their ids
        self._stop = threading.Event()
        self._thread = None
        self._lock = None  # SessionLock
        self._paused = False
        self._connected_at = 0.0
        self._quick_closes = 0  # closes by the server, in a row, right after a CONNACK
        self.rx_bytes = 0  # bytes read, and messages they held: what one message costs, to size reads
        self.rx_msgs = 0
        self._last_stats = 0.0
        self.first_message_at = self.last_message_at = 0.0
        self.live_at = 0.0  # when the first SUBACK came
        self.last_ack_at = 0.0  # acks free room in the broker's window: more may follow at once
        self._reused = 0  # packet ids the broker reused while still in flight, as seen so far
        self._bounce = False

    # ------------------------------------------------------------------ the consumer's side

    def start(self):
        self._lock = SessionLock(self.spool_dir, self.host, self.port, self.client_id).acquire(self.lock_timeout)
        with open(os.path.join(self.spool_dir, "link.pid"), "w") as f:
            f.write(str(os.getpid()))
        self._had_session = os.path.exists(os.path.join(self.spool_dir, "session"))
        self.spool = Spool(self.spool_dir, self.segment_records, self.fsync)
        st = self.state = AckState(self.spool_dir, self.fsync)
        for off, pid, q in self.spool.keys_from(st.acked):  # spooled by an earlier process, never acknowledged
            st.held[off] = (pid, q)
        self._unacked = {pid: off for off, (pid, q) in sorted(st.held.items())}
        self.stats["recovered"] = self.spool.recovered
        self.stats["held_at_start"] = len(st.held)
        self._thread = threading.Thread(target=self._run, name="mqtt-link", daemon=True)
        self._thread.start()
        return self

    def check(self):
        if isinstance(self.error, LinkError):  # ours (DataLoss, SessionHeld): its message says it all
            raise self.error
        if self.error is not None:
            raise LinkError("the MQTT link stopped: %r" % (self.error,)) from self.error

    def expose(self, floor=None):
        """Seals what was received; returns the end offset the consumer may read up to. `floor` is the
        consumer's own start offset: the spool never hands out an offset below it again."""
        self.check()
        with self.lock:
            sp = self.spool
            sp.seal()
            if floor is not None and floor > sp.next_offset:
                sp.skip(floor - sp.next_offset)
            end, busy = sp.next_offset, sp.next_offset > sp.committed
        if busy:
            crashpoint("spooled")
        return end

    def spooled_to(self):
        """The offset the next message will get: what expose() would return now (without sealing)."""
        with self.lock:
            return self.spool.next_offset

    def uncommitted_records(self, end):
        """True when offsets below `end` hold messages the consumer has not committed yet."""
        with self.lock:
            return self.spool.has_records(self.spool.committed, end)

    def heartbeat(self):
        """One offset without a record, so that the consumer plans a batch and commits the one before."""
        with self.lock:
            self.spool.skip(1)
            self.stats["heartbeats"] += 1
            return self.spool.next_offset

    def paths(self, lo, hi):
        with self.lock:
            return self.spool.paths(lo, hi)

    def records(self, lo, hi):
        """The spooled records in [lo, hi), decoded (tinymqtt_spark.spool.records): sealed ones only."""
        with self.lock:
            sources = self.spool.sources(lo, hi)
        return records(sources, lo, hi)

    def commit(self, end):
        """The consumer has durably processed every offset below `end`: their acks may go out now."""
        with self.lock:
            self.spool.commit(end)
        crashpoint("committed")

    def wait_acked(self, end, timeout=10.0):
        """Waits (at most timeout) until the acks for every offset below `end` are written, so a consumer whose
        process may end right after its commit (a run-once trigger) leaves nothing owed. False if not."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.error is None:
            with self.lock:
                if self.state.acked >= end and not any(off < end for off in self._handles):
                    return True
            time.sleep(0.005)
        return False

    def stop(self, timeout=10.0):
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
        if self.spool is not None:
            with self.lock:
                self.spool.close()
        if self.state is not None:
            self.state.close()
        self.write_stats()
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def snapshot(self):
        with self.lock:
            sp = self.spool
            s = dict(self.stats)
            s.update(pid=os.getpid(), next_offset=sp.next_offset, committed=sp.committed, durable=sp.durable,
                     uncommitted=sp.next_offset - sp.committed, max_spooled=self.max_spooled,
                     unacked=len(self._unacked), held=len(self.state.held), awaiting_pubrel=len(self.state.rel),
                     segments=len(sp.segments),
                     connected=bool(self.client and self.client.is_connected()),
                     subscribed=self.subscribed.is_set(), reading_paused=self._paused, max_unacked=self.max_unacked,
                     idle_s=self._quiet_s(), error=repr(self.error) if self.error else None,
                     last_error=str(self.last_error) if self.last_error else None, time=time.time())
        return s

    def uncommitted(self):
        """Offsets spooled and not yet committed by the consumer."""
        sp = self.spool
        return sp.next_offset - sp.committed

    def room(self):
        """How many more messages the link may read: the room left in the unacknowledged window and in the
        spool (0 or less: it stops reading)."""
        n = len(self._inbox)  # received, and about to count in both
        return min(self.max_unacked - len(self._unacked) - n, self.max_spooled - self.uncommitted() - n)

    def read_room(self):
        """How many bytes the next read may take: room() at the bytes per message seen so far."""
        per = self.rx_bytes // self.rx_msgs if self.rx_msgs > 100 else 64
        return max(4096, self.room() * max(per, 16))

    def _quiet_s(self):
        """Seconds since the last message, ack or SUBACK (None before the link was first live): a restarted link
        whose session holds nothing for it (everything acknowledged at the spool) is quiet from its SUBACK on."""
        last = max(self.last_message_at, self.last_ack_at, self.live_at)
        return round(time.time() - last, 3) if last else None

    def snapshot_quiet(self):
        """For a run-once trigger: is the link live (connected, subscribed), paused at its window, and how long
        since the last message or ack (an ack lets the broker send more)."""
        c = self.client
        live = bool(c and c.is_connected() and self.subscribed.is_set())
        return {"live": live, "paused": self._paused, "quiet_s": self._quiet_s() or 0.0}

    def write_stats(self):
        """link-stats.json in the spool directory: what the demo and the tests watch."""
        if self.spool is None:
            return
        tmp = os.path.join(self.spool_dir, "link-stats.tmp")
        with open(tmp, "w") as f:
            json.dump(self.snapshot(), f)
        os.replace(tmp, os.path.join(self.spool_dir, "link-stats.json"))

    # ------------------------------------------------------------------ the link's thread

    def _run(self):
        try:
            c = self.client = Client(self.host, self.port, tls=self.tls, batch=True, backoff_min_ms=200,
                                     backoff_max_ms=5000, port_impl=_WindowPort(self), **self.session_options)
            c.on_message = self._on_message
            c.on_connect = self._on_connect
            c.on_disconnect = self._on_disconnect
            c.on_event = self._on_event
            self._hold_pubrel(c.session)
            self._connect(c)
            try:  # retain handling 1: retained messages only for a new subscription, not for a resumed session
                c.subscribe([(t, sub_options(self.qos, retain_handling=1)) for t in self.topics], timeout=30)
            except MQTTError as e:  # no SUBACK in time (link lost?): the session subscribes again on reconnect
                self.last_error = e
            self._take()  # a resumed session's backlog comes before the SUBACK
            while not self._stop.is_set() and self.error is None:
                if self.room() > 0 or not c.is_connected():  # (offline: loop reconnects)
                    if self._paused:
                        self._paused = False
                        log.info("mqtt link %s: reading again (%d unacknowledged, %d uncommitted)", self.client_id,
                                 len(self._unacked), self.uncommitted())
                    c.loop(0.05)
                    self._take()
                else:  # window or spool full: leave the socket unread (TCP back-pressure) until room is made
                    if not self._paused:
                        self._paused = True
                        self.stats["paused"] += 1
                        log.info("mqtt link %s: %d messages not on disk yet (maxUnacked %d), %d spooled and not "
                                 "committed (maxSpooled %d): not reading until there is room", self.client_id,
                                 len(self._unacked), self.max_unacked, self.uncommitted(), self.max_spooled)
                    time.sleep(0.01)
                with self.lock:
                    self.spool.flush()  # QoS 0: handed to the OS each turn (a killed process loses none)
                self._poll_commit()
                now = time.monotonic()
                if now - self._synced_at >= self.ack_interval or self.room() <= 0:
                    # A group commit: one fsync of the spool and one of the ack state per ack_interval (20 ms)
                    # for everything that arrived meanwhile, not two per socket read.
                    self._synced_at = now
                    self._acks(c)
                self._unstick(c)
                if time.monotonic() - self._last_stats > 1.0:
                    self._last_stats = time.monotonic()
                    self.write_stats()
            if self.error is not None:
                raise self.error
            self._acks(c)
            self._settle(c)
            c.disconnect()  # a normal DISCONNECT: the session (and whatever is unacknowledged) stays on the broker
        except BaseException as e:  # surfaced to the consumer by check()
            self.error = e
            if self.client is not None and self.client.transport is not None:
                self.client.transport.close()

    def _connect(self, c):
        delay = 0.2
        while not self._stop.is_set():
            try:
                c.connect(timeout=10)
                return
            except (OSError, MQTTError) as e:
                self.last_error = e
                self.stats["connect_failures"] += 1
                time.sleep(delay)
                delay = min(delay * 2, 5.0)
        raise LinkError("stopped before the first connection")

    def _on_connect(self, connack):
        self._take()  # what the previous connection delivered, under its session's packet ids
        self.stats["connects"] += 1
        self._connected_at = time.monotonic()
        if connack.session_present:
            self.stats["sessions_resumed"] += 1
            self._had_session = True
            return
        with self.lock:  # the broker has no session: no packet id is held, nothing will be redelivered
            st = self.state
            if self._unacked or st.held or st.rel or self._had_session:
                self.stats["session_lost"] += 1
                why = ("the broker has no session for client id %r (expired, or the broker lost it): messages "
                       "published while the query was away are lost" % self.client_id)
                log.warning("mqtt link: %s", why)
                if self.fail_on_data_loss:
                    self.error = DataLoss(why + " (failOnDataLoss: set it to false to go on)")
                self._unacked.clear()
                self._handles.clear()
                self._ack_now = []
                self._rel_todo.clear()
                st.held, st.rel, st.acked = {}, set(), self.spool.next_offset
                st.save()

    def _on_disconnect(self, err):
        self._take()
        self.last_error = err
        self.stats["disconnects"] += 1
        # A takeover: MQTT 5 says DISCONNECT 0x8E; mosquitto 2.0.11 just closes the connection. So three closes
        # in a row, each within two seconds of our CONNACK, count as one too (two holders taking turns).
        quick = isinstance(err, ConnectionLost) and time.monotonic() - self._connected_at < 2.0
        self._quick_closes = self._quick_closes + 1 if quick else 0
        if getattr(err, "reason", None) == SESSION_TAKEN_OVER or self._quick_closes >= 3:
            if self.client is not None:
                self.client.reconnect = False  # taking it back would start a takeover ping-pong
            self.error = SessionHeld("another client connected with client id %r and took the session over "
                                     "(%s): two queries (or a query and another client) must never share a "
                                     "client id" % (self.client_id, err))

    def _on_event(self, ev, value, reason):
        if ev == SUBACK:
            if value.codes and all(code < 0x80 for code in value.codes):
                if min(value.codes) < self.qos:
                    self.stats["downgraded"] += 1
                    why = ("the broker granted QoS %d for %r, not the QoS %d asked for: messages above it lose "
                           "their guarantees" % (min(value.codes), self.topics, self.qos))
                    log.warning("mqtt link: %s", why)
                    if self.fail_on_data_loss:
                        self.error = DataLoss(why + " (failOnDataLoss)")
                        return
                if not self.subscribed.is_set():
                    self.live_at = time.time()
                    self.subscribed.set()
                    _write(os.path.join(self.spool_dir, "session"), "%s %s\n" % (self.client_id, time.time()))
                    _write(os.path.join(self.spool_dir, "live"), "%d %r\n" % (os.getpid(), time.time()))
            else:
                self.error = LinkError("the broker refused the subscription %r: reason codes %r"
                                       % (self.topics, value.codes))

    def _on_message(self, p):
        # Called by the client for each PUBLISH of a socket read, with its payload a view into the receive
        # buffer until this returns: kept as a tuple here, spooled by _take() once the read is handled, a whole
        # read's messages under one lock rather than one lock (and one wait behind the consumer) per message.
        now = time.time()
        if not self.first_message_at:
            self.first_message_at = now
        self._inbox.append((p.pid, p.qos, p.dup, p.retain, p.topic, bytes(p.payload), props_to_map(p.props), now))

    def _take(self):
        """Spools what _on_message kept, in arrival order; called on the link's thread after each client call
        that reads, and before a connection event changes what the packet ids mean."""
        inbox = self._inbox
        if not inbox:
            return
        self._inbox = []
        self.last_message_at = inbox[-1][7]
        self.rx_msgs += len(inbox)
        n = [0, 0, 0]  # received, by QoS
        matched = superseded = 0
        with self.lock:
            sp, st, unacked, handles = self.spool, self.state, self._unacked, self._handles
            for pid, q, dup, retain, topic, payload, props, now in inbox:
                crashpoint("received")
                if q and dup:  # a resend: of which message, the packet id says (DUP 0 is always a first send)
                    if q == 2 and pid in st.rel:  # our PUBREC did not arrive: the spool has delivered it already
                        matched += 1
                        self._ack_now.append(_Ack(pid, q))
                        continue
                    off = unacked.get(pid, -1)
                    if off >= 0 and off not in handles:  # spooled by an earlier process, never acknowledged
                        matched += 1
                        handles[off] = _Ack(pid, q)
                        continue
                old = unacked.pop(pid, -1) if q else -1
                if old >= 0:  # the broker sent a new message under an id we thought held (its session was lost?)
                    superseded += 1
                    st.held.pop(old, None)
                    handles.pop(old, None)
                off = sp.append(pid, q, bool(dup), bool(retain), topic, payload, props, now)
                n[q] += 1
                if q:
                    handles[off] = _Ack(pid, q)
                    unacked[pid] = off
            stats = self.stats
            if len(unacked) > stats["peak_unacked"]:
                stats["peak_unacked"] = len(unacked)
            for q in (0, 1, 2):
                if n[q]:
                    stats["received"] += n[q]
                    stats["received_qos%d" % q] += n[q]
            if matched:
                stats["redeliveries_matched"] += matched
            if superseded:
                stats["pid_superseded"] += superseded

    def _acks(self, c):
        """One group commit: acks for everything on disk in the spool, and PUBCOMPs for the PUBRELs that came
        meanwhile, with one save of AckState first (they count as written from then on): two fsyncs (the spool,
        the ack state) per ack_interval, not three."""
        if not c.is_connected():
            return  # an ack written now would be dropped with the buffer on reconnect
        with self.lock:
            st, sp = self.state, self.spool
            if self._handles or self._ack_now:
                sp.sync()  # the write-ahead: on disk before the acks below go out
            target = sp.durable
            todo, self._ack_now = self._ack_now, []
            done = [off for off in self._handles if off < target]
            if sp.segments and sp.segments[0].b <= min(st.acked, sp.committed):
                sp.drop_through(st.acked)  # committed by the consumer and acknowledged: no one needs them again
            if not todo and not done and target <= st.acked and not self._rel_todo:
                return
            # Released ids first: a PUBREL's id is still ours (no PUBCOMP yet), so no message acked below can
            # carry it; if the broker reused it anyway, the new flow's entry must be the one that stays.
            pids, self._rel_todo = list(self._rel_todo), {}
            st.rel.difference_update(pids)
            for off in done:
                h = self._handles.pop(off)
                todo.append(h)
                self._unacked.pop(h.pid, None)
                st.held.pop(off, None)
                if h.qos == 2:
                    st.rel.add(h.pid)
            if len(st.rel) > self.stats["peak_awaiting_pubrel"]:
                self.stats["peak_awaiting_pubrel"] = len(st.rel)
            st.acked = max(st.acked, target)  # what is still owed below it stays listed in `held`
            st.save()
            sp.drop_through(st.acked)  # released by what the session says, not by a timer
        crashpoint("acked")
        for h in todo:
            c.ack(h)  # into the buffer (flushed by loop); if the link drops now, the session resends on reconnect
        if self._flush(c) and pids:
            crashpoint("released")
            self._complete(c, pids)
        if todo:
            self.stats["acked"] += len(todo)
            self.last_ack_at = time.time()

    def _settle(self, c, timeout=5.0):
        # Before a normal stop: make sure the broker has read our acks. A close with unread bytes in our
        # receive buffer is a TCP reset, and the broker may drop what it had not read yet (the acks would then
        # be resent as duplicates to the next process). A PINGRESP answers a PINGREQ sent after the acks, so
        # the broker has handled them; the PUBRELs it sends meanwhile are answered too.
        s = c.session
        sent = False  # our own PINGREQ (one already unanswered, a keep-alive's, proves nothing about the acks)
        deadline = time.monotonic() + timeout
        while c.is_connected() and time.monotonic() < deadline:
            if not sent:
                sent = s.ping(c.p.ticks_ms())
                c.flush()
            elif not (s.pinging or self._rel_todo or self.state.rel):
                return
            c.loop(0.05)
            self._take()
            self._pubcomps(c)

    def _poll_commit(self):
        # A run-once trigger's last batch is never committed to the source (Spark plans no next batch, and
        # ends the source's process without a stop): the consumer's own log (Spark's checkpoint) says it is.
        if self.committed_end is None or time.monotonic() - self._polled < 0.1:
            return
        self._polled = time.monotonic()
        end = self.committed_end()
        if end is not None and end > self.spool.committed:
            self.commit(end)

    def _flush(self, c):
        """Writes the acks; a write error (the peer reset the link) ends the connection as a read error would,
        and the client reconnects into the session. Returns False then."""
        try:
            c.flush()
            return True
        except (OSError, MQTTError) as e:
            self.stats["write_errors"] += 1
            self.last_error = e
            c._close(e)  # the client's own end of a link: session kept, reconnect after the backoff
            return False

    def _hold_pubrel(self, session):
        # A PUBCOMP frees the packet id at the broker, which may reuse it at once: AckState must forget the id
        # first. So the link holds the PUBRELs of the flows it tracks and completes them in _pubcomps, after
        # saving; the session answers the others itself.
        def hold(pid):
            if pid in self.state.rel:
                self._rel_todo[pid] = None
                return True
            return False
        session.hold_pubrel = hold

    def _pubcomps(self, c):
        """PUBCOMPs for the PUBRELs held so far, AckState saved first (_acks does the same in its group commit)."""
        if not self._rel_todo or not c.is_connected():
            return
        with self.lock:
            pids, self._rel_todo = list(self._rel_todo), {}
            self.state.rel.difference_update(pids)
            self.state.save()
        crashpoint("released")
        self._complete(c, pids)

    def _complete(self, c, pids):
        s = c.session
        for pid in pids:
            if len(s.out) - s.outlen < 8 and not self._flush(c):
                return  # the link dropped: the broker sends the PUBRELs again, and AckState has let the ids go
            s.complete(pid)
        self._flush(c)
        self.stats["pubcomps"] += len(pids)

    def _unstick(self, c):
        # mosquitto 2.0 stops honouring Receive Maximum once acks come back (its whole queue goes in flight)
        # and past 65535 unacknowledged messages it reuses packet ids still in flight. The session takes such
        # a PUBLISH for a resend and drops it (counting it); the broker keeps it in flight until the next
        # connection. So once everything we hold is acknowledged, reconnect: it comes back as a resend.
        reused = getattr(c.session, "reused", 0)
        if reused > self._reused:
            self.stats["pid_reused"] += reused - self._reused
            self._reused = reused
            self._bounce = True
        if self._bounce and c.is_connected() and not self._handles and time.time() - self.last_ack_at > 0.5:
            self._bounce = False
            self.stats["reconnects_to_unstick"] += 1
            c.transport.close()  # the client notices on its next read and reconnects into the session
