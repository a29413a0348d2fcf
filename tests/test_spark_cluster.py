# The main job on a real Spark standalone cluster: `python -m tools.demo --cluster 2` at a small scale (a master
# and two workers, each its own JVM from pyspark's bin/spark-class; the driver SIGKILLed mid-stream and started
# again from its checkpoint). Loss and duplicates are counted twice: by the job's own audit (Spark) and here
# from the Parquet files and the fleet's manifest with pyarrow alone; executors must have run on both workers.
import collections
import json
import os

import pytest

pytest.importorskip("pyspark", reason="pyspark is not installed (tools/bootstrap.sh installs pyspark[sql])")
pq = pytest.importorskip("pyarrow.parquet")

from tools.demo import main as demo  # noqa: E402
from tools.fleet.sim import read_manifest  # noqa: E402
from tests.support.report import record  # noqa: E402
from tests.support.sink_log import committed_files  # noqa: E402


def committed_rows(out):
    """(device, seq) of every telemetry row in the files the sink's log committed (not stray ones)."""
    rows = []
    for name in committed_files(out):
        t = pq.read_table(os.path.join(out, name), columns=["kind", "device", "seq"]).to_pydict()
        rows += [(d, s) for k, d, s in zip(t["kind"], t["device"], t["seq"]) if k == "telemetry"]
    return rows


def test_demo_on_a_two_worker_cluster_with_a_driver_kill(tmp_path):
    d = str(tmp_path / "demo")
    rc = demo(["--cluster", "2", "--devices", "60", "--rate", "2", "--duration", "10", "--cuts", "1",
               "--deaths", "2", "--kill-at", "0.4", "--out", d])
    assert rc == 0
    with open(os.path.join(d, "audit.json")) as f:
        audit = json.load(f)
    with open(os.path.join(d, "report.json")) as f:
        report = json.load(f)
    assert report["killed_at"]  # the driver was killed and restarted
    per_qos = {q["qos"]: q for q in audit["per_qos"]}
    assert per_qos[1]["lost"] == 0 and per_qos[2]["lost"] == 0 and per_qos[2]["duplicates"] == 0
    # The same figures without Spark: the committed Parquet files against the manifest.
    copies = collections.Counter(committed_rows(os.path.join(d, "out")))
    mine = {q: {"lost": 0, "duplicates": 0} for q in (0, 1, 2)}
    for m in read_manifest(os.path.join(d, "manifest.jsonl")):
        k = copies.get((m["device"], m["seq"]), 0)
        mine[m["qos"]]["lost"] += (m["qos"] == 0 or m["acked"]) and not k
        mine[m["qos"]]["duplicates"] += max(0, k - 1)
    assert mine == {q: {"lost": per_qos[q]["lost"], "duplicates": per_qos[q]["duplicates"]} for q in (0, 1, 2)}
    assert per_qos[1]["owed"] > 300 and per_qos[2]["owed"] > 300
    # Where the tasks ran: executors of the restarted driver's application, on both workers.
    sp = audit["spark"]
    assert sp["master"].startswith("spark://127.0.0.1:") and sp["workers"] == 2
    assert sp["executors"] == 2 and all(n > 0 for n in sp["executor_tasks"].values())
    on_workers = [str(e) for ids in sp["executors_by_worker"].values() for e in ids]
    assert set(sp["executor_tasks"]) <= set(on_workers)
    assert all(sp["executors_by_worker"].values())  # each worker ran one of them
    record("cluster: 1 master + 2 workers, driver killed", "%d msgs, QoS 1/2 lost 0, QoS 2 dup 0, %d executors "
           "ran tasks (%s), %.0f s" % (sum(q["sent"] for q in audit["per_qos"]), sp["executors"],
                                       sp["executor_tasks"], report["wall_seconds"]))
