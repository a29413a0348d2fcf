# A Spark Structured Streaming source for MQTT on tinymqtt, with Spark 4's Python Data Source API
# (docs/spark.md is the user's page: options, broker settings, guarantees):
#
#     spark.dataSource.register(MQTTDataSource)
#     df = (spark.readStream.format("mqtt").option("broker", "127.0.0.1:1883")
#           .option("topic", "fleet/+/telemetry,fleet/+/status").option("checkpointLocation", ckpt).load())
#
# Rows: topic, payload (binary), qos, retain, dup, properties (map), received_ts, offset, pid.
#
# Where the connection lives. Spark runs a streaming Python source in three kinds of processes: a short-lived
# one on the driver that creates the DataSource when the query's DataFrame is defined (load()), one long-lived
# worker on the driver that answers initialOffset/latestOffset/partitions/commit for the whole life of the
# query, and executor workers that run read(partition) for one batch. An MQTT acknowledgement must go out on
# the session that received the message, the spool it is written to must outlive the batch until Spark
# commits it, and commit() is only ever called on the driver's long-lived worker: so the MQTT session (tinymqtt_spark.link.MqttLink, a thread) lives there.
# Executors never touch MQTT nor the driver's disk: the link writes every message to a spool
# (tinymqtt_spark.spool) before latestOffset() may expose its offset, partitions() puts the batch's records into
# the partitions themselves (Arrow IPC), and read() only hands them over. The spool sits in the checkpoint
# directory (<checkpointLocation>/mqtt-spool, on the driver), so a replayed batch gets the same records.
#
# The start and the identity. The client id is derived from the spool's path, so from the checkpoint: the
# same query resumes its session, two queries never share one. load() (DataSource.__init__) creates the
# persistent session and its subscription on the broker (link.open_session), so QoS 1/2 messages published
# from then on wait for the query; it also refuses a session that a running query holds. The link writes
# <spool>/live once it is connected and subscribed (tinymqtt_spark.wait_live() waits for it).
#
# At-least-once end to end (exactly-once for QoS 2): QoS 1/2 arrive in manual-ack mode and are acknowledged
# once the spool (in the checkpoint) has them on disk; the spool keeps them until Spark's commit(end), so a
# crash at any point leaves every uncommitted message either in the broker's session (not yet on disk) or in the
# spool, where the restarted query replays the offsets its checkpoint logged (tinymqtt_spark.link).
# Traps handled here:
#  - Spark calls commit() for a batch only when it plans the next one: an idle stream would never let the spool
#    drop its last batch, so latestOffset() hands out a one-offset heartbeat (no rows) when uncommitted records
#    wait and nothing new came in. A run-once trigger ends without a next batch: the reader then reads the
#    last committed batch from the checkpoint's own log (commits/, offsets/) when it stops, and acknowledges it.
#  - The reader is also instantiated (and pickled) in short-lived planner processes: it connects lazily, on
#    the first call the long-lived worker makes, and never pickles its link.
#  - Option keys arrive lower-case (spoolDir -> spooldir).
#  - Executors unpickle this module's reader and partitions: it imports no MQTT code at the top.
#  - Spark's Python source API has no hook for custom progress metrics (sources[].metrics stays {}): the link's
#    state goes to <spool>/link-stats.json each second (tinymqtt_spark.link_stats()) and to the
#    "tinymqtt_spark" logger (warnings: session lost, subscription downgraded, takeover).
import hashlib
import json
import os
import time
from array import array
from itertools import accumulate

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, SupportsTriggerAvailableNow


SCHEMA = ("topic STRING, payload BINARY, qos INT, retain BOOLEAN, dup BOOLEAN, properties MAP<STRING, STRING>, "
          "received_ts TIMESTAMP, offset BIGINT, pid INT")
SPOOL = "mqtt-spool"  # the source's directory inside the query's checkpoint
LIVE_WAIT_S = 5.0  # the first latestOffset() waits at most this long for the link to be live and quiet
FIRST_QUIET_S = 0.1  # ... quiet: nothing received nor acknowledged for this long (5 group commits)


def _truth(v):
    return str(v).strip().lower() in ("1", "true", "yes", "on")


def _local_path(p):
    return p[len("file:"):] if p.startswith("file:") else p


