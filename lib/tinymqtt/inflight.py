# Outbound messages of the session, from publish() until their QoS flow completes: preallocated slots, so
# a steady stream of publishes allocates nothing. A packet id maps to slot pid % size, which makes ack
# lookup O(1); a message keeps its full topic (never an alias) and a reference to the caller's payload.

# QUEUED: PUBLISH not yet (re)sent (offline, window full, or resend after reconnect: then dup is set).
# SENT: awaiting PUBACK/PUBREC. RELEASED: PUBREL sent, awaiting PUBCOMP. RELQ: PUBREL to resend.
# CONTROL: a packet id lent to a SUBSCRIBE/UNSUBSCRIBE awaiting its ack.
FREE, QUEUED, SENT, RELEASED, RELQ, CONTROL = 0, 1, 2, 3, 4, 5


class Inflight:
    def __init__(self, size):
        self.size = size
        self.state = bytearray(size)
        self.qos = bytearray(size)
        self.retain = bytearray(size)
        self.dup = bytearray(size)
        self.pid = [0] * size
        self.seq = [0] * size  # publish order: queued messages go out, and resends happen, in this order
        self.sent_at = [0] * size
        self.topic = [None] * size
        self.payload = [None] * size
        self.props = [None] * size
        self.count = 0  # slots in use
        self.unacked = 0  # QoS>0 messages on the wire (SENT or RELEASED): what Receive Maximum limits
        self._next_pid = 0
        self._seq = 0
        self._ring = [0] * size  # QUEUED slots, oldest first: each slot is in it at most once
        self._head = self._len = 0

    def add(self, topic, payload, qos, retain, props):
        """Stores a message as QUEUED; returns its slot, or -1 when every slot is taken."""
        if self.count == self.size:
            return -1
        size, pid = self.size, self._next_pid
        for _ in range(65535):  # the next packet id whose slot is free (a QoS 0 message takes a slot too)
            pid = pid % 65535 + 1
            if not self.state[pid % size]:
                break
        self._next_pid = pid
        i = pid % size
        self.state[i] = QUEUED  # one store a line: MicroPython builds a tuple for 4+ targets
        self.qos[i] = qos
        self.retain[i] = retain
        self.dup[i] = 0
        self.pid[i] = pid if qos else 0
        self.topic[i], self.payload[i], self.props[i] = topic, payload, props
        self._seq += 1
        self.seq[i] = self._seq
        self.count += 1
        if qos < 3:
            self._ring[(self._head + self._len) % size] = i
            self._len += 1
        return i

    def reserve(self):
        """Lends an unused packet id to a SUBSCRIBE/UNSUBSCRIBE; returns it, or -1 when no slot is free."""
        i = self.add(None, None, 3, 0, None)
        if i < 0:
            return -1
        self.state[i] = CONTROL
        return self.pid[i]

    def next_queued(self):
        """Slot of the oldest QUEUED message, or -1. It stays first until it leaves the QUEUED state."""
        while self._len:
            i = self._ring[self._head]
            if self.state[i] == QUEUED or self.state[i] == RELQ:
                return i
            self._head = (self._head + 1) % self.size
            self._len -= 1
        return -1

    def pop_queued(self):
        """Drops the head of the queue once the caller has sent it."""
        self._head = (self._head + 1) % self.size
        self._len -= 1

    def requeue(self):
        """Rebuilds the queue after a reconnect: PUBREL resends first (they never wait for the window, so
        they must not sit behind a PUBLISH that does), then PUBLISHes in publish order."""
        self._head = self._len = 0
        order = self.in_order()
        for st in (RELQ, QUEUED):
            for i in order:
                if self.state[i] == st:
                    self._ring[self._len] = i
                    self._len += 1

    def find(self, pid):
        i = pid % self.size
        return i if self.state[i] and self.pid[i] == pid else -1

    def mark(self, i, state, now=0):
        # unacked counts the slots on the wire: SENT, RELEASED, RELQ
        self.unacked += (SENT <= state <= RELQ) - (SENT <= self.state[i] <= RELQ)
        self.state[i] = state
        self.sent_at[i] = now

    def free(self, i):
        self.unacked -= SENT <= self.state[i] <= RELQ
        self.state[i] = FREE
        self.topic[i] = self.payload[i] = self.props[i] = None
        self.count -= 1

    def in_order(self):
        """Slots in use, oldest first (used on reconnect, where allocating a list is fine)."""
        used = [i for i in range(self.size) if self.state[i]]
        used.sort(key=lambda i: self.seq[i])
        return used
