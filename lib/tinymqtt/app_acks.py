# Inbound QoS 1/2 messages the application acknowledges itself, for a Session (or Session5) built with them:
# manual_ack=True (every one, by ack()), or manual_ack=None (the asyncio client's: those no handler takes, once
# the application has taken them from its queue). Loaded only by a session that asks for it;
# profile mqtt311 ships without it. A held message's flow is the HELD state of session.py's inbound table: its
# sessions take a new QoS 1/2 message to HELD (deliver, hold the ack) instead of acknowledging it at once.
# A message kept from a lost session must acknowledge nothing once the new session reuses its packet id for
# another. Each new session has a new _held table, and with manual_ack each Packet delivered carries _era, the
# table of the session it came in (compared by identity: no counter to keep); a driver that hands out its own
# copy (the asyncio client's Message) holds that copy in _held instead of the QoS, and only that object
# acknowledges the id. (Anything else with a pid acks by packet id: tools/spark's handles.)
# Our Receive Maximum bounds the held messages exactly (v5: the server counts them until our ack); a 3.x server
# never hears it, so there the bound is 64x (min 1024). Beyond, 0x93.
from tinymqtt.errors import RemoteProtocolError, protocol_error, const

_V5 = const(5)
_PUBLISH = const(3)
_PUBACK = const(4)
_PUBREC = const(5)
_IN_NONE = const(0)  # session.py's inbound states, events and actions
_IN_RECEIVED = const(1)
_IN_HELD = const(2)
_IN_QOS1 = const(1)
_IN_QOS2 = const(2)
_IN_PUBREL = const(3)
_IN_ACK_QOS1 = const(4)
_IN_ACK_QOS2 = const(5)
_IN_HOLD = const(2)


def _with_held(inbound):
    """Session's inbound table (session._INBOUND) with this module's rows: a new QoS 1/2 message is HELD, its ack
    the application's (and so is one that reuses the id of an open QoS 2 flow)."""
    t = dict(inbound)
    t[_IN_NONE << 4 | _IN_QOS1] = _IN_HELD << 4 | _IN_HOLD
    t[_IN_NONE << 4 | _IN_QOS2] = _IN_HELD << 4 | _IN_HOLD
    t[_IN_RECEIVED << 4 | _IN_QOS1] = _IN_HELD << 4 | _IN_HOLD
    return t


class AppAcks:
    """Mixed in before Session or Session5 by extended(); _base is that class. Option: manual_ack (True or None).
    Attributes a driver sets: hold (its queue is full: received() stops at the next PUBLISH and sets parked)
    and hold_pubrel, fn(pid) -> True when the application answers that PUBREL itself with complete(pid), once
    it has made the end of the flow durable (the server may reuse the id as soon as PUBCOMP leaves)."""

    hold = parked = False  # (defaults in the class: an instance holds only what it changed)

    def __init__(self, *args, manual_ack=False, **options):
        self._base.__init__(self, *args, **options)
        self.manual_ack = manual_ack
        self.hold_pubrel = None
        self._held = {}  # pid -> QoS (or a driver's copy of the message): delivered, awaiting the application's ack

    def ack(self, msg):
        """Acknowledges a delivered QoS 1/2 message (PUBACK, or PUBREC for QoS 2). Returns False when `out`
        has no room (write it, then ack again)."""
        e = self._held
        h = e.get(msg.pid)
        return h is not msg and (not isinstance(h, int) or getattr(msg, "_era", e) is not e) or self._pay(msg.pid)

    def _pay(self, pid):
        # ack() by packet id (the table's HELD --ack()--> row); also the ack _on_publish owed when a handler had
        # filled `out` (Session.received)
        q = self._held.get(pid)
        if not q:  # (a held QoS is 1 or 2, a copy a tuple: never false)
            return True  # not ours any more (the session was lost), or already acknowledged
        if len(self.out) - self.outlen < 8:
            return False
        if not isinstance(q, int):  # a driver's copy
            q = q.qos
        row = self._inbound[_IN_HELD << 4 | (_IN_ACK_QOS1 if q == 1 else _IN_ACK_QOS2)]  # to NONE, or RECEIVED
        del self._held[pid]
        if row >> 4 != _IN_NONE:
            self._rx_add(pid)
        self._send(_PUBACK if q == 1 else _PUBREC, pid, 0)
        return True

    def _in_state(self, pid):
        return _IN_HELD if pid in self._held else self._base._in_state(self, pid)

    def _hold(self, p):
        # The table's NONE --PUBLISH QoS 1/2--> HELD: delivered, its ack waits for the application.
        pid = p.pid
        held = self._held
        rm = self.receive_maximum
        if len(held) >= (rm if self.version == _V5 else max(64 * rm, 1024)):
            raise RemoteProtocolError(0x93, "server exceeded our Receive Maximum of %d (%d messages unacknowledged)"
                                      % (rm, len(held)))
        held[pid] = p.qos
        if self.manual_ack:
            p._era = held
            self._deliver(p)
            self._msg = type(p)(_PUBLISH)  # (a Packet) the application keeps p until its ack(): the next is read anew
        elif self._deliver(p) and not self._pay(pid):  # manual_ack None: a handler took it, so it is acknowledged now
            self._owed = pid  # (or once `out` is written: the handler filled it)

    def _pubrel(self, pid):
        if (self._in_state(pid) << 4 | _IN_PUBREL) not in self._inbound:  # HELD: before our PUBREC
            raise protocol_error("PUBREL for packet id %d before our PUBREC" % pid)
        if not self.hold_pubrel or not self.hold_pubrel(pid):
            self.complete(pid)

    def _packet(self, buf, pos, total):
        self.parked = self.hold and buf[pos] >> 4 == _PUBLISH  # parked, untouched, until the application takes one
        return self.parked or self._base._packet(self, buf, pos, total)

    def tick(self, now):
        if self.parked and self.pinging:  # its PINGRESP may wait behind a message nobody took yet: the deadline
            self._ping_at = now  # starts again once reading resumes
        return self._base.tick(self, now)

    def _on_connack(self, p):
        # A new session forgets the held messages before anyone hears of its CONNACK, as Session forgets its
        # QoS 2 ids: an ack() in on_connect then sends nothing, and puts no stale id in the QoS 2 table (where it
        # would make the new session's message with that id look like a resend, never delivered).
        if not p.reason and not (p.session_present or (self.version == 3 and not self._clean_now)):
            self._held = {}
        self._base._on_connack(self, p)


_made = {}


def extended(base):
    """The class of base (Session or Session5) with AppAcks: built once, then reused."""
    c = _made.get(base)
    if not c:
        c = _made[base] = type(base.__name__, (AppAcks, base), {"_base": base})
        c._inbound = _with_held(base._inbound)
    return c