def spool_dir_for(path):
    """The source's spool for a checkpoint location (<checkpoint>/mqtt-spool); a spool directory itself (one
    named mqtt-spool, or holding a link's lock file) is returned as is."""
    path = os.path.normpath(_local_path(str(path)))
    if os.path.basename(path) == SPOOL or (not os.path.isdir(os.path.join(path, SPOOL))
                                           and os.path.exists(os.path.join(path, "lock"))):
        return path
    return os.path.join(path, SPOOL)


def session_client_id(spool_dir):
    """The MQTT client id of the query whose source spools in spool_dir: one per checkpoint, 22 characters."""
    return "spark-" + hashlib.sha1(os.path.realpath(spool_dir).encode()).hexdigest()[:16]


class Config:
    """The source's options (keys are case-insensitive: Spark hands them over lower-cased). Every bad value
    raises ValueError naming the option, when the DataFrame is defined (load())."""

    def __init__(self, options):
        o = {str(k).lower(): v for k, v in dict(options).items()}
        broker = o.get("broker") or "%s:%s" % (o.get("host", "127.0.0.1"), o.get("port", "1883"))
        host, _, port = broker.rpartition(":")
        if not host:
            host, port = broker, "1883"
        self.host, self.port = host, self._int(o, "port", port)
        self.topics = [t.strip() for t in (o.get("topic") or o.get("topics") or "").split(",") if t.strip()]
        if not self.topics:
            raise ValueError("the mqtt source needs option('topic', 'a/filter[,another/#]')")
        self.qos = self._int(o, "qos", o.get("qos", 2))
        if self.qos not in (0, 1, 2):
            raise ValueError("option qos=%r: 0, 1 or 2" % o.get("qos"))
        self.checkpoint = o.get("checkpointlocation")
        spool = o.get("spooldir") or (spool_dir_for(self.checkpoint) if self.checkpoint else None)
        if not spool:
            raise ValueError("the mqtt source needs option('checkpointLocation', PATH): the same path as the "
                             "query's own checkpointLocation (its spool and its MQTT client id derive from it)")
        spool = _local_path(spool)
        if not os.path.isabs(spool):
            raise ValueError("option checkpointLocation/spoolDir %r: an absolute path on the driver (the source's "
                             "workers do not run in your working directory)" % spool)
        self.spool_dir = os.path.normpath(spool)
        if self.checkpoint:
            self.checkpoint = os.path.normpath(_local_path(self.checkpoint))
        self.client_id = o.get("clientid") or session_client_id(self.spool_dir)
        self.session_expiry = self._int(o, "sessionexpiry", o.get("sessionexpiry", 3600))
        self.max_unacked = self._int(o, "maxunacked", o.get("maxunacked", 20000))
        if not 0 < self.max_unacked <= 60000:
            raise ValueError("option maxUnacked=%r: between 1 and 60000 (a session has 65,535 packet ids)"
                             % self.max_unacked)
        self.max_spooled = self._int(o, "maxspooled", o.get("maxspooled", 1000000))
        if self.max_spooled < 1:
            raise ValueError("option maxSpooled=%r: at least 1 (records spooled and not yet committed)"
                             % self.max_spooled)
        self.receive_maximum = self._int(o, "receivemaximum", o["receivemaximum"]) if o.get("receivemaximum") else None
        self.keepalive = self._int(o, "keepalive", o.get("keepalive", 30))
        self.max_packet_size = self._int(o, "maxpacketsize", o.get("maxpacketsize", 1 << 20))
        self.segment_records = self._int(o, "segmentrecords", o.get("segmentrecords", 5000))
        self.partitions = max(1, self._int(o, "numpartitions", o.get("numpartitions", 2)))
        self.heartbeat = _truth(o.get("heartbeat", "true"))
        self.fsync = _truth(o.get("fsync", "true"))
        self.max_records = self._int(o, "maxrecordspertrigger", o.get("maxrecordspertrigger", 50000))
        self.fail_on_data_loss = _truth(o.get("failondataloss", "true"))
        self.create_session = _truth(o.get("createsession", "true"))
        self.connect_timeout = float(o.get("connecttimeout", 30))
        # How long load() waits for a session another process holds (a query stopping may take seconds to
        # let go of it) before it refuses: a second query on one session is refused either way.
        try:
            self.lock_timeout = float(o.get("locktimeout", 10))
        except ValueError:
            raise ValueError("option lockTimeout=%r: seconds (a number)" % o.get("locktimeout")) from None
        if not self.lock_timeout >= 0:
            raise ValueError("option lockTimeout=%r: seconds, 0 or more" % o.get("locktimeout"))
        self.quiet_s = self._int(o, "availablenowquietms", o.get("availablenowquietms", 1000)) / 1000
        self.available_now_max_s = float(o.get("availablenowmaxseconds", 300))
        self.username, self.password = o.get("username"), o.get("password")
        tls = {k: o[n] for k, n in (("cafile", "tls.cafile"), ("certfile", "tls.certfile"),
                                    ("keyfile", "tls.keyfile"), ("server_hostname", "tls.servername")) if o.get(n)}
        self.tls = tls if (tls or _truth(o.get("tls", "false"))) else None

    @staticmethod
    def _int(o, name, v):
        try:
            return int(v)
        except (TypeError, ValueError):
            raise ValueError("option %s=%r: an integer" % (name, v)) from None

    def link(self):
        from tinymqtt_spark.link import MqttLink  # here, not at the top: executors unpickle this module, never link
        return MqttLink(self.host, self.port, self.client_id, self.topics, self.spool_dir, qos=self.qos,
                        session_expiry=self.session_expiry, receive_maximum=self.receive_maximum,
                        keepalive=self.keepalive, max_packet_size=self.max_packet_size,
                        segment_records=self.segment_records, fsync=self.fsync,
                        username=self.username, password=self.password, max_unacked=self.max_unacked,
                        tls=self.tls, fail_on_data_loss=self.fail_on_data_loss, max_spooled=self.max_spooled,
                        committed_end=self._committed_end if self.checkpoint else None)

    def _committed_end(self):
        return committed_end(self.checkpoint, self.client_id)

    def open_session(self):
        from tinymqtt_spark.link import open_session
        return open_session(self.host, self.port, self.client_id, self.topics, self.spool_dir, qos=self.qos,
                            session_expiry=self.session_expiry, tls=self.tls, username=self.username,
                            password=self.password, timeout=self.connect_timeout, lock_timeout=self.lock_timeout)


