# What a receiver has told the broker about the QoS 1/2 messages it spooled: the receiver's half of the MQTT
# session state (spec 4.1), persisted *before* the broker is told, so that a process starting on the same
# session knows which packet ids are still held by messages it has and which are free for the broker to reuse.
#   acked   every QoS 1/2 record below this offset had its PUBACK / PUBREC written, except those in `held`
#   held    {offset: (pid, qos)} below `acked` whose ack is still owed (an earlier process spooled them; their
#           redelivery has not come yet)
#   rel     QoS 2 packet ids whose PUBREC went out and whose PUBREL has not been answered (no PUBCOMP yet)
# A redelivery is recognised by packet id among the unacknowledged messages and `rel` alone: an acknowledged
# message is never consulted, so content plays no part (identical payloads are independent messages).
#
# Cheap to persist: acks.log is a journal of changes ("a N" acked, "h+ off pid qos" / "h- off", "r+ pid" /
# "r- pid"), appended and fsynced once per save with only what changed since the last save. Both sets are
# bounded by the link's unacknowledged window (maxUnacked), so a save costs what one ack cycle changed, not the
# whole state; the journal is rewritten (compacted) once it holds several times the live entries. A torn last
# line (a crash while appending) is ignored: those changes were never followed by an ack.
# `rel` (thousands of ids when the broker's PUBRELs lag behind its backlog) records its own changes as they are
# made (_Journaled), so a save never compares it whole with its last saved copy; `held` is small (what an
# earlier process left owed) and is compared.
import os

_COMPACT_MIN = 20000  # journal lines before a compaction is considered


class _Journaled(set):
    """A set that lists its changes, in order, as journal lines ("r+ pid" / "r- pid") until they are taken."""

    def __init__(self, items=()):
        super().__init__(items)
        self.changes = []

    def add(self, pid):
        if pid not in self:
            set.add(self, pid)
            self.changes.append("r+ %d" % pid)

    def discard(self, pid):
        if pid in self:
            set.discard(self, pid)
            self.changes.append("r- %d" % pid)

    def update(self, pids):
        for pid in pids:
            self.add(pid)

    def difference_update(self, pids):
        for pid in pids:
            self.discard(pid)

    def _refuse(self, *args):
        raise TypeError("AckState.rel: add, discard, update and difference_update only (they are journaled)")

    remove = pop = clear = __ior__ = __isub__ = __iand__ = __ixor__ = intersection_update = _refuse
    symmetric_difference_update = _refuse


class AckState:
    def __init__(self, directory, fsync=True):
        self.path = os.path.join(directory, "acks.log")
        self.fsync = fsync
        self.acked, self.held, self.rel = 0, {}, set()
        self._saved = (0, {})  # what the journal says (rel: its own changes list)
        self._lines = 0
        self._f = None
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            data = b""
        for line in data.split(b"\n")[:-1]:  # the part after the last newline is torn (or empty)
            self._replay(line.decode().split())
            self._lines += 1
        self.rel.changes = []  # (the journal says all that)
        self._rel_replaced = False
        self._saved = (self.acked, dict(self.held))

    @property
    def rel(self):
        return self._rel

    @rel.setter
    def rel(self, pids):  # a new set (the session was lost): the next save rewrites the journal
        self._rel = _Journaled(pids)
        self._rel_replaced = True

    def _replay(self, w):
        op = w[0]
        if op == "a":
            self.acked = int(w[1])
        elif op == "h+":
            self.held[int(w[1])] = (int(w[2]), int(w[3]))
        elif op == "h-":
            self.held.pop(int(w[1]), None)
        elif op == "r+":
            self.rel.add(int(w[1]))
        elif op == "r-":
            self.rel.discard(int(w[1]))

    def _delta(self):
        acked, held = self._saved
        out = []
        if self.acked != acked:
            out.append("a %d" % self.acked)
        out += ["h- %d" % o for o in held if o not in self.held]
        out += ["h+ %d %d %d" % (o, p, q) for o, (p, q) in self.held.items() if held.get(o) != (p, q)]
        return out + self._rel.changes

    def save(self):
        """Appends what changed since the last save; durable (one fsync) when fsync is on. A rename the disk
        has not seen is not a promise, so a compaction also fsyncs the directory."""
        if self._rel_replaced:
            self._compact()
            return
        lines = self._delta()
        if not lines:
            return
        live = len(self.held) + len(self.rel) + 1
        if self._lines + len(lines) > max(_COMPACT_MIN, 4 * live):
            self._compact()
            return
        if self._f is None:
            new = not os.path.exists(self.path)
            self._f = open(self.path, "a")
            if new and self.fsync:
                fsync_dir(os.path.dirname(self.path))
        self._f.write("\n".join(lines) + "\n")
        self._f.flush()
        if self.fsync:
            os.fsync(self._f.fileno())
        self._lines += len(lines)
        self._saved = (self.acked, dict(self.held))
        self._rel.changes = []

    def _compact(self):
        lines = ["a %d" % self.acked] + ["h+ %d %d %d" % (o, p, q) for o, (p, q) in sorted(self.held.items())]
        lines += ["r+ %d" % p for p in sorted(self.rel)]
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            f.write("\n".join(lines) + "\n")
            f.flush()
            if self.fsync:
                os.fsync(f.fileno())
        if self._f is not None:
            self._f.close()
            self._f = None
        os.replace(tmp, self.path)
        if self.fsync:
            fsync_dir(os.path.dirname(self.path))
        self._lines = len(lines)
        self._saved = (self.acked, dict(self.held))
        self._rel.changes = []
        self._rel_replaced = False

    def close(self):
        if self._f is not None:
            self._f.close()
            self._f = None


def fsync_dir(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
