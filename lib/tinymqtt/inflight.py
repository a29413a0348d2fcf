# Outbound messages of the session, from publish() until their QoS flow completes: preallocated slots, so
# a steady stream of publishes allocates nothing. A packet id maps to slot pid % size, which makes ack
# lookup O(1); a message keeps its full topic (never an alias) and a reference to the caller's payload.
# Every state transition of an outbound flow is here (pump() only sends what a slot's state says to send).
from tinymqtt.packets import Packet, const  # (const: micropython's, or int on CPython)

# The states of a slot, and what moves it (MQTT 4.3; a retry resends with DUP set, a PUBREL as it was):
#
#   publish() -> QUEUED --pump(): PUBLISH--> SENT --PUBACK (QoS 1)---------------------------------> FREE
#                  | QoS 0: FREE once sent      | --PUBREC (QoS 2)--> RELEASED (PUBREL sent) --PUBCOMP--> FREE
#                                               | --PUBREC >= 0x80 (refused)-----------------------------> FREE
#   retry (a new connection keeping the session; the 3.x timer, retry.py): SENT -> RESEND --pump(): PUBLISH, DUP--> SENT
#                                                                (an ack in RESEND acts as in SENT: a late one)
#                                                                RELEASED -> RELQ --pump(): PUBREL--> RELEASED
#   a new connection without the session: SENT, RESEND -> FREE and event LOST (republish_lost: QUEUED, a first
#   delivery again); RELEASED, RELQ -> FREE and event PUBCOMP (the server took the message over before).
#   CONTROL, a packet id lent to a SUBSCRIBE/UNSUBSCRIBE (the slot keeps the request: topic its filters, retain
#   its packet type, props its properties): FREE on its SUBACK/UNSUBACK or on a new connection.
# SENT, RELEASED and RELQ are on the wire: what the server's Receive Maximum counts (unacked).
# A set of states is tested as a bit mask of their numbers (0x18 >> st & 1: SENT or RELEASED): one operation.
# (const() names: a board keeps none of them as a global; CPython's tests and tools import them as they are)
_FREE = const(0)
_QUEUED = const(1)
_RESEND = const(2)
_SENT = const(3)
_RELEASED = const(4)
_RELQ = const(5)
_CONTROL = const(6)
LOST = const(16)  # event: a message the server never acknowledged, dropped with a session that is gone
_RETRY = const(1)  # const(0) in a board build without tinymqtt/retry.py, the 3.x timer (tools/deploy/features.py)
# const(0) in a board build without MQTT 5's props.py (tools/deploy/features.py): only MQTT 5's window, the server's
# Receive Maximum, reads unacked, and only MQTT 5 packets carry a message's or a request's props
_MQTT5 = const(1)


def ticks_diff(a, b):
    """a - b for millisecond clocks that wrap at 2**30 (MicroPython's ticks_ms on 32-bit boards; the ports give
    CPython the same). Every constant is below 2**30, a small int on 32-bit builds (31-bit small ints), so
    this allocates nothing there; any clock whose period is a multiple of 2**30 (64-bit builds) works too."""
    half = 0x20000000  # half the period (a local: a constant this large takes 5 bytes of code at each use)
    d = (a - b) & 0x3FFFFFFF
    if d & half:  # past half the period: a - b was negative
        d -= half
        d -= half
    return d


