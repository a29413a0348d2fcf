# `python -m tools.bench --quick` runs end to end (a real mosquitto, the raw ceiling, tinymqtt's two clients,
# the peers only where they are installed, MicroPython) and writes its page and raw results. It proves the
# bench works; its figures are never checked here: timing belongs to the bench, not to the test suite.
import json
import subprocess
import sys

from tests.support.micropython import ROOT


def test_bench_quick_runs_and_writes_its_report(tmp_path):
    out = tmp_path / "out"
    raw = tmp_path / "results.json"
    p = subprocess.run([sys.executable, "-m", "tools.bench", "--quick", "--out", str(out), "--json", str(raw)],
                       cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    res = json.loads(raw.read_text())
    for section in ("throughput", "latency", "wire", "sizes", "mp_mem", "mp_heap", "codec", "mp_throughput",
                    "mp_alloc", "footprint", "stream"):
        assert res.get(section), "no %s figures\n%s" % (section, p.stdout[-3000:])
    for client in ("raw", "tinymqtt", "tinymqtt-aio"):
        for qos in (0, 1, 2):
            run = res["throughput"]["%s %d" % (client, qos)]["runs"][0]
            assert run["received"] == run["sent"] == 300, run  # every message reached the counter
    page = (out / "benchmarks.md").read_text()
    assert "## 1. Throughput" in page and "## How to reproduce" in page
    # The MicroPython row: each unix port's clients against the ceiling of the same build (tools/bench/mp_unix.py);
    # the 32-bit port's only where tools/mp32.py has built it.
    from tools.bench.mp_unix import port32
    builds = [("mp-", "64-bit unix port")] + ([("mp32-", "32-bit unix port")] if port32() else [])
    for prefix, build in builds:
        for client in ("raw", "tinymqtt", "tinymqtt-aio"):
            for qos in (0, 1, 2):
                run = res["mp_throughput"]["%s%s %d" % (prefix, client, qos)]["runs"][0]
                assert run["received"] == run["sent"] == 300, (prefix, run)
        assert "### %s: " % build in page
    parts = res["footprint"].get("parts")  # (tools/bench/heap_parts.py: where the 32-bit heap from .mpy goes)
    assert parts and len(parts) == 3 and "Where the 32-bit heap from `.mpy` goes" in page
    for r in parts:
        assert r["functions"] > 50 and r["code"] > 5000 and r["names"] > 0, r
        assert 0 < r["import"] < r["made"] and r["import"] < r["connected"], r
    assert "Targets" in p.stdout
    assert "## Messages larger than the buffers, streamed" in page  # (tools/bench/stream.py)


def test_the_32bit_script_and_its_scripted_link_run_on_the_unix_port(tmp_path, library_built_once):
    """The footprint bench's WebAssembly rows run one script (footprint.SCRIPT32) through a link scripted inside
    the interpreter (tools/bench/fp/scripted_port.py); the 64-bit unix port runs the same tree here: for each row
    the client connects, and after a collection subscribes, publishes and gets its message back from the script.
    (Three rows share profile full's library: built once, tests/conftest.py.)"""
    from tools import boards, deploy
    from tools.bench import footprint
    for label, profile, app, version in footprint.ROWS:
        dest = footprint.tree(str(tmp_path / ("%s-%s-v%d" % (profile, app[:-3], version))), profile, app, version)
        opts = deploy.session_for(boards.get("esp32", profile=profile))
        got = footprint.run_unix(footprint.tree32(dest, app, version, opts), 512 * 1024, main="fp32.py")
        assert got and got["received"] == 1 and 0 < got["import"] < got["connected"], (label, profile, got)


def test_the_heap_per_mpy_byte_note_computes_the_core_that_16_kb_would_allow():
    """The footprint section's sentence on issue 12's heap target from plain .mpy (report.mpy_heap_ratio): the
    32-bit unix port rows (tools/mp32.py's build) give each client's import heap per .mpy byte and the mqtt311
    core a 16 KB connected client would allow at its own ratio; made-up rows here, checked to the byte."""
    from tools.bench.report import mpy_heap_ratio
    rows = [{"client": "tinymqtt blocking", "profile": "mqtt311", "mpy": 10000,
             "u32": {"import": 15000, "connected": 19096}},
            {"client": "umqtt.simple 1.3.4", "profile": "-", "mpy": 2000, "u32": {"import": 3500, "connected": 3800}},
            {"client": "micropython-mqtt (mqtt_async) 0.7b4", "profile": "-", "mpy": 8000, "u32": None}]
    text = " ".join(mpy_heap_ratio(rows))
    # 16384 - 4096 = 12288 B for the import; at 1.5 B of heap per .mpy byte: 8192 B of .mpy
    assert "tinymqtt blocking (mqtt311) 1.50, umqtt.simple 1.3.4 1.75." in text, text
    assert "adds 4.0 KB" in text and "leaves 12.0 KB" in text and "at most 8.0 KB of `.mpy`, against 9.8 KB" in text
    assert mpy_heap_ratio([dict(rows[0], u32=None)]) == []  # no 32-bit rows (a quick run): no sentence
