# Scale-out ingest: several of these processes share one MQTT 5 shared subscription ($share/<group>/<filter>),
# so the broker spreads the messages over them, and each writes Parquet files into one landing directory that
# Spark's file source reads (spark.readStream.schema(LANDING_SCHEMA).parquet(landing)).
#
#     python -m tinymqtt_spark.ingest --broker 127.0.0.1:1883 --group ingest --client-id ingest-1 \
#         --topics 'fleet/+/telemetry,fleet/+/status' --landing /data/landing --spool /data/spool/ingest-1
#
# Each process is the same MQTT link and spool as the Spark source (tinymqtt_spark.link), with a file as the
# commit: every --flush-ms it seals the spool, writes the records since its last file to a hidden temp file,
# fsyncs it, renames it to part-<client-id>-<from>-<to>.parquet (Spark never sees half a file; the file
# source skips names starting with "." or "_") and fsyncs the directory, and only then acknowledges those
# messages. A killed process loses nothing: its unacknowledged messages wait in its
# persistent session, and on restart the names of its own landing files say how far it had got (a file
# renamed just before the crash is never written twice). Each process needs its own client id and spool.
import argparse
import glob
import os
import re
import signal
import time

from tinymqtt_spark.ackstate import fsync_dir
from tinymqtt_spark.faults import crashpoint
from tinymqtt_spark.link import MqttLink

LANDING_SCHEMA = ("topic STRING, payload BINARY, qos INT, retain BOOLEAN, dup BOOLEAN, "
                  "properties MAP<STRING, STRING>, received_ts TIMESTAMP, offset BIGINT, pid INT, ingest STRING")


def _arrow_schema():
    import pyarrow as pa
    return pa.schema([("topic", pa.string()), ("payload", pa.binary()), ("qos", pa.int32()), ("retain", pa.bool_()),
                      ("dup", pa.bool_()), ("properties", pa.map_(pa.string(), pa.string())),
                      ("received_ts", pa.timestamp("us", tz="UTC")), ("offset", pa.int64()), ("pid", pa.int32()),
                      ("ingest", pa.string())])


class Ingest:
    def __init__(self, link, landing, client_id, flush_ms=1000):
        self.link, self.landing, self.client_id = link, landing, client_id
        self.flush_s = flush_ms / 1000
        self.files = 0
        self.rows = 0
        self._pat = re.compile(r"^part-%s-(\d{20})-(\d{20})\.parquet$" % re.escape(client_id))

    def landed_through(self):
        """How far this client's landing files go (they are the commit record: renamed before any ack)."""
        end = 0
        for name in os.listdir(self.landing):
            m = self._pat.match(name)
            if m:
                end = max(end, int(m.group(2)))
        return end

    def start(self):
        os.makedirs(self.landing, exist_ok=True)
        for tmp in glob.glob(os.path.join(self.landing, ".part-%s-*" % self.client_id)):
            os.remove(tmp)  # a file the previous process never renamed: its messages were not acknowledged
        self.link.start()
        done = self.landed_through()
        if done > self.link.spool.committed:
            self.link.commit(done)  # renamed, then the process died before the spool's commit marker
        return self

    def flush(self):
        """Lands what arrived since the last file; returns the number of rows written."""
        import pyarrow as pa
        import pyarrow.parquet as pq
        link = self.link
        end = link.expose()
        with link.lock:
            start = link.spool.committed
        if end <= start:
            return 0
        rows = list(link.records(start, end))  # decoded in memory where this process spooled them
        if rows:
            cols = list(zip(*rows))  # offset, pid, qos, dup, retain, topic, payload, props, ts
            table = pa.table({
                "topic": list(cols[5]), "payload": list(cols[6]), "qos": list(cols[2]),
                "retain": list(cols[4]), "dup": list(cols[3]),
                "properties": [list(p.items()) if p else None for p in cols[7]],
                "received_ts": pa.array([round(t * 1e6) for t in cols[8]], pa.int64()).cast(
                    pa.timestamp("us", tz="UTC")),
                "offset": list(cols[0]), "pid": list(cols[1]), "ingest": [self.client_id] * len(rows)},
                schema=_arrow_schema())
            name = "part-%s-%020d-%020d.parquet" % (self.client_id, start, end)
            tmp = os.path.join(self.landing, "." + name + ".tmp")
            pq.write_table(table, tmp)
            fd = os.open(tmp, os.O_RDONLY)
            os.fsync(fd)
            os.close(fd)
            os.replace(tmp, os.path.join(self.landing, name))
            fsync_dir(self.landing)  # the rename itself must be on disk before the acks it allows go out
            self.files += 1
            self.rows += len(rows)
            crashpoint("landed")
        link.commit(end)  # only now may the acks go out
        return len(rows)

    def run(self, stop):
        while not stop():
            self.link.check()
            time.sleep(self.flush_s)
            self.flush()
        self.flush()


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m tinymqtt_spark.ingest")
    ap.add_argument("--broker", required=True)
    ap.add_argument("--group", default="ingest", help='shared subscription group ("": a plain subscription)')
    ap.add_argument("--topics", default="fleet/+/telemetry,fleet/+/status")
    ap.add_argument("--client-id", required=True)
    ap.add_argument("--landing", required=True)
    ap.add_argument("--spool", required=True)
    ap.add_argument("--flush-ms", type=int, default=1000)
    ap.add_argument("--qos", type=int, default=2)
    ap.add_argument("--session-expiry", type=int, default=3600)
    a = ap.parse_args(argv)
    host, _, port = a.broker.rpartition(":")
    topics = [("$share/%s/%s" % (a.group, t.strip())) if a.group else t.strip() for t in a.topics.split(",")
              if t.strip()]
    link = MqttLink(host, int(port), a.client_id, topics, a.spool, qos=a.qos, session_expiry=a.session_expiry)
    ing = Ingest(link, a.landing, a.client_id, a.flush_ms).start()
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(1))
    signal.signal(signal.SIGINT, lambda *_: stopping.append(1))
    if not link.subscribed.wait(30):
        raise SystemExit("ingest %s: no SUBACK within 30 s (%s)" % (a.client_id, link.last_error))
    print("READY", flush=True)
    try:
        ing.run(lambda: bool(stopping))
    finally:
        link.stop()
    print("STOPPED files=%d rows=%d" % (ing.files, ing.rows), flush=True)


if __name__ == "__main__":
    main()
