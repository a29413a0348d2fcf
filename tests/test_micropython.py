# Runs every tests/shared/test_*.py module under real MicroPython 1.27 (npm WebAssembly port) with
# tests/support/mptest.py and checks it ran exactly the tests those modules define; also checks the runner
# itself (errors, asyncio, versions).
import glob
import json
import os
import re

from tests.support import report
from tests.support.micropython import ROOT, describe, mp_check, run_micropython


def shared_modules():
    files = sorted(glob.glob(os.path.join(ROOT, "tests", "shared", "test_*.py")))
    return ["tests.shared." + os.path.basename(f)[:-3] for f in files]


def defined_tests(module):
    """The test functions a shared module defines (top-level `def test_*` / `async def test_*`)."""
    path = os.path.join(ROOT, *module.split(".")) + ".py"
    with open(path) as f:
        return [l for l in f if re.match(r"(async )?def test_", l)]


def test_shared_tests_pass_on_micropython():
    mods = shared_modules()
    expected = sum(len(defined_tests(m)) for m in mods)
    result = run_micropython("import mptest\nawait mptest.arun(%r)\n" % (mods,), timeout=300)
    lines = [l for l in result.stdout.splitlines() if l.startswith("MPTEST-JSON ")]
    assert lines, "no MPTEST-JSON line\n" + describe(result)
    counts = json.loads(lines[-1][len("MPTEST-JSON "):])
    report.record("MicroPython tests", "%d passed, %d failed" % (counts["passed"], counts["failed"]))
    assert counts["failed"] == 0 and result.returncode == 0, (
        "failed on MicroPython: %s\n%s" % (", ".join(counts["failures"]), describe(result)))
    assert counts["passed"] == expected, "ran %d of %d shared tests\n%s" % (counts["passed"], expected, describe(result))


def test_it_is_micropython_1_27():
    out = mp_check("import sys\nprint(sys.implementation.name, sys.implementation.version[:2])")
    assert out.split() == ["micropython", "(1,", "27)"], out


def test_a_python_error_fails_the_run():
    result = run_micropython("import sys\nprint('before')\nraise ValueError('boom')")
    assert result.returncode == 1 and result.stdout == "before\n"
    assert "ValueError: boom" in result.stderr


def test_top_level_await_and_asyncio():
    out = mp_check("import asyncio\nasync def f():\n    await asyncio.sleep_ms(1)\n    return 42\nprint(await f())")
    assert out == "42\n"


BAD_MODULE = '''
import micropython
def test_ok():
    pass
def test_fails():
    assert 1 == 2, "one is not two"
def test_leaks_heap_lock():
    micropython.heap_lock()
async def test_async_ok():
    pass
def test_raises_under_lock():
    micropython.heap_lock()
    x = [1]
'''


def test_mptest_reports_failures_and_recovers_a_leaked_heap_lock():
    code = "with open('mp_bad.py', 'w') as f:\n    f.write(%r)\nimport mptest\nawait mptest.arun(['mp_bad'])\n" % BAD_MODULE
    result = run_micropython(code, timeout=20)
    assert "MicroPython: 2 passed, 3 failed" in result.stdout, describe(result)
    assert "FAIL mp_bad.test_fails" in result.stdout and "one is not two" in result.stdout
    assert "FAIL mp_bad.test_leaks_heap_lock" in result.stdout and "heap still locked" in result.stdout
    assert "FAIL mp_bad.test_raises_under_lock" in result.stdout and "MemoryError" in result.stdout
