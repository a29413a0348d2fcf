# Allocation checks that run on both CPython and MicroPython: no_alloc() runs a call under
# micropython.heap_lock() (on CPython it just calls), bytes_per_call() measures heap bytes per call with
# gc.mem_alloc() (None on CPython). Trap on the WebAssembly MicroPython: an exception that escapes to the top
# level while the heap is still locked hangs the interpreter, so always unlock in a `finally` (as below).
import gc
import sys

IS_MICROPYTHON = sys.implementation.name == "micropython"
if IS_MICROPYTHON:
    import micropython


def micropython_only(why):
    """Skips the calling test on CPython, where it would check nothing (it must not count as passed there)."""
    if not IS_MICROPYTHON:
        import pytest
        pytest.skip("MicroPython only: " + why)


def _name(fn):
    try:
        return fn.__name__
    except AttributeError:  # MicroPython builtins have no __name__
        return repr(fn)


def no_alloc(fn, *args):
    """Call fn(*args) and return its result; on MicroPython fail if the call allocates anything."""
    if not IS_MICROPYTHON:
        return fn(*args)
    failed = False
    micropython.heap_lock()
    try:
        result = fn(*args)
    except MemoryError:  # under heap_lock the MemoryError carries no message nor inner traceback
        failed = True
    finally:
        micropython.heap_unlock()
    if failed:
        what = "%s%r" % (_name(fn), args)
        raise AssertionError("%s allocated on the heap (MemoryError under micropython.heap_lock)" % what[:200])
    return result


def bytes_per_call(fn, n=100, args=()):
    """Average heap bytes allocated per fn(*args) over n calls (MicroPython), or None on CPython.
    MicroPython allocates in 16-byte blocks, so results are multiples of 16/n."""
    if not IS_MICROPYTHON:
        return None
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        i = 0
        before = gc.mem_alloc()
        while i < n:  # a while loop with a local counter allocates nothing itself
            fn(*args)
            i += 1
        after = gc.mem_alloc()
    finally:
        if was_enabled:
            gc.enable()
    return (after - before) / n
