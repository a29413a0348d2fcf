# A TCP proxy that breaks MQTT connections on purpose, at points it finds by parsing the stream both ways.
# tests/support/proxy.py cuts or silences every connection on the test's word; this one gives each new
# connection a Plan: where to cut it (a byte offset, in the middle of the k-th packet of a type, just before
# or just after it: "before the 3rd PUBREL going up" is a cut between PUBREC and PUBREL), how long to hold
# each chunk (latency), and whether to forward it one byte per write (trickle). Every cut is logged with the
# time it happened and whether it fell inside a packet, and every accepted connection with its time, so a
# test can check that a client came back by itself within its backoff.
#
#     with FaultProxy(broker.host, broker.port) as px:        # clients connect to px.host, px.port
#         px.plan = RandomPlans(random.Random(1), cuts=50, kinds=PUBLISHER_CUTS)
#         ...                                                # drive the client through px
#         px.cuts, px.accepts, px.max_reconnect_gap()
#         px.silence()                                       # keep the sockets, drop every byte (half-open)
#
# FaultProxy(..., record=True) also keeps what passed (packet type, flags, id, PUBLISH payload) both ways, so a
# test can tell who broke a rule: resent_after_pubrel(way) finds QoS 2 PUBLISHes sent again after their PUBREL.
#
# Two threads per connection (one per direction) and one accepting: a cut shuts both sockets down, which
# wakes the other direction's blocked recv. All state shared with the test's thread sits behind one lock.
import random
import socket
import struct
import threading
import time

UP, DOWN = 0, 1  # client -> broker, broker -> client
NAMES = ("reserved", "CONNECT", "CONNACK", "PUBLISH", "PUBACK", "PUBREC", "PUBREL", "PUBCOMP", "SUBSCRIBE",
         "SUBACK", "UNSUBSCRIBE", "UNSUBACK", "PINGREQ", "PINGRESP", "DISCONNECT", "AUTH")
CONNECT, CONNACK, PUBLISH, PUBACK, PUBREC, PUBREL, PUBCOMP, SUBSCRIBE = 1, 2, 3, 4, 5, 6, 7, 8


