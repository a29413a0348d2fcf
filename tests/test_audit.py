# The audit (tools/spark/audit.py) on hand-made data whose every figure is known: losses, duplicates,
# unconfirmed messages, latency percentiles, last status per device, sensor windows, per-second counts.
from datetime import datetime, timezone

import pytest

pytest.importorskip("pyspark", reason="pyspark is not installed (tools/bootstrap.sh installs pyspark[sql])")

from tools.spark.audit import audit_frames, format_table  # noqa: E402
from tools.spark.pipeline import spark_session  # noqa: E402

DATA_SCHEMA = ("kind STRING, device STRING, seq BIGINT, qos INT, sent_ts DOUBLE, received_ts TIMESTAMP, "
               "value DOUBLE, status STRING, reason STRING, retain BOOLEAN, offset BIGINT")
MANIFEST_SCHEMA = "device STRING, seq BIGINT, qos INT, sent_ts DOUBLE, acked BOOLEAN, state STRING, ack_ts DOUBLE"
T0 = 1_700_000_000.0


@pytest.fixture(scope="session")
def spark():
    return spark_session()


def sent_at(seq):
    return T0 + 3 * seq  # 3 s apart: windows of 10 s hold seq 1-3, 4-6, 7-9 (T0 is a multiple of 10)


def ts(t):
    return datetime.fromtimestamp(t, tz=timezone.utc)


# The fleet's manifest: (device, seq, qos, acked)
MANIFEST = (
    [("A", s, 0, False) for s in range(1, 5)]  # QoS 0: nobody acks, all owed
    + [("A", s, 1, True) for s in range(5, 9)] + [("A", 9, 1, False)]  # A9 never acknowledged to the device
    + [("B", s, 2, True) for s in range(1, 6)] + [("B", 6, 2, False)]  # B6 dropped when B died
    + [("C", s, 1, True) for s in range(1, 4)]
)
# What the pipeline wrote: (device, seq, [delays in ms of each copy]); absent = lost
COPIES = {
    ("A", 1): [10], ("A", 2): [20, 500], ("A", 4): [40],  # A3 lost (QoS 0), A2 twice
    ("A", 5): [5], ("A", 6): [6, 100, 200], ("A", 8): [8], ("A", 9): [9],  # A7 lost (QoS 1!), A6 thrice
    ("C", 1): [1], ("C", 2): [2], ("C", 3): [3],
    ("B", 1): [10], ("B", 2): [20], ("B", 3): [30, 300], ("B", 4): [40], ("B", 5): [50],  # B3 twice
    ("D", 1): [7],  # a device the manifest does not know
}
VALUE = {("A", 1): 20.0, ("A", 2): 22.0, ("A", 4): 30.0, ("A", 5): 10.0, ("A", 6): 11.0, ("A", 8): 12.0,
         ("A", 9): 13.0, ("C", 1): 1.0, ("C", 2): 2.0, ("C", 3): 3.0, ("B", 1): 5.0, ("B", 2): 6.0, ("B", 3): 7.0,
         ("B", 4): 8.0, ("B", 5): 9.0, ("D", 1): 100.0}
# Status messages: (device, status, reason, received at T0 + x)
STATUS = [("A", "online", "connect", 1), ("A", "offline", "will", 50), ("B", "online", "connect", 2),
          ("C", "offline", "will", 1), ("C", "online", "connect", 3)]


@pytest.fixture(scope="module")
def result(spark):
    qos = {(d, s): q for d, s, q, _ in MANIFEST}
    rows, off = [], 0
    for (d, s), delays in COPIES.items():
        for ms in delays:
            rows.append(("telemetry", d, s, qos.get((d, s), 1), sent_at(s), ts(sent_at(s) + ms / 1000.0),
                         VALUE[(d, s)], None, None, False, off))
            off += 1
    for d, st, why, x in STATUS:
        rows.append(("status", d, None, 1, None, ts(T0 + x), None, st, why, x == 1, off))
        off += 1
    data = spark.createDataFrame(rows, DATA_SCHEMA)
    manifest = spark.createDataFrame([(d, s, q, sent_at(s), a, "acked" if a else ("sent" if q == 0 else "unacked"),
                                       None) for d, s, q, a in MANIFEST], MANIFEST_SCHEMA)
    return audit_frames(data, manifest, window_seconds=10)


