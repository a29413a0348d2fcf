# The outbound flows of a session, from publish() until their QoS flow completes: one table of every transition,
# and the slots that hold the messages. A packet id maps to slot pid % size, so an ack finds its flow at once; a
# message keeps its full topic (never an alias) and the caller's payload. Nothing here writes a packet: the
# session sends what a step's action says to send.
from tinymqtt.packets import Packet, const  # (const: micropython's, or int on CPython)

# Theory of operation (MQTT 3.1.1 and 5.0 section 4.3, 4.4). A slot is in one state; an event moves it. The
# table _FLOWS below holds every move, (state, event) -> (next state, action), and Inflight.step() is the only
# code that changes a state: a move the table lacks is a bug of ours (checked where _FLOW_CHECKS is on), except
# for an ack from the server, whose missing row is the server's protocol error (Inflight.ack()).
#
#   publish() -> QUEUED --write QoS 0--> FREE
#                  | --write QoS 1--> WAIT_PUBACK --PUBACK--------------------------------------------> FREE
#                  | --write QoS 2--> WAIT_PUBREC --PUBREC: send PUBREL--> WAIT_PUBCOMP --PUBCOMP------> FREE
#                                                 --PUBREC >= 0x80 (refused)-------------------------> FREE
#   resend (a new connection keeping the session, or the 3.x retry timer of retry.py): a flow on the wire is
#   queued again, RESEND_QOS1 / RESEND_QOS2 (the PUBLISH again with DUP) or RESEND_PUBREL (the PUBREL again);
#   an ack that comes for it meanwhile, the first send's, acts as it would have on the wire.
#   a new connection without the session: a PUBLISH sent before is LOST (republish_lost: QUEUED, a first
#   delivery again); past PUBREC the server took the message over (the flow ends as if PUBCOMP came).
#   CONTROL: a packet id lent to a SUBSCRIBE or UNSUBSCRIBE (the slot keeps the request: topic its filters,
#   retain its packet type, props its properties), FREE on its SUBACK/UNSUBACK or on a new connection (the
#   session asks again).
#
# The states. Numbered so that two sets are ranges: the send queue (QUEUED..RESEND_PUBREL: what pump() sends)
# and the wire (RESEND_PUBREL..WAIT_PUBCOMP: what the server's Receive Maximum counts, Inflight.unacked).
_FREE = const(0)
_QUEUED = const(1)
_RESEND_QOS1 = const(2)
_RESEND_QOS2 = const(3)
_RESEND_PUBREL = const(4)
_WAIT_PUBACK = const(5)
_WAIT_PUBREC = const(6)
_WAIT_PUBCOMP = const(7)
_CONTROL = const(8)
_FIRST_QUEUED = const(1)  # _QUEUED
_LAST_QUEUED = const(4)  # _RESEND_PUBREL
_FIRST_ON_WIRE = const(4)  # _RESEND_PUBREL
_LAST_ON_WIRE = const(7)  # _WAIT_PUBCOMP

# The events.
_QUEUE = const(0)  # publish() stores a message
_LEND = const(1)  # subscribe() or unsubscribe() borrows a packet id
_WRITE_QOS0 = const(2)  # pump() wrote the PUBLISH: _WRITE_QOS0 + its QoS
_WRITE_QOS1 = const(3)
_WRITE_QOS2 = const(4)
_WRITE_PUBREL = const(5)  # pump() wrote the PUBREL again
_GOT_PUBACK = const(6)
_GOT_PUBREC = const(7)
_GOT_REFUSAL = const(8)  # a PUBREC with a reason code >= 0x80: the server refused the message
_GOT_PUBCOMP = const(9)
_GOT_SUBACK = const(10)  # a SUBACK or UNSUBACK
_SEND_AGAIN = const(11)  # a new connection, the server kept the session (or, for a flow on the wire, the 3.x timer)
_SESSION_GONE = const(12)  # a new connection, the server has no session of ours
_REPUBLISH = const(13)  # the same, with republish_lost

# The actions: what the session does after the move.
_NO_ACTION = const(0)
_ENDED = const(1)  # the flow ended: the application hears of its ack
_SEND_PUBREL = const(2)
_TELL_LOST = const(3)  # on_event(LOST, the message): the server never acknowledged it, its session is gone
_TELL_PUBCOMP = const(4)  # on_event(PUBCOMP, pid): the server took the message over before its session ended
_ASK_AGAIN = const(5)  # an unanswered SUBSCRIBE or UNSUBSCRIBE: the session asks again
# ack()'s answers besides the table's actions
_NOT_IN_FLIGHT = const(6)  # no message of ours has this packet id (the session counts it)
_NOT_EXPECTED = const(7)  # the flow has no row for this ack: the server broke the protocol

