# Streamed messages on real MicroPython (issue 33, docs/streaming.md): the "stream" section of `python -m tools.bench`
# (`python -m tools.bench --only stream` runs it alone; `python -m tools.bench.stream` too). It starts its own
# mosquitto on a free loopback port, publishes 64 KB, 256 KB and 1 MB images retained at QoS 1, and measures on
# the 64-bit and the 32-bit unix ports (tools/mp32.py builds the latter), with the esp32's buffers (4 KB in, 2 KB
# out), MQTT 5:
#   1. the heap a streamed receive needs (tests/sim_apps/stream_heap.py): the most gc.mem_alloc() seen during the
#      receive of each image, with a -X heapsize smaller than the 256 KB image; the bytes allocated per chunk
#      through the public API over every chunk of the 1 MB image (collection off) beside one memoryview's size
#      measured in the same interpreter; and, by bisection, the smallest -X heapsize with which each image alone
#      is received whole (not in a --quick run);
#   2. the time of a 1 MB payload streamed into the board (subscribe chunks=True, to its last chunk) and out of
#      it (publish from a file with length=, to its PUBACK) through mosquitto, beside a raw MicroPython socket
#      moving the same bytes in the same run, through the same mosquitto with MQTT packets encoded by hand, and
#      straight to and from this process (tools/bench/stream_app.py).
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
for _d in (_REPO, os.path.join(_REPO, "lib"), os.path.join(_REPO, "ports", "linux")):
    if _d not in sys.path:
        sys.path.insert(0, _d)

import tools.sim  # noqa: E402
from tools import deploy  # noqa: E402
from tests.support.broker import Mosquitto  # noqa: E402
from tinymqtt.client import Client  # noqa: E402

SIZES = (64 << 10, 256 << 10, 1 << 20)
HEAP_APP = os.path.join(_REPO, "tests", "sim_apps", "stream_heap.py")
APP = os.path.join(_REPO, "tools", "bench", "stream_app.py")
PORTS = (("unix", "64-bit unix port", 160 << 10), ("unix32", "32-bit unix port", 128 << 10))  # -X heapsize
STEP = 1024  # the smallest heap's resolution
RATES = (("receive_us", "tinymqtt streamed receive, QoS 1, via mosquitto", "mqtt_raw_receive_us"),
         ("mqtt_raw_receive_us", "raw socket, SUBSCRIBE by hand (QoS 0), via mosquitto", None),
         ("raw_receive_us", "raw socket receive, 4 KB reads, direct (no broker)", None),
         ("publish_us", "tinymqtt streamed publish from a file, QoS 1, via mosquitto (to its PUBACK)",
          "mqtt_raw_publish_us"),
         ("mqtt_raw_publish_us", "raw socket, PUBLISH by hand + the same file, QoS 1, via mosquitto (to its PUBACK)",
          None),
         ("raw_send_us", "raw socket send from the same file, 2 KB writes, direct (to the sink's answer)", None))


def images(b, prefix):
    # (out_size named: the bench's venv holds PyPI's `micropython` package, the unix port, and tinymqtt's
    # errors.py then imports const from it, so this CPython process takes a board's fixed 4 KB buffers)
    tx = Client(b.host, b.port, client_id="bench-img", version=5, out_size=max(SIZES) + 256)
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