class Cut:
    """Where one connection is cut, in one direction's byte stream:
    Cut(UP, at=n): after n bytes (anywhere: inside CONNECT, inside a PUBLISH, between packets);
    Cut(DOWN, before=PUBREL, nth=k): just before the k-th PUBREL (it never arrives);
    Cut(UP, mid=PUBLISH, nth=k): after half of the k-th PUBLISH;
    Cut(DOWN, after=PUBREC, nth=k): just after the k-th PUBREC (it arrived; what answers it will not)."""

    def __init__(self, way, at=None, before=None, mid=None, after=None, nth=1, reset=False):
        self.way, self.at, self.before, self.mid, self.after, self.nth = way, at, before, mid, after, nth
        self.reset = reset  # close with a TCP RST instead of a FIN

    def resolve(self, start, ptype, k, total):
        """The stream offset to cut at, given a packet (start offset, type, k-th of its type, total length)."""
        if k != self.nth:
            return None
        if ptype == self.before:
            return start
        if ptype == self.mid:
            return start + max(1, total // 2)
        if ptype == self.after:
            return start + total
        return None

    def __repr__(self):
        if self.at is not None:
            what = "at byte %d" % self.at
        else:
            kind, t = next((k, t) for k, t in (("before", self.before), ("mid", self.mid), ("after", self.after))
                           if t is not None)
            what = "%s %s #%d" % (kind, NAMES[t], self.nth)
        return "<Cut %s %s%s>" % ("up" if self.way == UP else "down", what, " RST" if self.reset else "")


class Plan:
    """What happens to one connection: an optional cut, a random hold of 0..delay seconds before each chunk
    is forwarded, and trickle (one byte per write, so the peer reads packets a byte at a time)."""

    def __init__(self, cut=None, delay=0.0, trickle=False):
        self.cut, self.delay, self.trickle = cut, delay, trickle

    def __repr__(self):
        return "<Plan %r delay=%s trickle=%s>" % (self.cut, self.delay, self.trickle)


class RandomPlans:
    """A plan source: each new connection gets a random cut of one of `kinds` until `cuts` were handed out,
    then no more faults. kinds: functions rng -> Cut. Some connections also get latency or trickle. The first
    connection (the application's connect(), which raises rather than retries) is never cut before CONNACK."""

    def __init__(self, rng, cuts, kinds, delay=0.004, delay_share=0.3, trickle_share=0.1):
        self.rng, self.left, self.kinds = rng, cuts, kinds
        self.delay, self.delay_share, self.trickle_share = delay, delay_share, trickle_share

    def __call__(self, number):
        if self.left <= 0:
            return None
        self.left -= 1
        r = self.rng
        cut = r.choice(self.kinds)(r)
        while number == 1 and (cut.mid in (CONNECT, CONNACK) or (cut.at is not None and cut.at < 200)):
            cut = r.choice(self.kinds)(r)
        cut.reset = r.random() < 0.2
        trickle = number > 1 and r.random() < self.trickle_share
        if trickle and cut.at is None:
            cut = Cut(cut.way, at=r.randint(1, 1500), reset=cut.reset)  # a trickled connection is cut by bytes
        return Plan(cut, self.delay if r.random() < self.delay_share else 0.0, trickle)


# Cut kinds for a client that publishes QoS 1/2 through the proxy, and for one that receives them.
def _n(r, hi):
    return r.randint(1, hi)


PUBLISHER_CUTS = [
    lambda r: Cut(UP, at=_n(r, 4000)),
    lambda r: Cut(DOWN, at=_n(r, 1500)),
    lambda r: Cut(UP, mid=PUBLISH, nth=_n(r, 60)),
    lambda r: Cut(UP, before=PUBREL, nth=_n(r, 30)),  # between PUBREC and PUBREL
    lambda r: Cut(DOWN, before=PUBREC, nth=_n(r, 30)),
    lambda r: Cut(DOWN, after=PUBREC, nth=_n(r, 30)),
    lambda r: Cut(DOWN, before=PUBCOMP, nth=_n(r, 30)),
    lambda r: Cut(DOWN, before=PUBACK, nth=_n(r, 30)),
    lambda r: Cut(UP, mid=CONNECT, nth=1),
    lambda r: Cut(DOWN, mid=CONNACK, nth=1),
]
SUBSCRIBER_CUTS = [
    lambda r: Cut(DOWN, at=_n(r, 6000)),
    lambda r: Cut(UP, at=_n(r, 1500)),
    lambda r: Cut(DOWN, mid=PUBLISH, nth=_n(r, 60)),
    lambda r: Cut(DOWN, before=PUBREL, nth=_n(r, 30)),  # between PUBREC and PUBREL
    lambda r: Cut(UP, before=PUBREC, nth=_n(r, 30)),
    lambda r: Cut(UP, after=PUBREC, nth=_n(r, 30)),
    lambda r: Cut(UP, before=PUBCOMP, nth=_n(r, 30)),
    lambda r: Cut(UP, before=PUBACK, nth=_n(r, 30)),
    lambda r: Cut(DOWN, mid=CONNACK, nth=1),
]


class _Scanner:
    """Finds packet boundaries in one direction's byte stream. Bodies are skipped, except the first `keep`
    bytes of each, which on_done gets (for the wire record) once the packet has passed."""

    def __init__(self, keep=0):
        self.pos = 0  # stream offset of the next byte fed
        self.left = 0  # body bytes of the current packet still to come
        self.hdr = bytearray()
        self.start = 0
        self.first = 0
        self.body = bytearray()
        self.keep = keep
        self.nth = [0] * 16
        self.bounds = set()  # packet boundaries (starts and ends) in the chunk fed last
        self.broken = False  # not MQTT (or not any more): stop parsing

    def feed(self, data, on_packet, on_done=None):
        i, n = 0, len(data)
        self.bounds.clear()
        if not self.hdr and not self.left:
            self.bounds.add(self.pos)
        while i < n and not self.broken:
            if self.left:
                k = min(self.left, n - i)
                if self.keep and len(self.body) < self.keep:
                    self.body += data[i:i + min(k, self.keep - len(self.body))]
                i += k
                self.left -= k
                if not self.left:
                    self.bounds.add(self.pos + i)
                    if on_done:
                        on_done(self.first, bytes(self.body))
                continue
            if not self.hdr:
                self.start = self.pos + i
                self.bounds.add(self.start)
            self.hdr.append(data[i])
            i += 1
            if len(self.hdr) >= 2 and not self.hdr[-1] & 0x80:
                rl = 0
                for j, d in enumerate(self.hdr[1:]):
                    rl |= (d & 0x7F) << (7 * j)
                self.first = self.hdr[0]
                t = self.first >> 4
                self.nth[t] += 1
                total = len(self.hdr) + rl
                self.hdr = bytearray()
                self.body = bytearray()
                self.left = rl
                on_packet(self.start, t, self.nth[t], total)
                if not rl:
                    self.bounds.add(self.start + total)
                    if on_done:
                        on_done(self.first, b"")
            elif len(self.hdr) > 5:
                self.broken = True
        self.pos += n


def _vbi(b, i):
    v = shift = 0
    while i < len(b):
        d = b[i]
        i += 1
        v |= (d & 0x7F) << shift
        shift += 7
        if not d & 0x80:
            break
    return v, i


def parse_record(level, first, body):
    """(type, flags, packet id, payload) of a packet from its first byte and body (payload: PUBLISH only)."""
    t, flags = first >> 4, first & 15
    pid, payload = 0, None
    try:
        if t == PUBLISH:
            i = 2 + (body[0] << 8 | body[1])
            if flags >> 1 & 3:
                pid = body[i] << 8 | body[i + 1]
                i += 2
            if level == 5:
                n, i = _vbi(body, i)
                i += n
            payload = bytes(body[i:])
        elif PUBACK <= t <= PUBCOMP or t in (SUBSCRIBE, 9, 10, 11):
            pid = body[0] << 8 | body[1]
    except IndexError:  # a packet cut short by the keep limit
        pass
    return t, flags, pid, payload


class _Conn:
    def __init__(self, number, client, broker, plan, keep):
        self.number, self.socks, self.plan = number, (client, broker), plan or Plan()
        self.scan = (_Scanner(keep), _Scanner(keep))
        self.level = 4  # the protocol level, from the client's CONNECT
        self.cut_at = None  # resolved stream offset of the cut, in plan.cut.way's stream
        self.dead = False
        self.opened = time.monotonic()


class FaultProxy:
    def __init__(self, host, port, seed=None, record=False):
        self.target = (host, port)
        # record=True: every packet that passes is kept as (connection, type, flags, packet id, payload or None)
        # in self.wire[UP] / self.wire[DOWN], in the order forwarded (payloads of up to 200 bytes are whole).
        self.record = record
        self.wire = ([], [])
        self.plan = None  # fn(connection number) -> Plan or None, consulted as each connection is accepted
        self.rng = random.Random(seed)
        self.refuse = False  # True: new connections are closed at once
        self.accepted = 0
        self.accepts = []  # monotonic time of every accepted connection that reached the broker
        self.failed = []  # monotonic time of every accepted connection the broker refused (it was down)
        self.cuts = []  # (monotonic time, connection number, repr of the Cut, True if inside a packet)
        self.bytes = [0, 0]  # forwarded up, down
        self.dropped = [0, 0]  # read and dropped while silent
        self.packets = [[0] * 16, [0] * 16]  # packets seen by type, up and down
        self._silent = [False, False]
        self._conns = {}
        self._lock = threading.Lock()
        self._threads = []
        self._listen = socket.create_server(("127.0.0.1", 0))
        self.host, self.port = self._listen.getsockname()[:2]
        self._running = True
        self._acceptor = threading.Thread(target=self._accept_loop, name="faultproxy:%d" % self.port, daemon=True)
        self._acceptor.start()

    # ---------------------------------------------------------------- the test's controls

    @property
    def connections(self):
        """Connections open now."""
        with self._lock:
            return sum(1 for c in self._conns.values() if not c.dead)

    def silence(self, up=True, down=True):
        """Stops forwarding (the sockets stay open, what arrives is dropped): a half-open link."""
        with self._lock:
            self._silent = [up, down]

    def resume(self):
        with self._lock:
            self._silent = [False, False]

    def cut_all(self, reset=False):
        """Cuts every open connection now."""
        with self._lock:
            conns = list(self._conns.values())
        for c in conns:
            self._cut(c, "by the test", False, reset)

    def max_reconnect_gap(self, until=None):
        """The longest time from a cut (or a connection the broker refused) to the next connection that
        reached the broker: how long the client stayed away after a fault. None when nothing was cut."""
        with self._lock:
            faults = [t for t, *_ in self.cuts] + list(self.failed)
            accepts = sorted(self.accepts)
        worst = None
        for t in sorted(faults):
            nxt = next((a for a in accepts if a > t), until)
            if nxt is None:
                continue
            gap = nxt - t
            worst = gap if worst is None or gap > worst else worst
        return worst

    def resent_after_pubrel(self, way):
        """QoS 2 PUBLISHes sent again (same packet id, same payload) in direction `way` after that side had
        sent its PUBREL for them, which MQTT forbids (spec 4.3.3: "MUST NOT re-send the PUBLISH once it
        has sent the corresponding PUBREL"): the receiver has completed the flow and must take such a PUBLISH
        as a new message. Returns {payload: count}. Needs record=True."""
        released = {}  # pid -> payload whose PUBREL was sent and not followed by another message on that pid
        last = {}  # pid -> payload of the last QoS 2 PUBLISH with that pid
        out = {}
        with self._lock:
            log = list(self.wire[way])
        for conn, t, flags, pid, payload in log:
            if t == PUBLISH and flags >> 1 & 3 == 2:
                if released.get(pid) == payload:
                    out[payload] = out.get(payload, 0) + 1
                elif pid in released:
                    del released[pid]  # a new message on a reused packet id
                last[pid] = payload
            elif t == PUBREL and pid in last:
                released[pid] = last[pid]
        return out

    def clear_logs(self):
        """Forgets the cut and connection logs (a long run keeps its own counts: `accepted` stays)."""
        with self._lock:
            del self.cuts[:], self.accepts[:], self.failed[:]

    def mid_packet_cuts(self):
        with self._lock:
            return sum(1 for c in self.cuts if c[3])

    def close(self):
        if not self._running:
            return
        self._running = False
        try:
            self._listen.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._listen.close()
        self.cut_all()
        self._acceptor.join(5)
        for t in list(self._threads):
            t.join(5)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ---------------------------------------------------------------- accepting

    def _accept_loop(self):
        while self._running:
            try:
                c, _ = self._listen.accept()
            except OSError:
                return
            if self.refuse or not self._running:
                c.close()
                continue
            try:
                b = socket.create_connection(self.target, timeout=2)
            except OSError:
                with self._lock:
                    self.failed.append(time.monotonic())
                c.close()
                continue
            for s in (c, b):
                s.settimeout(None)
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                self.accepted += 1
                n = self.accepted
                self.accepts.append(time.monotonic())
            plan = self.plan(n) if self.plan else None
            conn = _Conn(n, c, b, plan, 256 if self.record else 0)
            with self._lock:
                self._conns[n] = conn
                self._threads = [t for t in self._threads if t.is_alive()]
            for way in (UP, DOWN):
                t = threading.Thread(target=self._pump, args=(conn, way), daemon=True,
                                     name="faultproxy:%d:%d%s" % (self.port, n, "up" if way == UP else "down"))
                self._threads.append(t)
                t.start()

    # ---------------------------------------------------------------- forwarding

    def _pump(self, conn, way):
        src, dst = conn.socks[way], conn.socks[1 - way]
        plan, scan = conn.plan, conn.scan[way]
        cut = plan.cut if plan.cut is not None and plan.cut.way == way else None
        if cut is not None and cut.at is not None:
            conn.cut_at = cut.at
        while not conn.dead:
            try:
                data = src.recv(65536)
            except OSError:
                data = b""
            if not data:
                self._cut(conn, None, False)  # one side closed: close the other (no fault, no log)
                return
            with self._lock:
                silent = self._silent[way]
            if silent:
                with self._lock:
                    self.dropped[way] += len(data)
                scan.broken = True  # the stream has a hole now: no more cuts by packet on this connection
                continue
            base = scan.pos
            if cut is not None and conn.cut_at is None:
                def on_packet(start, t, k, total):
                    if conn.cut_at is None:
                        conn.cut_at = cut.resolve(start, t, k, total)
                    self.packets[way][t] += 1
            else:
                def on_packet(start, t, k, total):
                    self.packets[way][t] += 1
            on_done = None
            if self.record:
                def on_done(first, body):
                    if first >> 4 == CONNECT and len(body) > 2:
                        k = 2 + (body[0] << 8 | body[1])
                        conn.level = body[k] if k < len(body) else conn.level
                    with self._lock:
                        self.wire[way].append((conn.number,) + parse_record(conn.level, first, body))
            scan.feed(data, on_packet, on_done)
            stop = None
            if cut is not None and conn.cut_at is not None and conn.cut_at < base + len(data):
                stop = max(conn.cut_at - base, 0)
                data = data[:stop]
            if plan.delay:
                time.sleep(self.rng.uniform(0, plan.delay))
            try:
                if data:
                    if plan.trickle:
                        for j in range(len(data)):
                            dst.sendall(data[j:j + 1])
                    else:
                        dst.sendall(data)
                    with self._lock:
                        self.bytes[way] += len(data)
            except OSError:
                self._cut(conn, None, False)
                return
            if stop is not None:
                inside = (base + stop) not in scan.bounds
                self._cut(conn, cut, inside, cut.reset)
                return

    def _cut(self, conn, why, inside, reset=False):
        with self._lock:
            if conn.dead:
                return
            conn.dead = True
            self._conns.pop(conn.number, None)
            if why is not None:
                self.cuts.append((time.monotonic(), conn.number, repr(why), inside))
        for s in conn.socks:
            try:
                if reset:  # linger 0: close() sends a RST; SHUT_RD wakes the other direction's recv
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    s.shutdown(socket.SHUT_RD)
                else:
                    s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            try:
                s.close()
            except OSError:
                pass
