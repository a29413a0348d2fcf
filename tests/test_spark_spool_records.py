# The spool's fast paths for the Spark source (tinymqtt_spark/spool.py, source.py), no Spark needed: a line
# written by record_line is byte for byte json.dumps's, the records a process appended are served decoded from
# memory exactly as a later process parses them from disk, and a partition's Arrow IPC round-trips.
import base64
import json
import os
import random

import tools.spark  # noqa: F401  (sys.path: lib/ and the Linux port)
from tinymqtt_spark.spool import Spool, read_range, record_line, records


def test_record_line_is_json_dumps_byte_for_byte():
    rnd = random.Random(14)
    for i in range(3000):
        r = [rnd.randrange(1 << 40), rnd.choice([None, 0, 1, 65535]), rnd.choice([0, 1, 2]), rnd.random() < .5,
             rnd.random() < .5, rnd.choice(["a/b", "fl\u00e9et/\"x\"/t", "", "x\\y", "\u2603/\n"]),
             bytes(rnd.randrange(256) for _ in range(rnd.randrange(40))),
             rnd.choice([None, {"k": "v\u00e9", "content_type": "a\"b"}, {}]),
             rnd.choice([1795372251.3026252, 1.0, 1e9 + rnd.random(), 0.1])]
        want = list(r)
        want[6] = base64.b64encode(r[6]).decode()
        assert record_line(*r) == json.dumps(want, separators=(",", ":")) + "\n"


def _fill(d, n, mem_records):
    sp = Spool(d, segment_records=7, fsync=False, mem_records=mem_records)
    for i in range(n):
        sp.append(1 + i % 50, i % 3, i % 5 == 0, i % 7 == 0, "t/%d" % (i % 4), b"p\x00%d" % i,
                  {"k": str(i)} if i % 6 == 0 else None, 1.5 + i)
    sp.seal()
    return sp


def test_records_from_memory_equal_records_from_disk(tmp_path):
    sp = _fill(str(tmp_path / "a"), 100, 1000)
    assert all(s.rows is not None for s in sp.segments)
    later = Spool(str(tmp_path / "a"), fsync=False)  # another process: nothing in memory, all from the files
    assert all(s.rows is None for s in later.segments)
    for lo, hi in ((0, 100), (3, 50), (7, 14), (95, 200), (50, 50)):
        mem = list(records(sp.sources(lo, hi), lo, hi))
        assert mem == list(records(later.sources(lo, hi), lo, hi))
        assert [r[0] for r in mem] == list(range(lo, min(hi, 100)))
        assert [list(r[:6]) + [base64.b64encode(r[6]).decode()] + list(r[7:]) for r in mem] == \
            list(read_range(sp.paths(lo, hi), lo, hi))


def test_records_in_memory_are_bounded_and_released(tmp_path):
    sp = _fill(str(tmp_path / "b"), 100, 30)
    held = [s for s in sp.segments if s.rows is not None]
    assert sp._in_mem == sum(len(s.rows) for s in held) <= 30 and held[-1] is sp.segments[-1]
    assert [r[0] for r in records(sp.sources(0, 100), 0, 100)] == list(range(100))  # the oldest from disk
    sp.commit(100)
    sp.drop_through(100)
    assert sp.segments == [] and sp._in_mem == 0


def test_partition_ipc_round_trip():
    from tinymqtt_spark.source import arrow_schema, batch_to_ipc, records_to_batch
    import pyarrow as pa
    rows = [(i, i + 1, i % 3, i % 2 == 0, False, "t/x", b"\xff%d" % i, {"a": "b"} if i % 4 == 0 else None,
             1795372251.302625 + i) for i in range(1000)]
    batch = records_to_batch(rows, arrow_schema())
    back = [b for part in (batch.slice(0, 600), batch.slice(600, 600)) for b in pa.ipc.open_stream(batch_to_ipc(part))]
    assert all(b.schema.equals(arrow_schema()) for b in back)
    got = pa.Table.from_batches(back).to_pylist()
    assert [r["offset"] for r in got] == list(range(1000)) and got[4]["properties"] == [("a", "b")]
    assert got[7]["payload"] == b"\xff7" and got[3]["received_ts"].timestamp() == rows[3][8]


def test_batch_from_buffers_equals_pyarrow_conversion_and_leaves_pandas_unimported():
    # records_to_batch builds its columns from buffers (pyarrow.array imports pandas, ~0.5-1 s at each query
    # start in the driver's source process): the batch must be what pyarrow.array makes of the same values.
    import subprocess
    import sys
    import pyarrow as pa
    from tinymqtt_spark.source import arrow_schema, records_to_batch
    rnd = random.Random(34)
    rows = [(i, rnd.choice([None, 1, 65535]), rnd.choice([0, 1, 2]), rnd.random() < .3, rnd.random() < .3,
             rnd.choice(["a/b", "fl\u00e9et/\"x\"/t", "", "\u2603/\n"]),
             bytes(rnd.randrange(256) for _ in range(rnd.randrange(40))),
             rnd.choice([None, {}, {"k": "v\u00e9", "content_type": "a\"b"}, {"\u00e7": ""}]),
             1795372251.302625 + i / 7) for i in range(2000)]
    schema, t = arrow_schema(), [f.type for f in arrow_schema()]
    off, pid, qos, dup, retain, topic, payload, props, ts = zip(*rows)
    want = pa.RecordBatch.from_arrays(
        [pa.array(topic, t[0]), pa.array(payload, t[1]), pa.array(qos, t[2]), pa.array(retain, t[3]),
         pa.array(dup, t[4]), pa.array([list(p.items()) if p else None for p in props], t[5]),
         pa.array([round(x * 1e6) for x in ts], pa.int64()).cast(t[6]), pa.array(off, t[7]), pa.array(pid, t[8])],
        schema=schema)
    for lo, hi in ((0, 2000), (5, 6), (17, 1000)):
        got = records_to_batch(rows[lo:hi], schema)
        got.validate(full=True)
        assert got.equals(want.slice(lo, hi - lo))
    code = ("import sys, tools.spark; from tinymqtt_spark.source import arrow_schema, batch_to_ipc, "
            "records_to_batch; batch_to_ipc(records_to_batch([(0, 1, 1, False, False, 't', b'p', {'a': 'b'}, 1.5)], "
            "arrow_schema())); print('pandas' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=tools.spark.ROOT, capture_output=True, text=True,
                         timeout=60)
    assert out.stdout.strip() == "False", out.stderr