class Inflight:
    def __init__(self, size, retry_ms):  # the 3.x retry timer (retry.py) may run: a slot keeps when it was sent
        self.size = size
        self.state = bytearray(size)
        self.qos = bytearray(size)  # 0-2; 3 for CONTROL
        self.retain = bytearray(size)
        self.pid = [0] * size
        self.seq = [0] * size  # publish order: queued messages go out, and resends happen, in this order
        if _RETRY:
            self.sent_at = retry_ms and [0] * size
        self.topic = [None] * size
        self.payload = [None] * size
        self.count = 0  # slots in use
        if _MQTT5:
            self.props = [None] * size  # (3.x has none)
            self.unacked = 0  # QoS>0 messages on the wire (SENT, RELEASED, RELQ): what Receive Maximum limits
        self._next_pid = 0
        self._seq = 0
        # The send queue: QUEUED, RESEND and RELQ slots, oldest first, each at most once, queued entries from ring[head]
        # on. Session.pump() takes them in order; an entry whose slot has left those states meanwhile is stale and
        # dropped there, so the head stays first until pump() sends it.
        self.ring = [0] * size
        self.head = self.queued = 0

    def add(self, topic, payload, qos, retain, props):
        """Stores a message as QUEUED (qos 3: lends its packet id to a SUBSCRIBE/UNSUBSCRIBE, CONTROL); returns its
        slot, or -1 when every slot is taken."""
        size = self.size
        if self.count == size:
            return -1
        pid = self._next_pid
        # The next packet id whose slot is free (a QoS 0 message takes a slot too): count < size, so one is.
        while True:
            pid = pid % 65535 + 1
            if not self.state[pid % size]:
                break
        self._next_pid = pid
        i = pid % size
        self.state[i] = _CONTROL if qos > 2 else _QUEUED  # one store a line: a tuple assignment costs MicroPython more
        self.qos[i] = qos
        self.retain[i] = retain
        self.pid[i] = pid if qos else 0
        self.topic[i] = topic
        self.payload[i] = payload
        if _MQTT5:
            self.props[i] = props
        self._seq += 1
        self.seq[i] = self._seq
        self.count += 1
        if qos < 3:
            self.ring[(self.head + self.queued) % size] = i
            self.queued += 1
        return i

    def _requeue(self):
        """Rebuilds the queue after a resend: PUBREL resends first (they never wait for the window, so they must
        not sit behind a PUBLISH that does), then PUBLISHes in publish order. Returns the slots in use, oldest
        first (only after a resend or on reconnect, where allocating a list is fine)."""
        order = []
        for i in range(self.size):
            if self.state[i]:
                order.append(i)
        seq = self.seq  # (the key closes over seq, not self: self stays a plain local here)
        order.sort(key=lambda i: seq[i])
        n = 0
        for bits in (0x20, 0x6):  # RELQ, then QUEUED and RESEND
            for i in order:
                if bits >> self.state[i] & 1:
                    self.ring[n] = i
                    n += 1
        self.head = 0
        self.queued = n
        return order

    def find(self, pid):
        i = pid % self.size
        return i if self.state[i] and self.pid[i] == pid else -1

    def mark(self, i, state, now):
        # The one place a slot changes state; FREE drops the message. unacked counts SENT, RELEASED, RELQ.
        if _MQTT5:
            self.unacked += (0x38 >> state & 1) - (0x38 >> self.state[i] & 1)  # (bits 3-5: SENT, RELEASED, RELQ)
        self.state[i] = state
        if _RETRY and self.sent_at:
            self.sent_at[i] = now
        if not state:
            self.topic[i] = self.payload[i] = None
            if _MQTT5:
                self.props[i] = None
            self.count -= 1

    # ------------------------------------------------------------ the events (see the diagram above)

    def ack(self, t, pid, reason, now):
        """PUBACK (4), PUBREC (5) or PUBCOMP (7) for pid. Returns -1 when pid is not a message in flight (the
        session counts it), 0 when its flow expects no such ack (a protocol error), 6 when the flow goes on with
        a PUBREL, else t: the flow ended and its slot is free (a PUBREC with a reason code >= 0x80 ends it)."""
        i = self.find(pid)
        st = self.state[i] if i >= 0 else _CONTROL
        if st == _CONTROL:
            return -1
        # PUBACK: QoS 1; PUBREC: QoS 2, sent (again: PUBREL again); PUBCOMP: QoS 2, PUBREL sent. RESEND counts
        # as SENT: the ack of the first send may come after the 3.x timer queued the resend.
        if self.qos[i] != (1 if t == 4 else 2) or st < (_RELEASED if t == 7 else _RESEND):
            return 0
        r = t
        if t == 5 and reason < 0x80:
            self.mark(i, _RELEASED, now)
            r = 6
        else:
            self.mark(i, _FREE, 0)
        if st == _RESEND:  # its queue entry is stale now (rare: allocating there is fine)
            self._requeue()
        return r

    def _renew(self, session_present, republish_lost, on_event):
        """A new connection, with the session the server kept (session_present) or without. Tells
        on_event(ev, value, 0) of each flow that ended with the old session; returns the SUBSCRIBE and
        UNSUBSCRIBE requests left unanswered, as (type, filters, props) (their slots are free now: the session
        asks again)."""
        ids = []
        for i in self._requeue():  # (the queue is rebuilt again below, once the states are new)
            st = self.state[i]
            if st == _CONTROL:
                ids.append((self.retain[i], self.topic[i], self.props[i] if _MQTT5 else None))
                self.mark(i, _FREE, 0)
            elif session_present:
                if 0x18 >> st & 1:  # (SENT, RELEASED)
                    self.mark(i, _RESEND if st == _SENT else _RELQ, 0)
            elif 0xC >> st & 1:  # SENT, RESEND: sent before: the session that may have it is gone
                if republish_lost:
                    self.mark(i, _QUEUED, 0)
                else:
                    msg = Packet(3, topic=self.topic[i].decode(), payload=self.payload[i], qos=self.qos[i],
                                 retain=bool(self.retain[i]), props=self.props[i] if _MQTT5 else None, pid=self.pid[i])
                    self.mark(i, _FREE, 0)
                    on_event(LOST, msg, 0)
            elif st >= _RELEASED:  # RELEASED, RELQ: past PUBREC, the server took the message over
                self.mark(i, _FREE, 0)
                on_event(7, self.pid[i], 0)
        self._requeue()
        return ids
