# A MicroPython-clean mini test runner (no pytest, no inspect): imports modules, calls every `test_*`
# function without arguments, prints failures with their traceback, then "MicroPython: N passed, M failed"
# and a machine-readable "MPTEST-JSON {...}" line that tests/test_micropython.py parses.
import sys
import json

try:
    import micropython
except ImportError:  # lets the runner itself run on CPython too
    micropython = None


def _release_leaked_heap_lock():
    """Unlock a heap that a test left locked; returns how many locks were released. Allocates nothing."""
    if micropython is None:
        return 0
    micropython.heap_lock()
    depth = micropython.heap_unlock()  # returns the remaining depth; never unlock at depth 0 (it underflows)
    n = depth
    while depth > 0:
        depth = micropython.heap_unlock()
    return n


def _print_exception(e):
    if hasattr(sys, "print_exception"):
        sys.print_exception(e)
    else:
        import traceback
        traceback.print_exception(type(e), e, e.__traceback__)


def _tests(module_name):
    __import__(module_name)
    mod = sys.modules[module_name]
    for name in sorted(dir(mod)):
        obj = getattr(mod, name)
        if name.startswith("test_") and callable(obj) and not isinstance(obj, type):
            yield module_name + "." + name, obj


def _is_awaitable(r):
    return r is not None and (hasattr(r, "send") or hasattr(r, "__await__"))


class _Results:
    def __init__(self, verbose):
        self.passed = 0
        self.failures = []
        self.verbose = verbose

    def outcome(self, name, exc):
        leaked = _release_leaked_heap_lock()
        if exc is None and leaked:
            exc = AssertionError("test returned with the heap still locked (%d x heap_lock)" % leaked)
        if exc is None:
            self.passed += 1
            if self.verbose:
                print("ok", name)
            return
        self.failures.append(name)
        print("FAIL", name)
        _print_exception(exc)

    def finish(self):
        failed = len(self.failures)
        print("MicroPython: %d passed, %d failed" % (self.passed, failed))
        print("MPTEST-JSON " + json.dumps({"passed": self.passed, "failed": failed, "failures": self.failures}))
        return self.passed, failed


def run(module_names, verbose=False):
    """Run the sync tests of module_names; returns (passed, failed). Async tests fail: use arun()."""
    res = _Results(verbose)
    for mod in module_names:
        try:
            tests = list(_tests(mod))
        except Exception as e:
            res.outcome(mod + " (import)", e)
            continue
        for name, fn in tests:
            exc = None
            try:
                r = fn()
                if _is_awaitable(r):
                    exc = TypeError("async test: run it with `await mptest.arun(...)`")
            except Exception as e:
                exc = e
            res.outcome(name, exc)
    return res.finish()


async def arun(module_names, verbose=False):
    """Like run(), but awaits tests that are coroutines (`async def test_...`)."""
    res = _Results(verbose)
    for mod in module_names:
        try:
            tests = list(_tests(mod))
        except Exception as e:
            res.outcome(mod + " (import)", e)
            continue
        for name, fn in tests:
            exc = None
            try:
                r = fn()
                if _is_awaitable(r):
                    await r
            except Exception as e:
                exc = e
            res.outcome(name, exc)
    return res.finish()
