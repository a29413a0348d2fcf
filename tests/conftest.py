# Shared pytest wiring: the `broker` / `make_broker` fixtures (real mosquitto), the `micropython` fixture
# (run a snippet under real MicroPython), `library_built_once` (a board's deploy library built once a session),
# `async def test_*` support via asyncio.run, and the "tinymqtt figures" block printed at the end from
# tests/support/report.py.
import asyncio
import inspect
import os

import pytest

from tests.support import report
from tests.support.broker import Mosquitto
from tests.support.micropython import mp_check

# Every Spark JVM a test starts (the driver pyspark launches, a cluster's executors; tools/spark/cluster.py
# already does this for its master and workers) runs with HotSpot's quick compiler only. A test's Spark lives
# for seconds to a minute of small batches: the optimising compiler's CPU at start-up is never paid back, and on
# two cores it is taken from the run itself (a cold audit measured 36 s with it, 22 s without). What the tests
# check (rows, offsets, acks, loss, duplicates) does not depend on the compiler; timing figures come from
# `make bench`, which does not set this. Spark's own variable, so a caller's setting wins.
os.environ.setdefault("PYSPARK_SUBMIT_ARGS", "--driver-java-options=-XX:TieredStopAtLevel=1 "
                      "--conf spark.executor.extraJavaOptions=-XX:TieredStopAtLevel=1 pyspark-shell")


@pytest.fixture(scope="session")
def broker():
    """One mosquitto (default config) shared by the whole session: use unique topics / client ids."""
    with Mosquitto() as b:
        yield b


@pytest.fixture
def make_broker():
    """make_broker(extra_conf="", persistence=False) -> a started Mosquitto, stopped after the test."""
    started = []

    def make(extra_conf="", persistence=False):
        b = Mosquitto(extra_conf=extra_conf, persistence=persistence)
        started.append(b)
        return b.start()

    yield make
    for b in started:
        b.close()


@pytest.fixture
def micropython():
    """micropython(code, paths=(), timeout=60) -> stdout; fails the test unless the code exits 0."""
    return mp_check


class _Libraries(dict):
    """A board's build inputs -> tools.deploy.library_files' result, kept for the session; fresh: build for real
    (and keep what was built) until the test ends."""
    fresh = False


_LIBRARIES = _Libraries()


@pytest.fixture
def library_built_once(monkeypatch):
    """tools.deploy.library_files memoised for the session by the board's build inputs: a library build is seconds
    on a board with short errors (every module shortened, renamed and through mpy-cross), and the same inputs give
    the same files. For tests that deploy the same board's library again to check what deploy does with it (the
    tree, the device, the config), not how it compiles. Returns the cache: set .fresh to build for real."""
    import tools.deploy as deploy
    real = deploy.library_files

    def library_files(board, tmp, source=False):
        key = (board.name, board.profile, tuple(board.lib), tuple(board.bundle), board.short_errors,
               tuple(board.mpy_cross), tuple(sorted(deploy.WITHOUT)), source)
        if _LIBRARIES.fresh or key not in _LIBRARIES:
            _LIBRARIES[key] = real(board, tmp, source)
        return list(_LIBRARIES[key])
    monkeypatch.setattr(deploy, "library_files", library_files)
    _LIBRARIES.fresh = False
    yield _LIBRARIES
    _LIBRARIES.fresh = False


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    """Run `async def test_*` (e.g. in tests/shared, which MicroPython awaits too) with asyncio.run."""
    if inspect.iscoroutinefunction(pyfuncitem.obj):
        names = pyfuncitem._fixtureinfo.argnames
        asyncio.run(pyfuncitem.obj(**{n: pyfuncitem.funcargs[n] for n in names}))
        return True
    return None


def pytest_terminal_summary(terminalreporter):
    counts = ["%d %s" % (len(terminalreporter.stats.get(k, [])), k) for k in ("passed", "failed", "error", "skipped")
              if k == "passed" or terminalreporter.stats.get(k)]
    terminalreporter.write_sep("=", "tinymqtt figures")
    terminalreporter.write_line("CPython tests: %s" % ", ".join(counts))
    for key, value in report.figures():
        terminalreporter.write_line("%s: %s" % (key, value))
