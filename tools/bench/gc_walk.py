# python -m tools.bench.gc_walk [RUNS] [QOS]: why MicroPython's asyncio client is sometimes half as fast as in other
# runs of the same code. A diagnosis, not a figure for the report.
#
# MicroPython (ESP32, RP2040 and unix ports alike; not the WebAssembly build, which has a Python stack) gives a call
# whose locals and stack need more than 11 words a frame on the heap, and frees it at the return. gc_alloc() finds
# room by walking the allocation table from the lowest block freed since (gc_last_free_atb_index), and moves that
# start forward only after a one-block allocation: so every frame allocation walks from the lowest small hole to the
# first hole large enough for it. Where that hole lies is a matter of the heap's layout, and when it lies above the
# client's large buffers every call of the publish path walks across them.
#
# This tool builds the 32-bit unix port once more (about 30 s, cached beside tools/mp32.py's build) with a counter in
# gc_alloc() read by gc.walk(): (allocations, allocation-table bytes searched). It then runs tools/bench/
# gc_walk_app.py, the clients CLIENTS names (environment: "aio,blocking"; also "nowait"; WINDOW: messages in flight,
# 1000; STACK_WORDS: a build whose calls keep frames up to that many words on the C stack, 11 as MicroPython's
# own; LOW_HEAP=1: a build whose heap lies at 256 MB, where id() gives small ints as on a board, not above 1 GiB;
# OUT_SIZE, IN_SIZE: the clients' buffers, 65536 each as the bench's publishers have), RUNS times each, through
# the bench's mosquitto with a subscriber taking every message (as the bench's counter does), and prints per
# message: allocations, table bytes searched per allocation, msgs/s, CPU, bytes still allocated. N: messages per run
# (50000). TRACE=K: every K messages, where the search starts and where the last frame went, beside the buffers.
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time

from tools import mp32
from tools.bench.broker import BenchBroker

ROOT = mp32.REPO
APP = os.path.join(ROOT, "tools", "bench", "gc_walk_app.py")
N = int(os.environ.get("N", 50000))

# The counter: two edits to MicroPython's own source (py/gc.c counts, py/modgc.c adds gc.walk()). gc.walk() returns
# (allocations, allocation-table bytes searched, the block where the next search starts (gc_last_free_atb_index),
# the block of the last allocation larger than one block (a call frame, mostly), the heap's first address).
PATCHES = {
    "py/gc.c": [
        ("void *gc_alloc(size_t n_bytes, unsigned int alloc_flags) {",
         "size_t gc_walk_allocs, gc_walk_scanned, gc_walk_last_multi;\n"
         "void *gc_alloc(size_t n_bytes, unsigned int alloc_flags) {"),
        ("found:\n",
         "found:\n    gc_walk_allocs++;\n"
         "    gc_walk_scanned += i / BLOCKS_PER_ATB - area->gc_last_free_atb_index;\n"
         "    if (n_free > 1) gc_walk_last_multi = i - n_free + 1;\n"),
    ],
    "py/modgc.c": [
        ("static mp_obj_t gc_mem_free(void) {",
         "extern size_t gc_walk_allocs, gc_walk_scanned, gc_walk_last_multi;\n"
         "static mp_obj_t gc_walk(void) {\n"
         "    mp_obj_t t[5] = {mp_obj_new_int_from_uint(gc_walk_allocs), mp_obj_new_int_from_uint(gc_walk_scanned),\n"
         # (4 blocks per table byte)
         "        mp_obj_new_int_from_uint(MP_STATE_MEM(area).gc_last_free_atb_index * 4),\n"
         "        mp_obj_new_int_from_uint(gc_walk_last_multi),\n"
         "        mp_obj_new_int_from_uint((size_t)MP_STATE_MEM(area).gc_pool_start)};\n"
         "    return mp_obj_new_tuple(5, t);\n"
         "}\n"
         "static MP_DEFINE_CONST_FUN_OBJ_0(gc_walk_obj, gc_walk);\n"
         "static mp_obj_t gc_mem_free(void) {"),
        ("{ MP_ROM_QSTR(MP_QSTR_mem_free), MP_ROM_PTR(&gc_mem_free_obj) },",
         "{ MP_ROM_QSTR(MP_QSTR_mem_free), MP_ROM_PTR(&gc_mem_free_obj) },\n"
         "    { MP_ROM_QSTR(MP_QSTR_walk), MP_ROM_PTR(&gc_walk_obj) },"),
    ],
}


