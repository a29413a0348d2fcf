# Streamed messages on real MicroPython (issue 33, docs/streaming.md): `python -m tools.bench.stream` starts its
# own mosquitto on a free loopback port and prints
#   1. the heap a streamed receive needs for 64 KB, 256 KB and 1 MB images (the most gc.mem_alloc() seen during
#      each, tests/sim_apps/stream_heap.py) on the 64-bit and 32-bit unix ports, with the esp32's buffers and a
#      -X heapsize smaller than the 256 KB image;
#   2. the throughput of a 1 MB payload streamed into and out of the 64-bit unix port through mosquitto, beside a
#      raw MicroPython socket moving the same bytes straight to and from this process (tools/bench/stream_app.py).
import os
import socket
import sys
import threading

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
for _d in (_REPO, os.path.join(_REPO, "lib"), os.path.join(_REPO, "ports", "linux")):
    if _d not in sys.path:
        sys.path.insert(0, _d)

import tools.sim  # noqa: E402
from tests.support.broker import Mosquitto  # noqa: E402
from tinymqtt.client import Client  # noqa: E402

SIZES = (64 << 10, 256 << 10, 1 << 20)
HEAP_APP = os.path.join(_REPO, "tests", "sim_apps", "stream_heap.py")
APP = os.path.join(_REPO, "tools", "bench", "stream_app.py")


def images(b, prefix):
    tx = Client(b.host, b.port, client_id="bench-img", version=5)
    tx.connect()
    for size in SIZES:
        tx.wait_for(tx.publish(prefix + str(size), os.urandom(size), 1, retain=True), 60)
    tx.disconnect()


def raw_peers(n, rounds):
    """A sender (n bytes to each who connects) and a sink (reads n bytes, answers one byte), rounds connections
    each: their ports."""
    data = os.urandom(n)

    def sender(srv):
        for _ in range(rounds):
            conn, _ = srv.accept()
            conn.sendall(data)
            conn.close()

    def sink(srv):
        for _ in range(rounds):
            conn, _ = srv.accept()
            k = 0
            while k < n:
                d = conn.recv(1 << 16)
                if not d:
                    break
                k += len(d)
            conn.sendall(b"k")
            conn.close()

    ports = []
    for fn in (sender, sink):
        srv = socket.create_server(("127.0.0.1", 0))
        ports.append(srv.getsockname()[1])
        threading.Thread(target=fn, args=(srv,), daemon=True).start()
    return ports


def run(app, board, heap, env):
    p = tools.sim.run_app(app, env=env, board=board, heap=heap, timeout=300)
    res = tools.sim.results(p.stdout)
    if p.returncode or len(res) != 1:
        raise SystemExit("%s on %s failed:\n%s\n%s" % (app, board, p.stdout[-2000:], p.stderr[-2000:]))
    return res[0]


def main():
    with Mosquitto() as b:
        prefix = "bench/stream/"
        images(b, prefix)
        base = dict(BROKER_HOST=b.host, BROKER_PORT=b.port, PREFIX=prefix, SIZES=list(SIZES), VERSION=5)
        print("Streamed receive (subscribe chunks=True, MQTT 5, 4 KB receive buffer): most heap in use, bytes")
        print("%-28s %10s %10s %10s" % ("", "64 KB", "256 KB", "1 MB"))
        for board, heap in (("unix", "160k"), ("unix32", "128k")):
            if board == "unix32" and not tools.sim.micropython32():
                print("%-28s (no 32-bit unix port: python -m tools.mp32)" % board)
                continue
            r = run(HEAP_APP, board, heap, dict(base, CLIENT_ID="bench-heap-" + board))
            assert all(r[str(s)]["bytes"] == s for s in SIZES), r
            print("%-28s %10d %10d %10d" % ("%s (-X heapsize=%s)" % (board, heap),
                                             *(r[str(s)]["peak"] for s in SIZES)))
            print("%-28s %10d (after connect and a collection)" % ("", r["connected"]))
        rounds = 5
        sender, sink = raw_peers(1 << 20, rounds)
        r = run(APP, "unix", "256k", dict(base, CLIENT_ID="bench-stream", RAW_SENDER=sender, RAW_SINK=sink,
                                          ROUNDS=rounds))
        assert r["raw_received"] == r["bytes"] and r["publish_acked"], r
        mb = r["bytes"] / (1 << 20)
        print("\n1 MB on the 64-bit unix port, 4 KB in / 2 KB out (time on the board, best of %d; MB/s)" % rounds)
        for label, key in (("tinymqtt streamed receive, QoS 1 (via mosquitto)", "receive_us"),
                           ("raw socket receive, 4 KB reads (direct)", "raw_receive_us"),
                           ("tinymqtt streamed publish from a file, QoS 1 (via mosquitto)", "publish_us"),
                           ("raw socket send from the file, 2 KB writes (direct)", "raw_send_us")):
            us = max(r[key], 1)
            print("%-62s %8.1f ms %7.1f MB/s" % (label, us / 1000, mb / (us / 1e6)))


if __name__ == "__main__":
    main()