class MQTTDataSource(DataSource):
    """format("mqtt"): see docs/spark.md for the options and the guarantees. Creating it (load()) validates the
    options and creates the query's persistent session and subscription on the broker."""

    def __init__(self, options):
        super().__init__(options)
        self.config = Config(options)
        if self.config.create_session:
            self.config.open_session()

    @classmethod
    def name(cls):
        return "mqtt"

    def schema(self):
        return SCHEMA

    def streamReader(self, schema):
        return MQTTStreamReader(self.config)


def arrow_schema():
    """The Arrow schema Spark expects a RecordBatch from read() to have (checked for equality)."""
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import (StructType, StructField, StringType, BinaryType, IntegerType, BooleanType,
                                   MapType, TimestampType, LongType)
    st = StructType([StructField("topic", StringType()), StructField("payload", BinaryType()),
                     StructField("qos", IntegerType()), StructField("retain", BooleanType()),
                     StructField("dup", BooleanType()), StructField("properties", MapType(StringType(), StringType())),
                     StructField("received_ts", TimestampType()), StructField("offset", LongType()),
                     StructField("pid", IntegerType())])
    return to_arrow_schema(st, timezone="UTC")


def records_to_batch(rows, schema):
    """Decoded spool records (tinymqtt_spark.spool.records) -> one Arrow RecordBatch, built column by column
    from buffers. Not with pyarrow.array(): its first call in a process imports pandas (pyarrow 26 asks pandas
    whether the values are a pandas object), 0.3-1.2 s of CPU in the driver's source process at every query
    start, while its link is taking in the session's backlog; this way pandas is never imported there."""
    import pyarrow as pa
    off, pid, qos, dup, retain, topic, payload, props, ts = zip(*rows)
    t = [f.type for f in schema]
    cols = [_binary(t[0], [x.encode() for x in topic]), _binary(t[1], payload), _fixed(t[2], "i", qos),
            _bools(t[3], retain), _bools(t[4], dup), _maps(t[5], props),
            _fixed(t[6], "q", [round(x * 1e6) for x in ts]), _fixed(t[7], "q", off), _fixed(t[8], "i", pid)]
    return pa.RecordBatch.from_arrays(cols, schema=schema)