def build(stack_words=11, low_heap=False, log=print):
    """The instrumented port's path, built from tools/mp32.py's unpacked source (which must be built) if not yet.
    stack_words: the largest frame (in words) that a call keeps on the C stack, MicroPython's 11 unless changed.
    low_heap: the heap mapped at 256 MB instead of malloc()'s address above 1 GiB (its ids fit small ints)."""
    if not mp32.port():
        raise SystemExit("gc_walk: build the 32-bit port first (python -m tools.mp32)")
    patches = dict(PATCHES)
    if stack_words != 11:
        patches["py/objfun.c"] = [("#define VM_MAX_STATE_ON_STACK (sizeof(mp_uint_t) * 11)",
                                   "#define VM_MAX_STATE_ON_STACK (sizeof(mp_uint_t) * %d)" % stack_words)]
    if low_heap:
        patches["ports/unix/main.c"] = [
            ("#include <signal.h>", "#include <signal.h>\n#include <sys/mman.h>"),
            ("char *heap = malloc(heap_size);",
             "char *heap = mmap((void *)0x10000000, heap_size, PROT_READ | PROT_WRITE,"
             " MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);")]
    key = hashlib.sha256(json.dumps(patches).encode()).hexdigest()[:12]
    d = os.path.join(mp32.cache_dir(), "gcwalk-" + key)
    exe = os.path.join(d, "micropython")
    if os.access(exe, os.X_OK):
        return exe
    src = os.path.join(d, mp32.MP_DIR)
    shutil.rmtree(d, ignore_errors=True)
    log("gc_walk: copying the MicroPython source and building the instrumented port (about 30 s)")
    shutil.copytree(os.path.join(mp32.cache_dir(), mp32.MP_DIR), src, symlinks=True,
                    ignore=lambda folder, names: [n for n in names if n.startswith("build")])
    for name, edits in patches.items():
        path = os.path.join(src, name)
        with open(path) as f:
            text = f.read()
        for old, new in edits:
            if text.count(old) != 1:
                raise SystemExit("gc_walk: %s changed: %r not found once" % (name, old))
            text = text.replace(old, new)
        with open(path, "w") as f:
            f.write(text)
    mpy_cross = os.path.join(mp32.cache_dir(), mp32.MP_DIR, "mpy-cross", "build", "mpy-cross")  # (built by mp32)
    mp32._make(["-C", os.path.join(src, "ports", "unix"), "BUILD=build-walk", "MICROPY_MPYCROSS=" + mpy_cross]
               + list(mp32.FLAGS),
               os.path.join(d, "port.log"), log)
    shutil.copy(os.path.join(src, "ports", "unix", "build-walk", "micropython"), exe)
    shutil.rmtree(src)
    return exe


def run(exe, port, qos, client):
    env = dict(os.environ, MICROPYPATH=":".join([".frozen", os.path.join(ROOT, "lib"),
                                                  os.path.join(ROOT, "ports", "linux")]))
    p = subprocess.run([exe, "-X", "heapsize=32m", APP, str(port), str(qos), str(N), client], env=env,
                       capture_output=True, text=True, timeout=300)
    for x in p.stdout.splitlines():
        if x.startswith("TRACE "):
            t = json.loads(x[6:])
            print("  %7d messages: search starts at block %6d, last frame at %6d (buffers %s), %6.1f table bytes "
                  "searched per allocation" % (t["sent"], t["start"], t["frame"],
                                               " and ".join("%d-%d" % tuple(b) for b in t["buffers"]),
                                               t["atb_per_alloc"]))
    got = [json.loads(x[7:]) for x in p.stdout.splitlines() if x.startswith("RESULT ")]
    if p.returncode or not got:
        raise SystemExit("gc_walk: %s failed (exit %s): %s" % (client, p.returncode, p.stderr[-2000:]))
    return got[0]


def main(argv):
    runs = int(argv[0]) if argv else 3
    qos = int(argv[1]) if len(argv) > 1 else 1
    stack_words = int(os.environ.get("STACK_WORDS", 11))
    exe = build(stack_words, bool(os.environ.get("LOW_HEAP")))
    broker = BenchBroker().start()
    sub = subprocess.Popen(["mosquitto_sub", "-h", broker.host, "-p", str(broker.port), "-t", "bench/gcwalk",
                            "-q", "1", "-F", "x", "-N"], stdout=subprocess.DEVNULL)
    time.sleep(0.5)  # (subscribed before the first message)
    try:
        print("32-bit unix port (frames up to %d words on the C stack), QoS %d, %d x 64 B, a subscriber taking every "
              "message" % (stack_words, qos, N))
        for i in range(runs):
            for client in os.environ.get("CLIENTS", "aio,blocking").split(","):
                r = run(exe, broker.port, qos, client)
                print("run %d %-8s %6.0f msgs/s  CPU %5.1f us/msg  %4.1f allocations/msg  %6.1f table bytes searched "
                      "per allocation  %4.1f B/msg kept" % (i + 1, client, r["rate"], r["cpu_us"], r["allocs"],
                                                          r["atb_per_alloc"], r["kept"]))
    finally:
        sub.kill()
        broker.close()


if __name__ == "__main__":
    main(sys.argv[1:])