# packet types (tinymqtt.wire's NAMES names them)
_PUBLISH = const(3)
_PUBCOMP = const(7)

LOST = const(16)  # event for on_event: a message the server never acknowledged, dropped with a session that is gone
# const(0) in every board build (tools/deploy/features.py): the check that every move has its row
_FLOW_CHECKS = const(1)
# const(0) in a board build without tinymqtt/retry.py, the 3.x timer (tools/deploy/features.py)
_RETRY = const(1)
# const(0) in a board build without MQTT 5's props.py (tools/deploy/features.py): only MQTT 5's window, the server's
# Receive Maximum, reads unacked, and only MQTT 5 packets carry a message's or a request's props
_MQTT5 = const(1)

# Every move of an outbound flow: (state << 4 | event) -> (next state << 4 | action).
_FLOWS = {
    # state                 event                  next state              action
    _FREE << 4 |            _QUEUE:                _QUEUED << 4 |          _NO_ACTION,
    _FREE << 4 |            _LEND:                 _CONTROL << 4 |         _NO_ACTION,
    _QUEUED << 4 |          _WRITE_QOS0:           _FREE << 4 |            _NO_ACTION,
    _QUEUED << 4 |          _WRITE_QOS1:           _WAIT_PUBACK << 4 |     _NO_ACTION,
    _QUEUED << 4 |          _WRITE_QOS2:           _WAIT_PUBREC << 4 |     _NO_ACTION,
    _RESEND_QOS1 << 4 |     _WRITE_QOS1:           _WAIT_PUBACK << 4 |     _NO_ACTION,
    _RESEND_QOS2 << 4 |     _WRITE_QOS2:           _WAIT_PUBREC << 4 |     _NO_ACTION,
    _RESEND_PUBREL << 4 |   _WRITE_PUBREL:         _WAIT_PUBCOMP << 4 |    _NO_ACTION,
    # acks (a resend queued by the timer takes the first send's ack as its own)
    _WAIT_PUBACK << 4 |     _GOT_PUBACK:           _FREE << 4 |            _ENDED,
    _RESEND_QOS1 << 4 |     _GOT_PUBACK:           _FREE << 4 |            _ENDED,
    _WAIT_PUBREC << 4 |     _GOT_PUBREC:           _WAIT_PUBCOMP << 4 |    _SEND_PUBREL,
    _RESEND_QOS2 << 4 |     _GOT_PUBREC:           _WAIT_PUBCOMP << 4 |    _SEND_PUBREL,
    _WAIT_PUBCOMP << 4 |    _GOT_PUBREC:           _WAIT_PUBCOMP << 4 |    _SEND_PUBREL,  # PUBREC again: PUBREL again
    _RESEND_PUBREL << 4 |   _GOT_PUBREC:           _WAIT_PUBCOMP << 4 |    _SEND_PUBREL,
    _WAIT_PUBREC << 4 |     _GOT_REFUSAL:          _FREE << 4 |            _ENDED,
    _RESEND_QOS2 << 4 |     _GOT_REFUSAL:          _FREE << 4 |            _ENDED,
    _WAIT_PUBCOMP << 4 |    _GOT_REFUSAL:          _FREE << 4 |            _ENDED,
    _RESEND_PUBREL << 4 |   _GOT_REFUSAL:          _FREE << 4 |            _ENDED,
    _WAIT_PUBCOMP << 4 |    _GOT_PUBCOMP:          _FREE << 4 |            _ENDED,
    _RESEND_PUBREL << 4 |   _GOT_PUBCOMP:          _FREE << 4 |            _ENDED,
    _CONTROL << 4 |         _GOT_SUBACK:           _FREE << 4 |            _ENDED,
    # resends: a new connection that keeps the session, and the 3.x timer (retry.py: the WAIT_ states alone)
    _WAIT_PUBACK << 4 |     _SEND_AGAIN:           _RESEND_QOS1 << 4 |     _NO_ACTION,
    _WAIT_PUBREC << 4 |     _SEND_AGAIN:           _RESEND_QOS2 << 4 |     _NO_ACTION,
    _WAIT_PUBCOMP << 4 |    _SEND_AGAIN:           _RESEND_PUBREL << 4 |   _NO_ACTION,
    _CONTROL << 4 |         _SEND_AGAIN:           _FREE << 4 |            _ASK_AGAIN,
    # a new connection without the session (QUEUED, never sent, stays for the new one)
    _WAIT_PUBACK << 4 |     _SESSION_GONE:         _FREE << 4 |            _TELL_LOST,
    _WAIT_PUBREC << 4 |     _SESSION_GONE:         _FREE << 4 |            _TELL_LOST,
    _RESEND_QOS1 << 4 |     _SESSION_GONE:         _FREE << 4 |            _TELL_LOST,
    _RESEND_QOS2 << 4 |     _SESSION_GONE:         _FREE << 4 |            _TELL_LOST,
    _WAIT_PUBCOMP << 4 |    _SESSION_GONE:         _FREE << 4 |            _TELL_PUBCOMP,
    _RESEND_PUBREL << 4 |   _SESSION_GONE:         _FREE << 4 |            _TELL_PUBCOMP,
    _CONTROL << 4 |         _SESSION_GONE:         _FREE << 4 |            _ASK_AGAIN,
    _WAIT_PUBACK << 4 |     _REPUBLISH:            _QUEUED << 4 |          _NO_ACTION,
    _WAIT_PUBREC << 4 |     _REPUBLISH:            _QUEUED << 4 |          _NO_ACTION,
    _RESEND_QOS1 << 4 |     _REPUBLISH:            _QUEUED << 4 |          _NO_ACTION,
    _RESEND_QOS2 << 4 |     _REPUBLISH:            _QUEUED << 4 |          _NO_ACTION,
    _WAIT_PUBCOMP << 4 |    _REPUBLISH:            _FREE << 4 |            _TELL_PUBCOMP,
    _RESEND_PUBREL << 4 |   _REPUBLISH:            _FREE << 4 |            _TELL_PUBCOMP,
    _CONTROL << 4 |         _REPUBLISH:            _FREE << 4 |            _ASK_AGAIN,
}
if _FLOW_CHECKS:  # names for the check's message
    _STATE_NAMES = ("FREE QUEUED RESEND_QOS1 RESEND_QOS2 RESEND_PUBREL WAIT_PUBACK WAIT_PUBREC WAIT_PUBCOMP "
                    "CONTROL")
    _EVENT_NAMES = ("QUEUE LEND WRITE_QOS0 WRITE_QOS1 WRITE_QOS2 WRITE_PUBREL GOT_PUBACK GOT_PUBREC GOT_REFUSAL "
                    "GOT_PUBCOMP GOT_SUBACK SEND_AGAIN SESSION_GONE REPUBLISH")

    def _no_move(state, event):
        raise AssertionError("no outbound flow moves from %s on %s" % (_STATE_NAMES.split()[state],
                                                                        _EVENT_NAMES.split()[event]))