def attempt(app, board, heap, env, timeout=120, out=None):
    """The app's one RESULT, or None when it did not run to its end (a MemoryError, a timeout). The library is
    on the board as portable .mpy, as tools/deploy installs it (compiled from source on the board, the compiler's
    own heap would set the smallest heap, not the receive)."""
    root = tempfile.mkdtemp(prefix="tinymqtt-stream-")
    try:
        tools.sim.assemble(app, root, board, env)
        for d in (os.path.join(root, "lib"), os.path.join(root, "lib", "tinymqtt")):
            for name in os.listdir(d):
                if name.endswith(".py"):
                    path = os.path.join(d, name)
                    with open(path[:-3] + ".mpy", "wb") as f:
                        f.write(deploy.compile_mpy(path, os.path.relpath(path, os.path.join(root, "lib")), [], root))
                    os.remove(path)
        argv, penv = tools.sim.command(root, board, heap)
        p = subprocess.run(argv, cwd=root, env=penv, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if out is not None:
        out.append(p)
    res = tools.sim.results(p.stdout)
    return res[0] if p.returncode == 0 and len(res) == 1 else None


def run(app, board, heap, env):
    out = []
    r = attempt(app, board, heap, env, timeout=300, out=out)
    if r is None:
        raise RuntimeError("%s on %s failed:\n%s" % (app, board, out and out[0].stdout[-2000:] + out[0].stderr[-2000:]))
    return r


def smallest(board, size, env, lo, hi):
    """The smallest -X heapsize (to STEP bytes) with which the board receives the image of `size` bytes whole
    (alone in its run, no per-chunk count; size None: connects, subscribes to nothing and ends), by bisection
    between lo (fails or untried) and hi (works); None when hi fails. Near the edge success is uneven
    (fragmentation), so differences of a KB or two are noise."""
    def works(heap):
        r = attempt(HEAP_APP, board, heap, dict(env, SIZES=[size] if size else [], COUNT=False), timeout=60)
        return r is not None and (not size or r[str(size)]["bytes"] == r[str(size)]["total"] == size)

    if not works(hi):
        return None
    lo = lo // STEP * STEP
    while hi - lo > STEP:
        mid = (lo + hi) // 2 // STEP * STEP
        if works(mid):
            hi = mid
        else:
            lo = mid
    return hi


def measure(quick=False, log=print):
    """{"sizes": [...], "heap": {port: {...}}, "rates": {port: {...}}, "rounds": n}"""
    rounds = 1 if quick else 10
    res = {"sizes": list(SIZES), "heap": {}, "rates": {}, "rounds": rounds}
    with Mosquitto() as b:
        prefix = "bench/stream/"
        images(b, prefix)
        base = dict(BROKER_HOST=b.host, BROKER_PORT=b.port, PREFIX=prefix, SIZES=list(SIZES), VERSION=5)
        for board, label, heap in PORTS:
            if board == "unix32" and not tools.sim.micropython32():
                log("bench: stream: no 32-bit unix port (python -m tools.mp32): its rows are left out")
                continue
            env = dict(base, CLIENT_ID="bench-heap-" + board)
            log("bench: stream: heap of a streamed receive, %s" % label)
            r = run(HEAP_APP, board, heap, env)
            assert all(r[str(s)]["bytes"] == r[str(s)]["total"] == s for s in SIZES), r
            row = {"label": label, "heapsize": heap, "connected": r["connected"], "view": r["view"],
                   "count": r["count"], "peak": {str(s): r[str(s)]["peak"] for s in SIZES},
                   "chunks": {str(s): r[str(s)]["chunks"] for s in SIZES}, "smallest": None}
            if not quick:
                row["smallest"] = {}
                for s in SIZES + (None,):  # (None: connected, no image: what the receive adds is the difference)
                    row["smallest"][str(s)] = smallest(board, s, env, r["connected"], heap)
                    log("bench: stream: smallest heap, %s, %s: %s" % (
                        label, "%d KB image" % (s >> 10) if s else "connected only", row["smallest"][str(s)]))
            res["heap"][board] = row
        for board, label, _ in PORTS:
            if board not in res["heap"]:
                continue
            log("bench: stream: 1 MB streamed in and out, %s, %d round(s)" % (label, rounds))
            sender, sink = raw_peers(1 << 20, rounds)
            r = run(APP, board, "256k", dict(base, CLIENT_ID="bench-stream-" + board, RAW_SENDER=sender,
                                             RAW_SINK=sink, ROUNDS=rounds))
            assert r["raw_received"] == r["bytes"] and r["publish_acked"], r
            assert r["mqtt_raw_received"] and r["mqtt_raw_acked"], r
            res["rates"][board] = dict(r, label=label)
    return res


# ------------------------------------------------------------------------------------------ tables

def _kb(n):
    return "—" if n is None else "%.1f KB" % (n / 1024)


def heap_rows(res):
    sizes = res["sizes"]
    head = ["streamed receive, 4 KB receive buffer, MQTT 5"] + ["%s image" % _size(s) for s in sizes] + \
           ["connected, no image"]
    rows = []
    for board, h in res["heap"].items():
        rows.append(["%s: most heap in use (`-X heapsize=%dk`)" % (h["label"], h["heapsize"] >> 10)] +
                    [_kb(h["peak"][str(s)]) for s in sizes] + [_kb(h["connected"])])
        if h.get("smallest"):
            rows.append(["%s: smallest `-X heapsize` that receives it" % h["label"]] +
                        [_kb(h["smallest"][str(s)]) for s in sizes] + [_kb(h["smallest"]["None"])])
    return head, rows


def chunk_lines(res):
    """What the public API allocated per chunk, a sentence per port."""
    L = []
    for board, h in res["heap"].items():
        n = h["count"]
        L.append("- %s: %.1f B allocated per chunk on average over %d chunks of the %s image, at most %d B in one; "
                 "one memoryview is %d B in the same interpreter." % (h["label"], n["sum"] / n["steps"], n["steps"],
                                                                   _size(n["size"]), n["step_max"], h["view"]))
    return L


def rate_rows(res):
    head = ["1 MB, 4 KB in / 2 KB out, best of %d" % res["rounds"], "ms", "MB/s",
            "against the raw socket via mosquitto"]
    rows = []
    for board, r in res["rates"].items():
        mb = r["bytes"] / (1 << 20)
        for key, what, raw in RATES:
            us = max(r[key], 1)
            rows.append(["%s: %s" % (r["label"], what), "%.1f" % (us / 1000), "%.1f" % (mb / (us / 1e6)),
                         "%.2f" % (r[raw] / us) if raw else ""])
    return head, rows


def _size(n):
    return "%d MB" % (n >> 20) if n >= 1 << 20 else "%d KB" % (n >> 10)


NOTE = ("The library is on the board as portable `.mpy`, as `tools/deploy` installs it (its bytecode is loaded into "
        "the heap: most of the connected figure). Most heap in use: the largest `gc.mem_alloc()` seen at any chunk "
        "(garbage included) after a collection before the receive. The "
        "smallest heap: each image alone, by bisection to 1 KB (near the edge success is uneven by a KB or two), "
        "beside the same program connecting and ending without an image. "
        "Allocated per chunk: with automatic collection off, `gc.mem_alloc()` from one call of the handler to the "
        "next over every chunk of the 1 MB image (the chunk's view is the one object the API makes; "
        "`tests/test_streaming.py` holds every chunk to it). Throughput: the time on the board (`ticks_us`) of "
        "a retained 1 MB image received through a `chunks=True` subscription to its last chunk, and of a 1 MB "
        "file published with `length=` at QoS 1 to its PUBACK, each through mosquitto; the raw socket moves the "
        "same bytes straight to or from the bench's process in the same run. On loopback the raw socket reads "
        "what the kernel already holds; a board's Wi-Fi is far slower than either, so these say what the client "
        "costs per byte, not what a board will see.")


def markdown(res):
    from tools.bench.report import table
    L = ["Messages larger than the buffers (docs/streaming.md), on the unix ports with the esp32's buffers, "
         "through a mosquitto of this section's own.", ""]
    if res["heap"]:
        L += [table(*heap_rows(res)), ""] + chunk_lines(res) + [""]
    if res["rates"]:
        L += [table(*rate_rows(res)), ""]
    return L + [NOTE, ""]


def console(res):
    from tools.bench.report import table
    parts = [table(*heap_rows(res)), "\n".join(chunk_lines(res))] if res["heap"] else []
    return "\n\n".join(parts + ([table(*rate_rows(res))] if res["rates"] else []))


def main(argv=None):
    import argparse
    ap = argparse.ArgumentParser(prog="python -m tools.bench.stream")
    ap.add_argument("--quick", action="store_true", help="one round, no smallest heap (seconds)")
    a = ap.parse_args(argv)
    print(console(measure(a.quick, log=lambda *x: print(*x, flush=True))))


if __name__ == "__main__":
    main()
