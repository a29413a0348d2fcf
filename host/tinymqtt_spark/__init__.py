# tinymqtt_spark: an MQTT source for Spark Structured Streaming on tinymqtt (docs/spark.md).
#
#     import tinymqtt_spark
#     spark.dataSource.register(tinymqtt_spark.MQTTDataSource)
#     df = (spark.readStream.format("mqtt").option("broker", "127.0.0.1:1883").option("topic", "fleet/#")
#           .option("checkpointLocation", ckpt).load())
#     q = df.writeStream.format("parquet").option("path", out).option("checkpointLocation", ckpt).start()
#     tinymqtt_spark.wait_live(ckpt, q)   # the link is connected and subscribed: publish from here on
#
# How executors get this code: Spark pickles the source's reader and partitions by reference to this package,
# so every Python worker that runs them must be able to import it. Installed with pip (`.[spark]`) into the
# interpreter PYSPARK_PYTHON names, it is; on a cluster whose executors lack it, ship archive()'s zip with
# spark.sparkContext.addPyFile(tinymqtt_spark.archive()) (it holds this package, tinymqtt and its port, taken
# from wherever this process imports them). The package never touches sys.path.
import os
import tempfile
import time
import zipfile

from tinymqtt_spark.source import MQTTDataSource, session_client_id, spool_dir_for  # noqa: F401

__all__ = ["MQTTDataSource", "archive", "wait_live", "link_stats", "session_client_id", "spool_dir_for"]


def _module_files():
    """(path on disk, name inside the archive) of every .py file executors need."""
    import tinymqtt
    import tinymqtt_port
    out = [(tinymqtt_port.__file__, "tinymqtt_port.py")]
    for pkg in (tinymqtt, __import__("tinymqtt_spark")):
        top = os.path.dirname(os.path.abspath(pkg.__file__))
        name = os.path.basename(top)
        for d, _, files in os.walk(top):
            for f in sorted(files):
                if f.endswith(".py"):
                    full = os.path.join(d, f)
                    out.append((full, os.path.join(name, os.path.relpath(full, top))))
    return out


def archive(path=None):
    """A zip of tinymqtt_spark, tinymqtt and tinymqtt_port (from where this process imports them), for
    spark.sparkContext.addPyFile() when the executors do not have the package installed. Returns its path."""
    if path is None:
        path = os.path.join(tempfile.mkdtemp(prefix="tinymqtt-spark-"), "tinymqtt_spark.zip")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for full, name in _module_files():
            z.write(full, name)
    return path


def link_stats(checkpoint_or_spool):
    """What the source's MQTT link last reported (link-stats.json in its spool, once a second): connected,
    subscribed, received, unacked, session_lost, ... ({} before the link started)."""
    import json
    spool = spool_dir_for(checkpoint_or_spool)
    try:
        with open(os.path.join(spool, "link-stats.json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def wait_live(checkpoint, query=None, timeout=120.0, since=None):
    """Blocks until the source of the query on `checkpoint` (the same path as its checkpointLocation, or the
    source's spoolDir) is connected to the broker with its subscription granted, after `since` (default: the
    call's own time minus the query's start, i.e. any time the link of this process' query came up). From then
    on every message the broker accepts for the topic reaches the query, QoS 0 included. Raises the query's
    own error if it failed, TimeoutError after `timeout` seconds."""
    spool = spool_dir_for(checkpoint)
    marker = os.path.join(spool, "live")
    deadline = time.monotonic() + timeout
    while True:
        try:
            with open(marker) as f:
                pid, t = f.read().split()
            if since is None or float(t) >= since:
                return {"pid": int(pid), "time": float(t)}
        except (OSError, ValueError):
            pass
        if query is not None and query.exception() is not None:
            raise RuntimeError("the streaming query failed before its MQTT link was live: %s" % query.exception())
        if time.monotonic() > deadline:
            raise TimeoutError("the mqtt source on %s was not live within %.0f s: %r"
                               % (spool, timeout, link_stats(spool)))
        time.sleep(0.05)