def test_per_qos_losses_and_duplicates(result):
    got = {q["qos"]: {k: q[k] for k in ("sent", "acked", "owed", "delivered", "lost", "duplicates", "unconfirmed",
                                        "unconfirmed_delivered")} for q in result["per_qos"]}
    assert got == {
        0: dict(sent=4, acked=0, owed=4, delivered=3, lost=1, duplicates=1, unconfirmed=0, unconfirmed_delivered=0),
        1: dict(sent=8, acked=7, owed=7, delivered=7, lost=1, duplicates=2, unconfirmed=1, unconfirmed_delivered=1),
        2: dict(sent=6, acked=5, owed=5, delivered=5, lost=0, duplicates=1, unconfirmed=1, unconfirmed_delivered=0),
    }
    t = result["totals"]
    assert (t["sent"], t["owed"], t["lost"], t["duplicates"]) == (18, 16, 2, 4)
    assert (t["telemetry_rows"], t["status_rows"], t["unknown_rows"], t["devices"]) == (20, 5, 1, 3)
    table = format_table(result)
    assert "|   1 |    8 |    7 |         7 |    1 |   2 |     1/1 |" in table


def test_per_device(result):
    got = {(r["device"], r["qos"]): (r["sent"], r["owed"], r["delivered"], r["lost"], r["duplicates"])
           for r in result["per_device"]}
    assert got == {("A", 0): (4, 4, 3, 1, 1), ("A", 1): (5, 4, 4, 1, 2), ("B", 2): (6, 5, 5, 0, 1),
                   ("C", 1): (3, 3, 3, 0, 0)}


def test_latency_percentiles_use_the_first_copy(result):
    lat = {q["qos"]: q for q in result["per_qos"]}
    # QoS 0 first copies 10, 20, 40 ms: p50 20; p99 at rank 0.99*2 = 1.98 -> 20 + 0.98*20
    assert lat[0]["p50_ms"] == pytest.approx(20, abs=1e-3)
    assert lat[0]["p99_ms"] == pytest.approx(39.6, abs=1e-3)
    # QoS 1: 1 2 3 5 6 8 9 (A6's later copies at 100 and 200 ms do not count; A7 is lost)
    assert lat[1]["p50_ms"] == pytest.approx(5, abs=1e-3)
    assert lat[1]["p99_ms"] == pytest.approx(8.94, abs=1e-3)
    assert lat[1]["max_ms"] == pytest.approx(9, abs=1e-3)
    assert lat[1]["mean_ms"] == pytest.approx(34 / 7, abs=1e-3)
    assert lat[2]["p50_ms"] == pytest.approx(30, abs=1e-3)
    assert lat[2]["p99_ms"] == pytest.approx(49.6, abs=1e-3)
    hist = result["latency_histogram"]
    assert {q: sum(b[2] for b in bins) for q, bins in hist.items()} == {"0": 3, "1": 7, "2": 5}
    for bins in hist.values():
        for lo, hi, n in bins:
            assert hi == pytest.approx(lo * 10 ** 0.1)


def test_status_is_each_devices_last_message(result):
    s = result["status"]
    assert (s["online"], s["offline"], s["offline_by_will"], s["no_status"], s["status_messages"]) == (2, 1, 1, 0, 5)
    assert s["offline_devices"] == ["A"]


def test_sensor_windows_deduplicated(result):
    w = {int(x["start"] - T0): (x["messages"], x["devices"], x["min"], x["max"]) for x in result["windows"]}
    # seq 1-3 sent in [T0, T0+10), 4-6 in [+10, +20), 7-9 in [+20, +30); each (device, seq) once, D included
    assert w == {0: (9, 4, 1.0, 100.0), 10: (5, 2, 8.0, 30.0), 20: (2, 1, 12.0, 13.0)}
    avg = {int(x["start"] - T0): x["avg"] for x in result["windows"]}
    assert avg == {0: pytest.approx(166 / 9), 10: pytest.approx(68 / 5), 20: pytest.approx(12.5)}


def test_messages_per_second(result):
    ps = result["per_second"]
    assert sum(p[1] for p in ps) == 18  # the manifest's messages, by send second
    assert sum(p[2] for p in ps) == 20  # every telemetry row, by receive second
    assert [p[0] for p in ps] == sorted(p[0] for p in ps)
