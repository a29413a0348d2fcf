# Records which library and port functions run during one call of the real client, as a call tree: what
# docs/architecture.md's traces show and tests/test_architecture.py keeps true. sys.setprofile sees every Python
# function call; only the library's (lib/tinymqtt) and the ports' (ports/) are kept, named module.Class.function.
import os
import sys

_ROOTS = (os.sep + os.path.join("lib", "tinymqtt") + os.sep, os.sep + "ports" + os.sep)


def _name(frame):
    code = frame.f_code
    path = os.path.normpath(code.co_filename)
    mod = os.path.splitext(os.path.basename(path))[0]
    qual = getattr(code, "co_qualname", code.co_name)
    return "%s.%s" % (mod, qual)


def trace(fn, *args, **kwargs):
    """(fn's result, [(depth, name)]): every library or port function fn called, in call order, with its depth
    below fn (1: called by the caller's own code)."""
    calls = []
    depth = [0]
    stack = []

    def prof(frame, event, arg):
        if event == "call":
            path = os.path.normpath(frame.f_code.co_filename)
            mine = any(r in path for r in _ROOTS) and frame.f_code.co_name != "<lambda>"
            if mine:
                depth[0] += 1
                calls.append((depth[0], _name(frame)))
            stack.append(mine)
        elif event == "return" and stack:
            if stack.pop():
                depth[0] -= 1

    sys.setprofile(prof)
    try:
        result = fn(*args, **kwargs)
    finally:
        sys.setprofile(None)
    return result, calls


def render(calls):
    """The call tree as indented lines, one per call."""
    return ["    " * (d - 1) + n for d, n in calls]
