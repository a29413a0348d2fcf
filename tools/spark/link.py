# One persistent MQTT session feeding a Spool, in a thread of its own: QoS 1/2 messages are received in
# tinymqtt's manual-ack mode, written to the spool, and acknowledged (PUBACK / PUBREC) only after the consumer
# committed their offsets. The consumer (the Spark source, or a scale-out ingest process) calls expose(),
# commit() and stop(); everything that touches the client runs on the link's thread.
#
# Why this gives at-least-once, and exactly-once for QoS 2, across crashes: nothing is acknowledged before it
# is both on disk and committed downstream, so whatever a crash interrupts is still in the broker's session
# (clean start off, session expiry) and comes back, DUP set, to the next process with this client id. Such a
# copy is recognised by its MQTT identity, never by its content: a packet id stays taken from the PUBLISH
# until our PUBACK (QoS 1) or PUBCOMP (QoS 2), so a DUP PUBLISH whose id is held by a spooled message we have
# not acknowledged is that message, and a QoS 2 one whose PUBREC went out but whose PUBREL we have not answered
# (AckState.rel) is a copy the spool has delivered already. What we acknowledged is never consulted: the
# broker may reuse its packet id for a new message at once. AckState is written before any ack or PUBCOMP goes
# out, so a crash can only make us think an id is free when it is not for QoS 1 (a duplicate, allowed), never
# the reverse (a loss). Spool segments go once committed and acknowledged: nothing needs them any more.
import collections
import fcntl
import json
import os
import threading
import time

from tinymqtt import props as P
from tinymqtt.client import Client
from tinymqtt.errors import MQTTError
from tinymqtt.packets import SUBACK, sub_options

from tools.spark.ackstate import AckState
from tools.spark.faults import crashpoint
from tools.spark.spool import Spool, records

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


class LinkError(RuntimeError):
    pass


