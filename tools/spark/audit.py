# The audit: what the pipeline wrote (Parquet) against what the fleet sent (its manifest), in Spark.
#   per device and QoS: sent, owed, delivered, lost, duplicated (rows are deduplicated on device and seq)
#   latency (first copy received - sent) p50/p99 per QoS, and a log-scale histogram for the plot
#   devices online/offline from the last status message each device's retained status topic carried
#   sensor aggregates per time window (on the send time, deduplicated), messages per second sent/received
# A message is owed when nobody could have dropped it legitimately: every QoS 0 message (no one acknowledges
# those, so their loss is measured, not excused) and every QoS 1/2 message the broker acknowledged to the
# device. A QoS 1/2 message never acknowledged (the device died, or gave up) is "unconfirmed": it may or may
# not arrive, and is reported apart.
#     python -m tools.spark.audit --data OUT_DIR --manifest manifest.jsonl [--json audit.json]
import argparse
import json
import math

MANIFEST_SCHEMA = "device STRING, seq BIGINT, qos INT, sent_ts DOUBLE, acked BOOLEAN, state STRING, ack_ts DOUBLE"
HIST_BINS_PER_DECADE = 10  # latency histogram: bins of 10**(k/10) ms


def load(spark, data_path, manifest_path):
    data = spark.read.parquet(data_path)
    manifest = spark.read.schema(MANIFEST_SCHEMA).json(manifest_path)
    return data, manifest


def audit(spark, data_path, manifest_path, window_seconds=10):
    data, manifest = load(spark, data_path, manifest_path)
    return audit_frames(data, manifest, window_seconds)


def _rows(df):
    return [r.asDict(recursive=True) for r in df.collect()]


def audit_frames(data, manifest, window_seconds=10):
    """data: the pipeline's rows (kind, device, seq, received_ts, value, status, reason, ...); manifest: the
    fleet's (device, seq, qos, sent_ts, acked). Returns plain dicts and lists (JSON-ready)."""
    from pyspark.sql import functions as F, Window

    data, manifest = data.cache(), manifest.cache()  # a dozen small jobs below read them
    tele = data.where(F.col("kind") == "telemetry")
    rx = F.unix_micros(F.col("received_ts")) / 1e6
    copies = (tele.groupBy("device", "seq")
              .agg(F.count(F.lit(1)).alias("copies"), F.min(rx).alias("first_rx")))
    m = manifest.withColumn("owed", (F.col("qos") == 0) | F.coalesce(F.col("acked"), F.lit(False)))
    j = m.join(copies, ["device", "seq"], "left").withColumn("copies", F.coalesce(F.col("copies"), F.lit(0)))
    j = j.withColumn("lat_ms", F.when(F.col("copies") > 0, (F.col("first_rx") - F.col("sent_ts")) * 1000.0))
    j = j.cache()

    def counts(*keys):
        return j.groupBy(*keys).agg(
            F.count(F.lit(1)).alias("sent"),
            F.sum(F.when(F.col("qos") > 0, F.col("acked").cast("int")).otherwise(0)).alias("acked"),
            F.sum(F.col("owed").cast("int")).alias("owed"),
            F.sum(F.when(F.col("copies") > 0, 1).otherwise(0)).alias("delivered"),
            F.sum(F.when(F.col("owed") & (F.col("copies") == 0), 1).otherwise(0)).alias("lost"),
            F.sum(F.when(F.col("copies") > 1, F.col("copies") - 1).otherwise(0)).alias("duplicates"),
            F.sum(F.when(~F.col("owed"), 1).otherwise(0)).alias("unconfirmed"),
            F.sum(F.when(~F.col("owed") & (F.col("copies") > 0), 1).otherwise(0)).alias("unconfirmed_delivered"))

    per_qos = {r["qos"]: r for r in _rows(counts("qos"))}
    lat = _rows(j.where(F.col("lat_ms").isNotNull()).groupBy("qos").agg(
        F.expr("percentile(lat_ms, array(0.5, 0.99))").alias("pct"), F.max("lat_ms").alias("max"),
        F.avg("lat_ms").alias("mean")))
    for r in lat:
        q = per_qos[r["qos"]]
        q["p50_ms"], q["p99_ms"] = r["pct"][0], r["pct"][1]
        q["max_ms"], q["mean_ms"] = r["max"], r["mean"]
    per_qos = [dict({"p50_ms": None, "p99_ms": None, "max_ms": None, "mean_ms": None}, **per_qos[q])
               for q in sorted(per_qos)]
    per_device = _rows(counts("device", "qos").orderBy("device", "qos"))

    # Rows the manifest does not know (another run's, or a corrupt payload): reported, never matched.
    known = manifest.select("device", "seq").distinct()
    unknown = tele.join(known, ["device", "seq"], "left_anti").count()

    # Latency histogram, log-scale bins: bin k holds 10**(k/B) <= ms < 10**((k+1)/B).
    b = HIST_BINS_PER_DECADE
    hist = _rows(j.where(F.col("lat_ms").isNotNull())
                 .withColumn("bin", F.floor(F.log10(F.greatest(F.col("lat_ms"), F.lit(1e-3))) * b).cast("int"))
                 .groupBy("qos", "bin").count().orderBy("qos", "bin"))
    histogram = {}
    for r in hist:
        histogram.setdefault(str(r["qos"]), []).append([10 ** (r["bin"] / b), 10 ** ((r["bin"] + 1) / b), r["count"]])

    # Status: the last status message of each device (arrival order), from its retained status topic.
    st = data.where(F.col("kind") == "status")
    w = Window.partitionBy("device").orderBy(F.col("received_ts").desc(), F.col("offset").desc())
    last = st.withColumn("k", F.row_number().over(w)).where(F.col("k") == 1)
    last_rows = _rows(last.select("device", "status", "reason", "retain").orderBy("device"))
    devices = [r["device"] for r in _rows(manifest.select("device").distinct())]
    by_device = {r["device"]: r["status"] for r in last_rows}
    status = {
        "online": sum(1 for r in last_rows if r["status"] == "online"),
        "offline": sum(1 for r in last_rows if r["status"] == "offline"),
        "offline_by_will": sum(1 for r in last_rows if r["status"] == "offline" and r["reason"] == "will"),
        "no_status": sum(1 for d in devices if d not in by_device),
        "status_messages": st.count(),
        "offline_devices": sorted(d for d, s in by_device.items() if s == "offline"),
    }

    # Sensor aggregates per time window of the send time, each (device, seq) once.
    first = (tele.where(F.col("seq").isNotNull()).dropDuplicates(["device", "seq"])
             .withColumn("sent_at", F.timestamp_seconds(F.col("sent_ts"))))
    win = _rows(first.groupBy(F.window("sent_at", "%d seconds" % window_seconds).alias("w"))
                .agg(F.count(F.lit(1)).alias("messages"), F.countDistinct("device").alias("devices"),
                     F.avg("value").alias("avg"), F.min("value").alias("min"), F.max("value").alias("max"),
                     F.stddev("value").alias("stddev"))
                .select(F.unix_micros(F.col("w.start")).alias("start_us"), "messages", "devices", "avg", "min",
                        "max", "stddev")
                .orderBy("start_us"))
    windows = []
    for r in win:
        r["start"] = r.pop("start_us") / 1e6
        r["seconds"] = window_seconds
        windows.append(r)

    # Messages per second: sent (manifest) and received (first copies, and all rows).
    sent_ps = {int(r["s"]): r["n"] for r in _rows(m.groupBy(F.floor("sent_ts").alias("s")).agg(
        F.count(F.lit(1)).alias("n")))}
    rx_ps = {int(r["s"]): r["n"] for r in _rows(tele.groupBy(F.floor(rx).alias("s")).agg(
        F.count(F.lit(1)).alias("n")))}
    secs = sorted(set(sent_ps) | set(rx_ps))
    per_second = [[s, sent_ps.get(s, 0), rx_ps.get(s, 0)] for s in secs]

    span = _rows(tele.agg(F.count(F.lit(1)).alias("rows"), F.min(rx).alias("first"), F.max(rx).alias("last")))[0]
    totals = {"telemetry_rows": span["rows"], "status_rows": status["status_messages"], "unknown_rows": unknown,
              "first_received": span["first"], "last_received": span["last"],
              "sent": sum(q["sent"] for q in per_qos), "owed": sum(q["owed"] for q in per_qos),
              "lost": sum(q["lost"] for q in per_qos), "duplicates": sum(q["duplicates"] for q in per_qos),
              "devices": len(devices)}
    j.unpersist()
    data.unpersist()
    manifest.unpersist()
    return {"per_qos": per_qos, "per_device": per_device, "latency_histogram": histogram, "status": status,
            "windows": windows, "per_second": per_second, "totals": totals}


