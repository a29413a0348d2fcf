# A short, bounded run of the coverage-guided fuzzers in tools/fuzz (atheris / libFuzzer): the decoder and the
# session's receive path, from the seed corpus in tools/fuzz/corpus/, a fixed libFuzzer seed, new inputs written to
# a temporary dir. Any crash (anything but the allowed MQTTErrors escaping, a broken invariant, a malformed packet
# written by the client) fails with the crashing input's bytes. Long runs: python -m tools.fuzz session -runs=1000000
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

atheris = pytest.importorskip(
    "atheris", reason="atheris is not installed (pip install atheris==3.0.0): coverage-guided fuzzing skipped")

from tests.support import report  # noqa: E402
from tools.fuzz import seeds  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RUNS = {"decoder": int(os.environ.get("TINYMQTT_ATHERIS_RUNS", "20000")),
        "session": int(os.environ.get("TINYMQTT_ATHERIS_RUNS", "3000"))}


def test_seed_corpus_is_current():
    """The committed corpus is what `python -m tools.fuzz seeds` makes (and stays small)."""
    total = 0
    for target, items in seeds().items():
        for name, data in items.items():
            path = ROOT / "tools" / "fuzz" / "corpus" / target / name
            assert path.read_bytes() == data, "%s is stale: run python -m tools.fuzz seeds" % path
            total += len(data)
    assert total < 16384


@pytest.mark.parametrize("target", ["decoder", "session"])
def test_atheris(target, tmp_path):
    new = tmp_path / "new"
    new.mkdir()
    argv = [sys.executable, "-m", "tools.fuzz", target, "-runs=%d" % RUNS[target], "-seed=20261121",
            "-max_total_time=90", "-artifact_prefix=%s/" % tmp_path, str(new),
            str(ROOT / "tools" / "fuzz" / "corpus" / target)]
    r = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=150)
    crashes = sorted(tmp_path.glob("crash-*")) + sorted(tmp_path.glob("timeout-*")) + sorted(tmp_path.glob("oom-*"))
    tail = "\n".join(r.stderr.splitlines()[-40:])
    assert r.returncode == 0 and not crashes, "%s fuzzer failed (exit %d); input %r\n%s" % (
        target, r.returncode, crashes[0].read_bytes() if crashes else None, tail)
    done = re.search(r"Done (\d+) runs", r.stderr)
    cov = re.findall(r"cov: (\d+)", r.stderr)
    assert done, tail
    report.record("atheris %s" % target, "%s executions, coverage %s edges, no crash" % (done.group(1),
                                                                                        cov[-1] if cov else "?"))
