# The receiver's write-ahead log: every received message is written here, in arrival order and under a consumer
# offset, before the consumer may see that offset; it is acknowledged to the broker once it is durable here
# (sync(): the open segment fsynced), and kept until the consumer committed it (a restarted consumer replays
# uncommitted offsets from here, never from the broker). It never talks to the network.
#
# Layout of a spool directory (one per MQTT session):
#   open-<a>.jsonl        the segment being written (offsets from a); never exposed to the consumer; fsynced by
#                         sync() before the messages in it are acknowledged (recovery keeps its whole lines)
#   seg-<a>-<b>.jsonl     sealed segments, offsets a <= o < b, flushed and fsynced before any offset in them
#                         is exposed; read where the link runs (read_lines): executors never see this disk
#   committed             {"offset": n}: the consumer committed everything below n (written before acking)
#   floor                 {"offset": n}: offsets below n were handed out (heartbeats leave offsets without records)
#   acks.json             what the broker was told (tinymqtt_spark.ackstate)
# A record is one JSON array a line: [offset, pid, qos, dup, retain, topic, payload_b64, props, received_ts].
# The records a process appended are also kept decoded in memory with their segment (up to mem_records of
# them) until the segment is dropped: the consumer reads them from there (records()) instead of parsing the
# file again; what an earlier process spooled is read from disk. The file stays the durable copy.
#
# After a crash the broker redelivers what was never acknowledged (the session is persistent), DUP set,
# under the same packet id. Which spooled records still hold their packet id is the ack state's business
# (tinymqtt_spark.ackstate); the spool only lists the QoS 1/2 records of each segment (keys) for it.
import base64
from binascii import b2a_base64
import json
import os
import re

from tinymqtt_spark.ackstate import fsync_dir

_SEG = re.compile(r"^seg-(\d{20})-(\d{20})\.jsonl$")
_OPEN = re.compile(r"^open-(\d{20})\.jsonl$")


_JSON = {True: "true", False: "false", None: "null"}
_topics = {}  # topic -> its JSON string: topics repeat, and json.dumps is most of the cost of a line


def record_line(off, pid, qos, dup, retain, topic, payload, props, ts):
    """One spool line, byte for byte what json.dumps(record, separators=(",", ":")) + "\n" gives, for a
    fraction of its cost (the link writes one per message, on the thread that receives them)."""
    t = _topics.get(topic)
    if t is None:
        if len(_topics) > 4096:
            _topics.clear()
        t = _topics[topic] = json.dumps(topic)
    return '[%d,%s,%d,%s,%s,%s,"%s",%s,%r]\n' % (
        off, "null" if pid is None else pid, qos, _JSON[bool(dup)], _JSON[bool(retain)], t,
        b2a_base64(payload, newline=False).decode(),
        "null" if props is None else json.dumps(props, separators=(",", ":")), float(ts))


class Segment:
    __slots__ = ("a", "b", "path", "keys", "rows")

    def __init__(self, a, b, path, keys, rows=None):
        self.a, self.b, self.path, self.keys = a, b, path, keys  # keys: [(offset, pid, qos)] of QoS 1/2 records
        self.rows = rows  # the records decoded (payload as bytes), or None: read the file

    def __repr__(self):
        return "<Segment %d..%d %d keyed>" % (self.a, self.b, len(self.keys))


