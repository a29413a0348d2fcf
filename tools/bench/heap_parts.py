# Where a connected client's heap goes on 32-bit MicroPython (the npm WebAssembly build) when the library is
# imported from plain .mpy, per footprint row: the functions and code bytes of the .mpy files it loads (a plain
# .mpy's bytecode is copied to the heap), the names the import interns (micropython.qstr_info(): count, and heap
# bytes with the pools' unused slots), and the heap after import, after Client() (its buffers and objects) and
# when connected to the scripted server. It shows what a smaller heap from .mpy would have to cut; ROMFS and
# freezing keep the code bytes in flash instead (tools/bench/footprint.py measures both).
#   python -m tools.bench.heap_parts
import os
import re
import subprocess
import sys
import tempfile

from tools import boards as boards_mod, deploy
from tools.bench import footprint as fp

SCRIPT = '''import gc, asyncio, micropython
import tinymqtt_port  # the scripted server, imported before the baseline as a board's port
async def settle():  # (this build frees garbage only once Python has returned to JS)
    await asyncio.sleep_ms(1)
    gc.collect()
    return gc.mem_alloc()
base = await settle()
print("NAMES before"); micropython.qstr_info()
from tinymqtt.%(module)s import %(cls)s
imported = await settle() - base
print("NAMES after"); micropython.qstr_info()
c = %(cls)s("b", 1883, reconnect=False, client_id="fp", version=%(version)d, **%(opts)r)
made = await settle() - base
r = c.connect()
if r is not None and hasattr(r, "send"):
    await asyncio.create_task(r)
print("HEAP", imported, made, await settle() - base)
'''
_QSTR = re.compile(r"n_qstr=(\d+), n_str_data_bytes=(\d+), n_total_bytes=(\d+)")


def code_parts(mpy):
    """(functions, bytes of raw code: preludes and bytecode) of a bytecode .mpy (format v6: MicroPython's
    py/persistentcode.c: a header, the qstr table, the constant objects, then the module's raw code and its
    children's, each a var-uint kind-and-length, its bytes, and when it has children their count)."""
    pos = 4

    def uint():
        nonlocal pos
        v = 0
        while True:
            b = mpy[pos]
            pos += 1
            v = v << 7 | b & 0x7F
            if not b & 0x80:
                return v

    def skip_obj():  # a constant: tuple (10) of constants; str (5), bytes (6), int, float, complex: length, text
        nonlocal pos
        kind = mpy[pos]
        pos += 1
        if kind == 10:
            for _ in range(uint()):
                skip_obj()
        elif 4 < kind < 10:
            n = uint()
            pos += n + (kind in (5, 6))

    def functions():
        nonlocal pos
        kind_len = uint()
        pos += kind_len >> 3
        return 1 + (sum(functions() for _ in range(uint())) if kind_len & 4 else 0)
    if mpy[2] & 0x40:  # (architecture flags: a var-uint)
        uint()
    n_qstr, n_obj = uint(), uint()
    for _ in range(n_qstr):
        v = uint()
        if not v & 1:  # (not one of the firmware's static qstrs: its text and a NUL follow)
            pos += (v >> 1) + 1
    for _ in range(n_obj):
        skip_obj()
    start = pos
    return functions() - 1, len(mpy) - start  # (the module's own top-level code is no function)


def measure(row, tmp):
    label, profile, app, version = row
    dest = fp.tree(os.path.join(tmp, "%s-%s" % (profile, app[:-3])), profile, app, version)
    opts = deploy.session_for(boards_mod.get("esp32", profile=profile))
    d32 = fp.tree32(dest, app, version, opts)
    funcs = code = 0
    lib = os.path.join(d32, "lib", "tinymqtt")
    for name in sorted(os.listdir(lib)):
        if name[:-4] in {m[9:-3] for m in fp._loaded(profile, app, version)} | {"__init__"}:
            with open(os.path.join(lib, name), "rb") as f:
                n, b = code_parts(f.read())
            funcs, code = funcs + n, code + b
    module, cls = ("aio", "AsyncClient") if "aio" in app else ("client", "Client")
    p = subprocess.run(["node", fp.MP_RUN, "--root", d32], input=SCRIPT % {
        "module": module, "cls": cls, "version": version, "opts": opts}, capture_output=True, text=True,
        timeout=120, cwd=fp.ROOT)
    q = [tuple(map(int, m.groups())) for m in _QSTR.finditer(p.stdout)]
    heap = [line.split()[1:] for line in p.stdout.splitlines() if line.startswith("HEAP ")]
    if p.returncode or len(q) != 2 or not heap:
        raise RuntimeError("%s (%s) failed:\n%s\n%s" % (label, profile, p.stdout[-1500:], p.stderr[-1500:]))
    imported, made, connected = map(int, heap[0])
    return {"client": label, "profile": profile, "functions": funcs, "code": code, "names": q[1][0] - q[0][0],
            "names_heap": q[1][2] - q[0][2], "import": imported, "made": made, "connected": connected}


def table(rows):
    out = ["| client | profile | functions | code bytes (.mpy) | names interned (heap) | heap after import | "
           "after `Client()` | connected |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append("| %s | %s | %d | %d | %d (%d B) | %d B | %d B | %d B |" % (
            r["client"], r["profile"], r["functions"], r["code"], r["names"], r["names_heap"], r["import"],
            r["made"], r["connected"]))
    return "\n".join(out)


def main():
    if not fp.wasm_available():
        print("heap_parts: needs node and the npm MicroPython (make test installs both)", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(prefix="tinymqtt-parts-") as tmp:
        rows = [measure(row, tmp) for row in fp.ROWS if "3.1.1" not in row[0]]
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
