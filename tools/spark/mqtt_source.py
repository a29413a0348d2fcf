# A Spark Structured Streaming source for MQTT on tinymqtt, with Spark 4's Python Data Source API:
#
#     spark.dataSource.register(MQTTDataSource)
#     df = (spark.readStream.format("mqtt").option("broker", "127.0.0.1:1883")
#           .option("topic", "fleet/+/telemetry,fleet/+/status").option("spoolDir", "/data/ckpt/mqtt-spool").load())
#
# Rows: topic, payload (binary), qos, retain, dup, properties (map), received_ts, offset, pid.
#
# Where the connection lives. Spark runs a streaming Python source in two kinds of processes: one long-lived
# worker on the driver that answers initialOffset/latestOffset/partitions/commit for the whole life of the
# query, and executor workers that run read(partition) for one batch and are reused or dropped at will. An
# MQTT acknowledgement must go out on the session that received the message, after Spark committed the batch,
# and commit() is only ever called on the driver's worker: so the MQTT session (tools.spark.link.MqttLink, a
# thread) lives there, next to commit(). Executors never touch MQTT nor the driver's disk: the link writes
# every message to a spool (tools.spark.spool) before latestOffset() may expose its offset, partitions() reads
# the batch's records from the spool and puts them into the partitions themselves (Spark ships each to its
# task), and read() only parses them. So the same job runs on a cluster whose executors share no disk with the
# driver. The spool sits beside the checkpoint (option spoolDir, on the driver), so a replayed batch gets the
# same records; maxRecordsPerTrigger (default 50000) bounds what one batch carries.
#
# At-least-once end to end (exactly-once for QoS 2): QoS 1/2 arrive in manual-ack mode and are acknowledged
# only in commit(end) (commit marker first, then PUBACK/PUBREC), so a crash at any point leaves every
# uncommitted message in the broker's persistent session (clean start off, Session Expiry) and the link
# recognises the redelivered copies by packet id and session state (tools/spark/link.py). Traps handled here:
#  - Spark calls commit() for a batch only when it plans the next one: an idle stream would never ack its last
#    batch, so latestOffset() hands out a one-offset heartbeat (no rows) when committed-but-unacknowledged data
#    is waiting and nothing new came in.
#  - The reader is also instantiated (and pickled) in short-lived planner processes: it connects lazily, on
#    the first offset call, and never pickles its link.
#  - Option keys arrive lower-case (spoolDir -> spooldir).
#  - Executors unpickle this module's reader and partitions: it imports no MQTT code at the top, and on a
#    cluster the driver ships tools/, lib/ and the Linux port as a zip (tools.spark.pipeline.code_zip).
#  - The broker must let enough messages wait for their acks: the Receive Maximum we send (65000 by default,
#    near the 65535 packet ids a session has) sets mosquitto's in-flight window for an MQTT 5 client, and its
#    max_queued_messages must hold the rest, else it drops them silently.
#  - mosquitto 2.0.11 stops honouring Receive Maximum once acks come back (its whole queue for the client goes
#    in flight) and past 65535 unacknowledged messages reuses packet ids still in flight. The session takes
#    such a PUBLISH for a resend (and counts it); the link reconnects once idle so the broker resends it. Keep
#    what a subscriber can have outstanding (outage x rate) under ~65000 messages, or split it over several
#    sessions (the $share scale-out path).
import hashlib
import os
import tempfile

import tools.spark  # noqa: F401  (puts lib/ and the Linux port on sys.path)
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows


SCHEMA = ("topic STRING, payload BINARY, qos INT, retain BOOLEAN, dup BOOLEAN, properties MAP<STRING, STRING>, "
          "received_ts TIMESTAMP, offset BIGINT, pid INT")


def _truth(v):
    return str(v).strip().lower() in ("1", "true", "yes", "on")


