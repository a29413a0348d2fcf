# python -m tools.bench.call_costs [ROUNDS] [CALLS]: what one call on the publish and ack paths costs in CPU on each
# MicroPython unix port this machine has (tools/bench/call_costs_app.py: no socket, no broker, so none of the
# machine's other processes share the figure): the session's publish, the blocking and asyncio clients' publish
# around it, the asyncio client's handling of a PUBACK, and one attribute read on each kind of session (an instance
# attribute, and a default the class keeps). Microseconds per call, the best of ROUNDS loops (5) of
# CALLS calls (20000), under heap_lock() (every call frame on the C stack: the interpreter's cost alone) and not (the
# allocator's search for the frames MicroPython puts on the heap counted too, which varies with the heap's layout).
# For trying a change on the hot path; a diagnosis, not a figure for the report.
import json
import os
import subprocess
import sys

from tools.bench import mp_unix

ROOT = mp_unix.ROOT
APP = os.path.join(ROOT, "tools", "bench", "call_costs_app.py")


def run(exe, rounds, calls):
    env = dict(os.environ, MICROPYPATH=":".join([".frozen", os.path.join(ROOT, "lib"),
                                                  os.path.join(ROOT, "ports", "linux")]))
    p = subprocess.run([exe, APP, str(rounds), str(calls)], env=env, capture_output=True, text=True, timeout=600)
    got = [line for line in p.stdout.splitlines() if line.startswith("RESULT ")]
    if p.returncode or not got:
        raise SystemExit("call_costs: %s failed (exit %s): %s" % (exe, p.returncode, p.stderr[-2000:]))
    return json.loads(got[0][len("RESULT "):])


def main(argv):
    rounds = int(argv[0]) if argv else 5
    calls = int(argv[1]) if len(argv) > 1 else 20000
    builds = [("64-bit", mp_unix.MICROPYTHON if mp_unix.available() else None), ("32-bit", mp_unix.port32())]
    for label, exe in builds:
        if not exe:
            print("%s unix port: not built here" % label)
            continue
        print("%s unix port, us per call (best of %d loops of %d): heap locked (frames on the C stack) / not"
              % (label, rounds, calls))
        for name, locked, us in run(exe, rounds, calls):
            print("  %-36s %6.2f / %6.2f" % (name, locked, us))


if __name__ == "__main__":
    main(sys.argv[1:])
