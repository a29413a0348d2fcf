# python -m tools.sim run [--board sim|linux|unix|unix32] [--heap BYTES] [--broker HOST:PORT] APP.py
# python -m tools.sim run --root DIR [MAIN.py]      (an already assembled board tree: DIR/lib, DIR/main.py)
# Runs the app on the simulated board (or with the Linux port under CPython, or under MicroPython's unix port:
# board "unix", or its 32-bit build: board "unix32"); its exit code passes through.
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

from tools.sim import PORTS, assemble, command


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m tools.sim")
    sub = ap.add_subparsers(dest="cmd", required=True)
    run = sub.add_parser("run", help="run an app (or a board tree) on the simulated board")
    run.add_argument("app", nargs="?", help="the app (becomes main.py); with --root, the main file in DIR")
    run.add_argument("--board", default="sim", choices=sorted(PORTS))
    run.add_argument("--heap", type=int, help="MicroPython's initial GC heap in bytes (sim)")
    run.add_argument("--broker", default="127.0.0.1:1883", metavar="HOST:PORT", help="written into config.py")
    run.add_argument("--root", metavar="DIR", help="run this board tree as it is instead of assembling one")
    a = ap.parse_args(argv)
    if a.root:
        argv, env = command(os.path.abspath(a.root), a.board, a.heap, a.app or "main.py")
        return subprocess.call(argv, env=env, cwd=a.root)
    if not a.app:
        ap.error("run needs APP.py or --root DIR")
    host, _, port = a.broker.rpartition(":")
    root = tempfile.mkdtemp(prefix="tinymqtt-sim-")
    try:
        assemble(a.app, root, a.board, {"BROKER_HOST": host or "127.0.0.1", "BROKER_PORT": int(port)})
        argv, env = command(root, a.board, a.heap)
        return subprocess.call(argv, env=env, cwd=root)
    except KeyboardInterrupt:
        return 130
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