def ticks_diff(a, b):
    """a - b for millisecond clocks that wrap at 2**30 (MicroPython's ticks_ms on 32-bit boards; the ports give
    CPython the same). Every constant is below 2**30, a small int on 32-bit builds (31-bit small ints), so
    this allocates nothing there; any clock whose period is a multiple of 2**30 (64-bit builds) works too."""
    half = 0x20000000  # half the period
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
            self.unacked = 0  # QoS>0 messages on the wire: what the server's Receive Maximum limits
        self._next_pid = 0
        self._seq = 0
        # The send queue: slots in the queue's states, oldest first, each at most once, queued entries from
        # ring[head] on. Session.pump() takes them in order; an entry whose slot has left those states meanwhile
        # is stale and dropped there, so the head stays first until pump() sends it.
        self.ring = [0] * size
        self.head = self.queued = 0

    def add(self, topic, payload, qos, retain, props, written=False, now=0):
        """Stores a message as QUEUED (qos 3: lends its packet id to a SUBSCRIBE/UNSUBSCRIBE, CONTROL); returns its
        slot, or -1 when every slot is taken. written: the session writes its PUBLISH now, with this packet id
        (publish() with nothing queued ahead): the table's write move follows at once (at now)."""
        size = self.size
        if self.count == size:
            return -1
        pid = self._next_pid
        # The next packet id whose slot is free (a QoS 0 message takes a slot too): count < size, so one is.
        while True:
            pid = pid % 65535 + 1
            if self.state[pid % size] == _FREE:
                break
        self._next_pid = pid
        i = pid % size
        self.state[i] = _FLOWS[_FREE << 4 | (_LEND if qos > 2 else _QUEUE)] >> 4  # the table's QUEUED or CONTROL
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
        if written:
            self.step(i, _WRITE_QOS0 + qos, now)
        elif qos < 3:
            self.ring[(self.head + self.queued) % size] = i
            self.queued += 1
        return i

    def step(self, i, event, now):
        """Moves slot i as the table's row for (its state, event) says; returns the row's action. The one place a
        slot changes state; FREE drops the message."""
        old = self.state[i]
        row = _FLOWS.get(old << 4 | event)
        if _FLOW_CHECKS and row is None:
            _no_move(old, event)  # (raises)
        new = row >> 4
        if _MQTT5:  # a flow leaving or entering the wire
            if _FIRST_ON_WIRE <= old <= _LAST_ON_WIRE:
                self.unacked -= 1
            if _FIRST_ON_WIRE <= new <= _LAST_ON_WIRE:
                self.unacked += 1
        self.state[i] = new
        if _RETRY and self.sent_at:
            self.sent_at[i] = now
        if new == _FREE and old != _FREE:
            self.topic[i] = self.payload[i] = None
            if _MQTT5:
                self.props[i] = None
            self.count -= 1
        return row & 15

    def _requeue(self):
        """Rebuilds the queue after a resend: PUBREL resends first (they never wait for the window, so they must
        not sit behind a PUBLISH that does), then PUBLISHes in publish order. Returns the slots in use, oldest
        first (only after a resend or on reconnect, where allocating a list is fine)."""
        order = []
        for i in range(self.size):
            if self.state[i] != _FREE:
                order.append(i)
        seq = self.seq
        order.sort(key=lambda i: seq[i])
        n = 0
        for i in order:
            if self.state[i] == _RESEND_PUBREL:
                self.ring[n] = i
                n += 1
        for i in order:
            if _FIRST_QUEUED <= self.state[i] < _RESEND_PUBREL:  # QUEUED, RESEND_QOS1, RESEND_QOS2
                self.ring[n] = i
                n += 1
        self.head = 0
        self.queued = n
        return order

    def find(self, pid):
        i = pid % self.size
        return i if self.state[i] != _FREE and self.pid[i] == pid else -1

    # ------------------------------------------------------------ the events from outside (see the table)

    def ack(self, event, pid, now):
        """_GOT_PUBACK, _GOT_PUBREC, _GOT_REFUSAL or _GOT_PUBCOMP for pid. Returns the row's action (_ENDED, or
        _SEND_PUBREL), _NOT_IN_FLIGHT when pid is no message of ours, _NOT_EXPECTED when its flow has no row for
        this ack (a protocol error)."""
        i = self.find(pid)
        if i < 0 or self.state[i] == _CONTROL:
            return _NOT_IN_FLIGHT
        st = self.state[i]
        if (st << 4 | event) not in _FLOWS:
            return _NOT_EXPECTED
        a = self.step(i, event, now)
        if st == _RESEND_QOS1 or st == _RESEND_QOS2:  # its queue entry is stale now (rare: allocating is fine)
            self._requeue()
        return a

    def _renew(self, session_present, republish_lost, on_event):
        """A new connection, with the session the server kept (session_present) or without. Tells
        on_event(ev, value, 0) of each flow that ended with the old session; returns the SUBSCRIBE and
        UNSUBSCRIBE requests left unanswered, as (type, filters, props) (their slots are free now: the session
        asks again). A state without a row for the event (QUEUED, or already queued again) stays as it is."""
        event = _SEND_AGAIN if session_present else _REPUBLISH if republish_lost else _SESSION_GONE
        ids = []
        for i in self._requeue():  # (the queue is rebuilt again below, once the states are new)
            row = _FLOWS.get(self.state[i] << 4 | event)
            if row is None:
                continue
            a = row & 15
            if a == _ASK_AGAIN:
                ids.append((self.retain[i], self.topic[i], self.props[i] if _MQTT5 else None))
            elif a == _TELL_LOST:
                msg = Packet(_PUBLISH, topic=self.topic[i].decode(), payload=self.payload[i], qos=self.qos[i],
                             retain=bool(self.retain[i]), props=self.props[i] if _MQTT5 else None, pid=self.pid[i])
            self.step(i, event, 0)
            if a == _TELL_LOST:
                on_event(LOST, msg, 0)
            elif a == _TELL_PUBCOMP:
                on_event(_PUBCOMP, self.pid[i], 0)
        self._requeue()
        return ids
