# tools/bench/spark_sustained.py's arithmetic on synthetic steps (pure Python: no broker, no Spark): what makes
# a step bounded (everything delivered, drained soon after the publisher's end, latency not growing across the
# step), the backlog at the publisher's end, duplicates counted once, and the headline rate.
from tools.bench.spark_sustained import headline, parse, percentile, step_stats


def stream(rate, seconds, latency, t0=1000.0):
    """Rows [(key, published, landed)] of a publisher at `rate` for `seconds`; latency(t since start) -> s."""
    n = int(rate * seconds)
    rows = [(b"p0 %d" % i, t0 + i / rate, t0 + i / rate + latency(i / rate)) for i in range(n)]
    return rows, {"sent": n, "t_start": t0, "t_end": t0 + seconds}


def test_a_steady_stream_is_bounded_with_its_latency_and_backlog():
    rows, pub = stream(1000, 9, lambda t: 0.5005)
    s = step_stats(rows, pub, interval=1.0)
    assert s["bounded"] and s["drained"] and s["delivered"] == s["published"] == 9000 and s["duplicates"] == 0
    assert abs(s["p50_s"] - 0.5005) < 1e-6 and abs(s["p99_s"] - 0.5005) < 1e-6
    assert abs(s["publish_rate"] - 1000) < 1e-6
    assert s["backlog_at_end"] == 500  # the last ~0.5 s of messages were still on their way at the end
    assert abs(s["last_after_end_s"] - (0.5005 - 1 / 1000)) < 1e-6
    assert s["batches"] == 9000  # every row landed at its own moment here


def test_latency_growing_across_the_step_is_not_bounded_even_when_it_drains():
    rows, pub = stream(1000, 9, lambda t: 0.2 + 0.4 * t)  # the sink loses 0.4 s a second: a growing backlog
    s = step_stats(rows, pub, interval=1.0, drain_limit=10.0)
    assert s["drained"] and s["last_after_end_s"] < 10
    assert s["p50_last_third_s"] > s["p50_first_third_s"] + 1.0
    assert not s["bounded"]


def test_a_slow_drain_or_a_missing_row_is_not_bounded():
    rows, pub = stream(1000, 9, lambda t: 0.5 if t < 8.5 else 6.0)  # the tail lands 6 s late
    assert not step_stats(rows, pub, interval=1.0)["bounded"]
    rows, pub = stream(1000, 9, lambda t: 0.5)
    s = step_stats(rows[:-1], pub, interval=1.0)
    assert not s["drained"] and not s["bounded"] and s["delivered"] == 8999


def test_duplicates_count_once_at_their_first_landing():
    rows, pub = stream(100, 3, lambda t: 0.5)
    dup = [(k, p, land + 30.0) for k, p, land in rows[:10]]  # QoS 1 redelivered long after: not a latency
    s = step_stats(rows + dup, pub, interval=1.0)
    assert s["duplicates"] == 10 and s["delivered"] == 300 and s["rows"] == 310
    assert s["bounded"] and abs(s["max_s"] - 0.5) < 1e-6


def test_percentile_is_nearest_rank_and_headline_takes_the_fastest_bounded_step():
    xs = list(range(1, 101))
    assert percentile(xs, 0.5) == 50 and percentile(xs, 0.99) == 99 and percentile(xs, 1.0) == 100
    assert percentile([7], 0.99) == 7 and percentile([], 0.5) is None
    steps = [{"publish_rate": r, "bounded": b, "target": r, "p50_s": 1.0, "p99_s": 2.0}
             for r, b in ((2500, True), (4900, True), (6000, False))]
    assert headline(steps)["publish_rate"] == 4900 and not headline(steps)["at_least"]
    assert headline(steps[:2])["at_least"] and headline(steps[2:]) is None
    assert parse(b"3 p1 42 1700000000.250000") == (3, b"p1 42", 1700000000.25)