class Config:
    """The source's options (keys are case-insensitive: Spark hands them over lower-cased)."""

    def __init__(self, options):
        o = {str(k).lower(): v for k, v in dict(options).items()}
        broker = o.get("broker") or "%s:%s" % (o.get("host", "127.0.0.1"), o.get("port", "1883"))
        host, _, port = broker.rpartition(":")
        if not host:
            host, port = broker, "1883"
        self.host, self.port = host, int(port)
        self.topics = [t.strip() for t in (o.get("topic") or o.get("topics") or "").split(",") if t.strip()]
        if not self.topics:
            raise ValueError("the mqtt source needs option('topic', 'a/filter[,another/#]')")
        self.qos = int(o.get("qos", 2))
        default_id = "spark-" + hashlib.sha1(("%s|%s" % (broker, ",".join(self.topics))).encode()).hexdigest()[:12]
        self.client_id = o.get("clientid") or default_id
        self.spool_dir = o.get("spooldir") or os.path.join(tempfile.gettempdir(), "tinymqtt-spark", self.client_id)
        self.session_expiry = int(o.get("sessionexpiry", 3600))
        self.receive_maximum = int(o.get("receivemaximum", 65000))
        self.keepalive = int(o.get("keepalive", 30))
        self.max_packet_size = int(o.get("maxpacketsize", 1 << 20))
        self.segment_records = int(o.get("segmentrecords", 5000))
        self.partitions = max(1, int(o.get("numpartitions", 2)))
        self.heartbeat = _truth(o.get("heartbeat", "true"))
        self.fsync = _truth(o.get("fsync", "true"))
        self.max_records = int(o.get("maxrecordspertrigger", 50000))
        self.username, self.password = o.get("username"), o.get("password")

    def link(self):
        from tools.spark.link import MqttLink  # here, not at the top: executors unpickle this module, never link
        return MqttLink(self.host, self.port, self.client_id, self.topics, self.spool_dir, qos=self.qos,
                        session_expiry=self.session_expiry, receive_maximum=self.receive_maximum,
                        keepalive=self.keepalive, max_packet_size=self.max_packet_size,
                        segment_records=self.segment_records, fsync=self.fsync,
                        username=self.username, password=self.password)


class MQTTDataSource(DataSource):
    """format("mqtt"): see the module comment for the options and the guarantees."""

    @classmethod
    def name(cls):
        return "mqtt"

    def schema(self):
        return SCHEMA

    def streamReader(self, schema):
        return MQTTStreamReader(Config(self.options))


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
    """Decoded spool records (tools.spark.spool.records) -> one Arrow RecordBatch, built column by column."""
    import pyarrow as pa
    off, pid, qos, dup, retain, topic, payload, props, ts = zip(*rows)
    t = [f.type for f in schema]
    cols = [pa.array(topic, t[0]), pa.array(payload, t[1]), pa.array(qos, t[2]), pa.array(retain, t[3]),
            pa.array(dup, t[4]), pa.array([list(p.items()) if p else None for p in props], t[5]),
            pa.array([round(x * 1e6) for x in ts], pa.int64()).cast(t[6]), pa.array(off, t[7]), pa.array(pid, t[8])]
    return pa.RecordBatch.from_arrays(cols, schema=schema)


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


class MQTTStreamReader(DataSourceStreamReader):
    def __init__(self, config):
        self.config = config
        self._link = None

    def __getstate__(self):  # the planner pickles the reader for read(): never the live link
        return {"config": self.config, "_link": None}

    def link(self):
        if self._link is None:
            self._link = self.config.link().start()
            # pyarrow's first batch and IPC stream cost ~0.5 s (imports, kernels): pay it now, while the link
            # connects, not in the first batch's partitions()
            batch_to_ipc(records_to_batch([(0, 0, 0, False, False, "", b"", None, 0.0)], arrow_schema()))
        self._link.check()
        return self._link

    def initialOffset(self):
        link = self.link()
        with link.lock:
            return {"offset": link.spool.committed}

    def getDefaultReadLimit(self):
        return ReadMaxRows(self.config.max_records) if self.config.max_records else ReadAllAvailable()

    def latestOffset(self, start, limit):
        link = self.link()
        s = int(start["offset"])
        end = link.expose(floor=s)
        if end == s and self.config.heartbeat and link.uncommitted_records(s):
            end = link.heartbeat()  # nothing new, but the last batch waits for commit(): plan an empty one
        if isinstance(limit, ReadMaxRows):
            end = min(end, s + max(1, limit.max_rows))
        return {"offset": end}

    def reportLatestOffset(self):
        link = self.link()
        with link.lock:
            return {"offset": link.spool.next_offset}

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
        self.link().commit(int(end["offset"]))

    def stop(self):
        if self._link is not None:
            self._link.stop()
            self._link = None