class Spool:
    """Not thread-safe: the owner serialises calls (MqttLink holds a lock around every use)."""

    def __init__(self, path, segment_records=5000, fsync=True, mem_records=100000):
        self.path = path
        self.segment_records = segment_records
        self.fsync = fsync
        self.mem_records = mem_records
        self._in_mem = 0  # records held decoded by sealed segments
        os.makedirs(path, exist_ok=True)
        self.segments = []  # sealed, in offset order
        self.committed = 0
        self.next_offset = 0
        self.durable = 0  # every record below this offset is on disk (fsynced, or flushed with fsync off)
        self.recovered = 0  # records found on disk at start
        self._f = None
        self._a = 0
        self._n = 0
        self._keys = []
        self._rows = []
        self._recover()

    # ------------------------------------------------------------------ recovery

    def _marker(self, name):
        try:
            with open(os.path.join(self.path, name)) as f:
                return int(json.load(f)["offset"])
        except (OSError, ValueError, KeyError):
            return 0

    def _write_marker(self, name, value):
        tmp = os.path.join(self.path, name + ".tmp")
        with open(tmp, "w") as f:
            json.dump({"offset": value}, f)
            f.flush()
            if self.fsync:
                os.fsync(f.fileno())
        os.replace(tmp, os.path.join(self.path, name))

    def _recover(self):
        self.committed = self._marker("committed")
        names = sorted(os.listdir(self.path))
        for name in names:
            m = _SEG.match(name)
            if m:
                self._load(int(m.group(1)), os.path.join(self.path, name), int(m.group(2)))
        for name in names:
            m = _OPEN.match(name)
            if m:  # written by a process that died: keep every whole line, seal it (it was never exposed)
                self._load(int(m.group(1)), os.path.join(self.path, name), None)
        self.next_offset = max([self.committed, self._marker("floor")] + [s.b for s in self.segments])
        self.durable = self.next_offset

    def _load(self, a, path, b):
        keys, last, good = [], a - 1, 0
        with open(path, "rb") as f:
            data = f.read()
        for line in data.split(b"\n"):
            if not line:
                continue
            try:
                r = json.loads(line)
            except ValueError:
                break  # a torn last line: the process died while writing it (its ack never went out)
            good += len(line) + 1
            last = r[0]
            self.recovered += 1
            if r[2]:
                keys.append((r[0], r[1], r[2]))
        if b is None:
            if good < len(data):
                with open(path, "r+b") as f:
                    f.truncate(good)
            if last < a:
                os.remove(path)
                return
            b = last + 1
            sealed = os.path.join(self.path, "seg-%020d-%020d.jsonl" % (a, b))
            os.replace(path, sealed)
            path = sealed
        self.segments.append(Segment(a, b, path, keys))
        self.segments.sort(key=lambda s: s.a)

    # ------------------------------------------------------------------ writing

    def append(self, pid, qos, dup, retain, topic, payload, props, ts):
        """Writes one message under the next offset and returns that offset."""
        if self._f is None:
            self._a, self._n, self._keys, self._rows = self.next_offset, 0, [], []
            self._f = open(os.path.join(self.path, "open-%020d.jsonl" % self._a), "w", buffering=1 << 20)
            self._named = False  # the new file's directory entry is not on disk yet (sync() does it once)
        off = self.next_offset
        self._f.write(record_line(off, pid, qos, dup, retain, topic, payload, props, ts))
        self.next_offset = off + 1
        self._n += 1
        if qos:
            self._keys.append((off, pid, qos))
        self._rows.append((off, pid, qos, dup, retain, topic, payload, props, ts))
        if self._n >= self.segment_records:
            self.seal()
        return off

    def flush(self):
        """Hands the open segment to the OS (no fsync): a killed process then loses no QoS 0 message it spooled."""
        if self._f is not None:
            self._f.flush()

    def sync(self):
        """Makes every record appended so far durable (the open segment flushed and fsynced, and its name once)
        without sealing it: what may be acknowledged to the broker. Returns the durable end offset."""
        f = self._f
        if f is not None and self.durable < self.next_offset:
            f.flush()
            if self.fsync:
                os.fsync(f.fileno())
                if not self._named:
                    fsync_dir(self.path)
            self._named = True
        self.durable = self.next_offset
        return self.durable

    def seal(self):
        """Makes the open segment durable and readable (seg-a-b); offsets below next_offset may then be exposed."""
        f = self._f
        if f is None:
            return
        self._f = None
        f.flush()
        if self.fsync:
            os.fsync(f.fileno())
        f.close()
        b = self.next_offset
        path = os.path.join(self.path, "seg-%020d-%020d.jsonl" % (self._a, b))
        os.replace(os.path.join(self.path, "open-%020d.jsonl" % self._a), path)
        if self.fsync:
            fsync_dir(self.path)
        self.segments.append(Segment(self._a, b, path, self._keys, self._rows))
        self.durable = b
        self._in_mem += len(self._rows)
        self._rows = []
        for seg in self.segments:  # over the bound: the oldest are read from their files again
            if self._in_mem <= self.mem_records:
                break
            if seg.rows is not None:
                self._in_mem -= len(seg.rows)
                seg.rows = None

    def skip(self, n=1):
        """Offsets without a record (a heartbeat): the consumer gets an empty range to commit. Persisted, so
        a restarted spool never hands out an offset the consumer has already seen."""
        self.seal()
        self.next_offset += n
        self._write_marker("floor", self.next_offset)
        self.durable = self.next_offset

    def commit(self, end):
        """Records that the consumer committed every offset below `end` (before anything is acknowledged)."""
        if end <= self.committed:
            return
        if end > self.next_offset:  # never hand out an offset the consumer has committed past
            self.skip(end - self.next_offset)
        self.committed = end
        self._write_marker("committed", end)

    # ------------------------------------------------------------------ reading

    def keys_from(self, lo):
        """(offset, pid, qos) of the QoS 1/2 records at offsets >= lo, sealed or open."""
        out = [k for s in self.segments if s.b > lo for k in s.keys if k[0] >= lo]
        return out + [k for k in self._keys if k[0] >= lo] if self._f is not None else out

    def has_records(self, lo, hi):
        """True when some offset in [lo, hi) holds a message (heartbeat offsets do not)."""
        if self._f is not None and self._n and lo < self.next_offset and hi > self._a:
            return True
        for s in self.segments:
            if s.a < hi and s.b > lo:
                return True  # segments are dense: a..b-1 all hold records
        return False

    def paths(self, lo, hi):
        """Sealed segment files holding offsets in [lo, hi)."""
        return [s.path for s in self.segments if s.a < hi and s.b > lo]

    def sources(self, lo, hi):
        """What records() needs for [lo, hi): (decoded rows or None, path) of each sealed segment. Taken under
        the owner's lock; the rows lists of sealed segments never change, so they are read outside it."""
        return [(s.rows, s.path) for s in self.segments if s.a < hi and s.b > lo]

    def drop_through(self, end):
        """Deletes the segments wholly below `end` (committed, and every ack in them written: no one needs
        them again, neither the consumer nor the recognition of a redelivery)."""
        end = min(end, self.committed)
        keep = []
        for s in self.segments:
            if s.b <= end:
                if s.rows is not None:
                    self._in_mem -= len(s.rows)
                try:
                    os.remove(s.path)
                except FileNotFoundError:
                    pass
            else:
                keep.append(s)
        self.segments = keep

    def close(self):
        if self._f is not None:
            self._f.flush()
            self._f.close()
            self._f = None


def read_lines(paths, lo, hi):
    """The raw lines (bytes, one JSON record each) with lo <= offset < hi from sealed segment files."""
    for path in paths:
        with open(path, "rb") as f:
            for line in f:
                off = int(line[1:line.index(b",")])  # a line starts "[offset,"
                if lo <= off < hi:
                    yield line


def records(sources, lo, hi):
    """(offset, pid, qos, dup, retain, topic, payload bytes, props, received_ts) with lo <= offset < hi, from
    memory where the segment holds them, else parsed from its file."""
    for rows, path in sources:
        if rows is None:
            for r in read_range([path], lo, hi):
                r[6] = base64.b64decode(r[6])
                yield tuple(r)
        elif rows and rows[0][0] >= lo and rows[-1][0] < hi:
            yield from rows
        else:
            for r in rows:
                if lo <= r[0] < hi:
                    yield r


def read_range(paths, lo, hi):
    """Yields the records with lo <= offset < hi from sealed segment files."""
    for line in read_lines(paths, lo, hi):
        yield json.loads(line)