class MqttLink:
    def __init__(self, host, port, client_id, topics, spool_dir, qos=2, session_expiry=3600,
                 receive_maximum=65000, keepalive=30, max_packet_size=1 << 20, segment_records=5000, fsync=True,
                 username=None, password=None, lock_timeout=60.0):
        self.host, self.port, self.client_id = host, int(port), client_id
        self.topics, self.qos = list(topics), qos
        self.spool_dir = spool_dir
        self.session_options = dict(client_id=client_id, version=5, keepalive=keepalive, clean=False,
                                    session_expiry=session_expiry, receive_maximum=receive_maximum,
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
        self._ack_now = []  # QoS 2 copies whose PUBREC went out before: PUBREC again at once
        self._unacked = {}  # pid -> offset of every spooled QoS 1/2 record whose ack has not been written
        self._rel_todo = {}  # PUBRELs received, answered (PUBCOMP) once AckState has forgotten their ids
        self._stop = threading.Event()
        self._thread = None
        self._lock_fd = None
        self._last_stats = 0.0
        self.last_message_at = 0.0
        self.last_ack_at = 0.0  # acks free room in the broker's window: more may follow at once
        self._reused = 0  # packet ids the broker reused while still in flight, as seen so far
        self._bounce = False

    # ------------------------------------------------------------------ the consumer's side

    def start(self):
        os.makedirs(self.spool_dir, exist_ok=True)
        self._lock_fd = os.open(os.path.join(self.spool_dir, "lock"), os.O_RDWR | os.O_CREAT, 0o644)
        deadline = time.monotonic() + self.lock_timeout
        while True:  # a previous reader process may still be on its way out
            try:
                fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise LinkError("spool %s is locked by another process" % self.spool_dir)
                time.sleep(0.1)
        with open(os.path.join(self.spool_dir, "link.pid"), "w") as f:
            f.write(str(os.getpid()))
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
        """The spooled records in [lo, hi), decoded (tools.spark.spool.records): sealed ones only."""
        with self.lock:
            sources = self.spool.sources(lo, hi)
        return records(sources, lo, hi)

    def commit(self, end):
        """The consumer has durably processed every offset below `end`: their acks may go out now."""
        with self.lock:
            self.spool.commit(end)
        crashpoint("committed")

    def stop(self, timeout=10.0):
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
        if self.spool is not None:
            with self.lock:
                self.spool.close()
        self.write_stats()
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def snapshot(self):
        with self.lock:
            sp = self.spool
            s = dict(self.stats)
            s.update(pid=os.getpid(), next_offset=sp.next_offset, committed=sp.committed,
                     unacked=len(self._unacked), held=len(self.state.held), awaiting_pubrel=len(self.state.rel),
                     segments=len(sp.segments),
                     connected=bool(self.client and self.client.is_connected()),
                     subscribed=self.subscribed.is_set(),
                     idle_s=round(time.time() - max(self.last_message_at, self.last_ack_at), 3)
                     if self.last_message_at else None, error=repr(self.error) if self.error else None,
                     last_error=str(self.last_error) if self.last_error else None, time=time.time())
        return s

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
            c = self.client = Client(self.host, self.port, batch=True, backoff_min_ms=200, backoff_max_ms=5000,
                                     **self.session_options)
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
            while not self._stop.is_set():
                c.loop(0.05)
                with self.lock:
                    self.spool.flush()
                self._acks(c)
                self._pubcomps(c)
                self._unstick(c)
                if time.monotonic() - self._last_stats > 1.0:
                    self._last_stats = time.monotonic()
                    self.write_stats()
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
        self.stats["connects"] += 1
        if connack.session_present:
            self.stats["sessions_resumed"] += 1
            return
        with self.lock:  # the broker has no session: no packet id is held, nothing will be redelivered
            st = self.state
            if self._unacked or st.held or st.rel:
                self.stats["session_lost"] += 1
                self._unacked.clear()
                self._handles.clear()
                self._ack_now = []
                self._rel_todo.clear()
                st.held, st.rel, st.acked = {}, set(), self.spool.next_offset
                st.save()

    def _on_disconnect(self, err):
        self.last_error = err
        self.stats["disconnects"] += 1

    def _on_event(self, ev, value, reason):
        if ev == SUBACK:
            if value.codes and all(code < 0x80 for code in value.codes):
                if not self.subscribed.is_set():
                    self.subscribed.set()
                    with open(os.path.join(self.spool_dir, "subscribed"), "w") as f:
                        f.write(str(time.time()))
            else:
                self.error = LinkError("the broker refused the subscription %r: reason codes %r"
                                       % (self.topics, value.codes))

    def _on_message(self, p):
        now = time.time()
        payload = bytes(p.payload)  # a view into the receive buffer until this returns
        topic, q, pid = p.topic, p.qos, p.pid
        self.last_message_at = now
        crashpoint("received")
        with self.lock:
            sp, st = self.spool, self.state
            if q and p.dup:  # a resend: of which message, the packet id says (DUP 0 is always a first send)
                if q == 2 and pid in st.rel:  # our PUBREC did not arrive: the spool has delivered it already
                    self.stats["redeliveries_matched"] += 1
                    self._ack_now.append(_Ack(pid, q))
                    return
                off = self._unacked.get(pid, -1)
                if off >= 0 and off not in self._handles:  # spooled by an earlier process, never acknowledged
                    self.stats["redeliveries_matched"] += 1
                    self._handles[off] = _Ack(pid, q)
                    return
            old = self._unacked.pop(pid, -1) if q else -1
            if old >= 0:  # the broker sent a new message under an id we thought held (its session was lost?)
                self.stats["pid_superseded"] += 1
                self.state.held.pop(old, None)
                self._handles.pop(old, None)
            off = sp.append(pid, q, bool(p.dup), bool(p.retain), topic, payload, props_to_map(p.props), now)
            self.stats["received"] += 1
            self.stats["received_qos%d" % q] += 1
            if q:
                self._handles[off] = _Ack(pid, q)
                self._unacked[pid] = off

    def _acks(self, c):
        """Acks for everything committed: AckState saved first (they count as written from then on)."""
        if not c.is_connected():
            return  # an ack written now would be dropped with the buffer on reconnect
        with self.lock:
            st, sp = self.state, self.spool
            target = sp.committed
            todo, self._ack_now = self._ack_now, []
            done = [off for off in self._handles if off < target]
            if not todo and not done and target <= st.acked:
                return
            for off in done:
                h = self._handles.pop(off)
                todo.append(h)
                self._unacked.pop(h.pid, None)
                st.held.pop(off, None)
                if h.qos == 2:
                    st.rel.add(h.pid)
            st.acked = max(st.acked, target)  # what is still owed below it stays listed in `held`
            st.save()
            sp.drop_through(st.acked)  # released by what the session says, not by a timer
        crashpoint("acked")
        for h in todo:
            c.ack(h)  # into the buffer (flushed by loop); if the link drops now, the session resends on reconnect
        c.flush()
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
            self._pubcomps(c)

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
        if not self._rel_todo or not c.is_connected():
            return
        with self.lock:
            pids, self._rel_todo = list(self._rel_todo), {}
            self.state.rel.difference_update(pids)
            self.state.save()
        crashpoint("released")
        s = c.session
        for pid in pids:
            if len(s.out) - s.outlen < 8:
                c.flush()
            s.complete(pid)
        c.flush()
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