def write_json(result, path):
    with open(path, "w") as f:
        json.dump(result, f, indent=1, default=str)


def format_table(result):
    """The per-QoS audit table for a terminal."""
    head = ("QoS", "sent", "owed", "delivered", "lost", "dup", "unconf.", "p50 ms", "p99 ms")
    rows = []
    for q in result["per_qos"]:
        rows.append((str(q["qos"]), str(q["sent"]), str(q["owed"]), str(q["delivered"]), str(q["lost"]),
                     str(q["duplicates"]), "%d/%d" % (q["unconfirmed_delivered"], q["unconfirmed"]),
                     _ms(q["p50_ms"]), _ms(q["p99_ms"])))
    t = result["totals"]
    rows.append(("all", str(t["sent"]), str(t["owed"]), str(sum(q["delivered"] for q in result["per_qos"])),
                 str(t["lost"]), str(t["duplicates"]), "", "", ""))
    widths = [max(len(head[i]), *(len(r[i]) for r in rows)) for i in range(len(head))]
    line = "+" + "+".join("-" * (w + 2) for w in widths) + "+"
    fmt = lambda r: "|" + "|".join(" %*s " % (widths[i], r[i]) for i in range(len(r))) + "|"
    out = [line, fmt(head), line] + [fmt(r) for r in rows[:-1]] + [line, fmt(rows[-1]), line]
    return "\n".join(out)


def _ms(v):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return "%.1f" % v if v < 1000 else "%.0f" % v


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m tools.spark.audit")
    ap.add_argument("--data", required=True)
    ap.add_argument("--manifest", required=True)
    ap.add_argument("--json", default=None)
    ap.add_argument("--window", type=int, default=10)
    a = ap.parse_args(argv)
    from tools.spark.pipeline import spark_session, stop_spark
    spark = spark_session()
    try:
        res = audit(spark, a.data, a.manifest, a.window)
    finally:
        stop_spark()
    if a.json:
        write_json(res, a.json)
    print(format_table(res))
    s = res["status"]
    print("devices: %d online, %d offline (%d by their will), %d without status" % (
        s["online"], s["offline"], s["offline_by_will"], s["no_status"]))


if __name__ == "__main__":
    main()