# Arrow columns from Python values, by their buffers (the Arrow columnar format): a validity bitmap (None: no
# nulls), then the values: fixed-width ints, a bitmap for booleans, int32 offsets and the bytes for
# strings/binary (a string is its UTF-8 bytes), and a map is a list of (key, value) structs.

def _bitmap(flags):
    out = bytearray((len(flags) + 7) // 8)
    for i, f in enumerate(flags):
        if f:
            out[i >> 3] |= 1 << (i & 7)
    return bytes(out)


def _fixed(typ, code, values):  # code: the array module's typecode of the same width ("i" int32, "q" int64)
    import pyarrow as pa
    if None in values:  # pid: a QoS 0 message has no packet id
        valid = pa.py_buffer(_bitmap([v is not None for v in values]))
        values = [0 if v is None else v for v in values]
    else:
        valid = None
    return pa.Array.from_buffers(typ, len(values), [valid, pa.py_buffer(array(code, values))])


def _bools(typ, values):
    import pyarrow as pa
    return pa.Array.from_buffers(typ, len(values), [None, pa.py_buffer(_bitmap(values))])


def _binary(typ, values):
    import pyarrow as pa
    offsets = array("i", [0])
    offsets.extend(accumulate(map(len, values)))
    return pa.Array.from_buffers(typ, len(values), [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(values))])


def _maps(typ, maps):  # a record without properties (None or {}) is a null map
    import pyarrow as pa
    keys, items, offsets = [], [], array("i", [0])
    for m in maps:
        if m:
            for k, v in m.items():
                keys.append(k.encode())
                items.append(v.encode())
        offsets.append(len(keys))
    entries = pa.StructArray.from_arrays([_binary(pa.string(), keys), _binary(pa.string(), items)],
                                         fields=[typ.key_field, typ.item_field])
    valid = None if all(maps) else pa.py_buffer(_bitmap([bool(m) for m in maps]))
    return pa.Array.from_buffers(typ, len(maps), [valid, pa.py_buffer(offsets)], children=[entries])


def batch_to_ipc(batch):
    """An Arrow RecordBatch as Arrow IPC stream bytes: what a partition carries to its executor."""
    import pyarrow as pa
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as w:
        w.write_batch(batch)
    return sink.getvalue().to_pybytes()


class MQTTPartition(InputPartition):
    """The batch's records themselves, as Arrow IPC bytes, so that an executor needs nothing but this object
    (and does no work per row: the driver built the columns once, from the records it holds decoded)."""

    def __init__(self, ipc, rows):
        self.ipc, self.rows = ipc, rows


class MQTTStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, config):
        self.config = config
        self._link = None
        self._available_now = None  # monotonic time of prepareForTriggerAvailableNow()
        self._waited_live = False  # the first latestOffset() waited for the link to be live

    def __getstate__(self):  # the planner pickles the reader for read(): never the live link
        return {"config": self.config, "_link": None, "_available_now": None, "_waited_live": False}

    def link(self):
        if self._link is None:
            self._link = self.config.link().start()
            self._reconcile()
        self._link.check()
        return self._link

    def _offset(self, n):
        return {"offset": n, "mqtt": self.config.client_id}

    def _reconcile(self):
        """Commits what the checkpoint says Spark committed: a run-once trigger's last batch (no next batch
        came to commit it), or the batch a driver crash interrupted between Spark's commit and ours."""
        end = committed_end(self.config.checkpoint, self.config.client_id)
        if end is not None:
            self._link.commit(end)
            self._link.wait_acked(end, timeout=5.0)

    def initialOffset(self):
        link = self.link()
        with link.lock:
            return self._offset(link.spool.committed)

    def getDefaultReadLimit(self):
        self.link()  # the long-lived worker asks this first: connect now, not at the first offset
        return ReadMaxRows(self.config.max_records) if self.config.max_records else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self):
        """A run-once trigger: the run takes what the broker holds for the session now (everything it sends
        until the link has been quiet for availableNowQuietMs, with acks flowing as batches commit), and ends."""
        self._available_now = time.monotonic()
        self.link()

    def _wait_quiet(self, link):
        # The broker sends a session's backlog as fast as its window allows, and more once acks free room:
        # the backlog is taken when nothing came (nor was acknowledged) for quiet_s since the link went live.
        c = self.config
        deadline = self._available_now + c.available_now_max_s
        while time.monotonic() < deadline:
            link.check()
            s = link.snapshot_quiet()
            if s["paused"]:
                return  # the window is full: this batch first
            if s["live"] and s["quiet_s"] >= c.quiet_s:
                return
            time.sleep(0.05)

    def _wait_live(self, link, start, limit):
        # Spark runs a new query's first batch whatever latestOffset() says (nothing is committed yet), and a
        # Python source's batch costs ~1 s even empty (docs/spark.md, "Speed"). Asked the moment the link
        # starts, it would be empty. So the first call waits until the link is live (SUBACK) and the burst a
        # resumed session's queue starts with (mosquitto sends up to our Receive Maximum at once, before or
        # after the SUBACK) has paused: the first batch takes that window, later batches what came meanwhile.
        # Waiting for the whole backlog instead (quiet for longer) measured no faster: the link then drains
        # while Spark runs the first batch, not before it. Nor is there any point past a full batch.
        deadline = time.monotonic() + LIVE_WAIT_S
        full = start + max(1, limit.max_rows) if isinstance(limit, ReadMaxRows) else None
        while time.monotonic() < deadline:
            link.check()
            s = link.snapshot_quiet()
            if s["paused"] or (s["live"] and s["quiet_s"] >= FIRST_QUIET_S):
                return
            if full is not None and link.spooled_to() >= full:
                return
            time.sleep(0.01)

    def latestOffset(self, start, limit):
        link = self.link()
        s = int(start["offset"])
        if self._available_now is not None:
            self._wait_quiet(link)
        elif not self._waited_live:
            self._waited_live = True
            self._wait_live(link, s, limit)
        end = link.expose(floor=s)
        if end == s and self.config.heartbeat and link.uncommitted_records(s):
            end = link.heartbeat()  # nothing new, but the last batch waits for commit(): plan an empty one
        if isinstance(limit, ReadMaxRows):
            end = min(end, s + max(1, limit.max_rows))
        return self._offset(end)

    def reportLatestOffset(self):
        link = self.link()
        with link.lock:
            return self._offset(link.spool.next_offset)

    def partitions(self, start, end):
        s, e = int(start["offset"]), int(end["offset"])
        if e <= s:
            return []
        link = self.link()
        if link.expose() < e:
            raise RuntimeError("the MQTT spool %s does not reach offset %d (Spark's checkpoint is newer than the "
                               "spool: it was deleted or belongs to another query)" % (self.config.spool_dir, e))
        rows = list(link.records(s, e))
        if not rows:
            return []
        batch = records_to_batch(rows, arrow_schema())
        k = -(-len(rows) // self.config.partitions)
        return [MQTTPartition(batch_to_ipc(batch.slice(i, k)), min(k, len(rows) - i)) for i in range(0, len(rows), k)]

    def read(self, partition):
        import pyarrow as pa
        yield from pa.ipc.open_stream(partition.ipc)

    def commit(self, end):
        link = self.link()
        e = int(end["offset"])
        link.commit(e)
        # The acks go out on the link's thread; wait for them: Spark may end this process right after (the
        # last commit of a run-once trigger), and an ack never written is a message the broker sends again.
        link.wait_acked(e, timeout=5.0)

    def stop(self):
        if self._link is not None:
            try:
                self._reconcile()
            finally:
                self._link.stop()
                self._link = None


def committed_end(checkpoint, client_id):
    """The end offset of this source in the last batch the query's checkpoint says is committed (commits/N
    written after the sink committed batch N; offsets/N holds each source's end offset, one JSON a line), or
    None. Our offsets carry the client id, which is how the line is told from other sources'."""
    if not checkpoint:
        return None
    try:
        done = [int(n) for n in os.listdir(os.path.join(checkpoint, "commits")) if n.isdigit()]
    except OSError:
        return None
    if not done:
        return None
    try:
        with open(os.path.join(checkpoint, "offsets", str(max(done)))) as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in lines[2:]:  # "v1", the batch's metadata, then one offset per source
        try:
            o = json.loads(line)
        except ValueError:
            continue
        if isinstance(o, dict) and o.get("mqtt") == client_id:
            return int(o["offset"])
    return None
