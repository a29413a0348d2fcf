# How many bytes of .mpy each profile costs a board: the profile's library files exactly as tools/deploy writes
# them (the board's mpy-cross flags, short error text where the board asks, the profile's bundle as the one
# file tinymqtt/__init__.py it is), and prints bytes per file and the total.
#   python -m tools.size [--board esp32] [--profile NAME ...] [--json]
#   python -m tools.size --functions lib/tinymqtt/session.py [--profile mqtt311]   bytes per function: what
#                                       emptying each one saves (the profile's flags)
#   python -m tools.size --transforms   what each of deploy's transforms is worth: the total without it, minus with it
#   python -m tools.size --features     what each optional module costs a profile: its own .mpy and its hooks in the
#                                       others (tools/deploy/features.py), measured by building without it
#   python -m tools.size --without bundle ...   any of these with one of deploy's transforms off
#   python -m tools.size --heap         the 32-bit heap of a connected client (the footprint bench's three rows:
#                                       32-bit unix port with real sockets, and the WebAssembly build), nothing else
#   python -m tools.size --history 81aa425 HEAD   both, .mpy and --heap, of each commit built with its own tools
import argparse
import ast
import json
import os
import sys
import tempfile

from tools import boards as boards_mod
from tools.deploy import library_files, DeployError

REPO = boards_mod.REPO


def profile_sizes(board_name="esp32", profile="full"):
    """{module: .mpy bytes} for the profile's library files (lib/tinymqtt/*) as deploy writes them: a bundle is
    "tinymqtt/__init__.py" (what it holds: bundled(board_name, profile))."""
    board = boards_mod.get(board_name, profile=profile)
    with tempfile.TemporaryDirectory(prefix="tinymqtt-size-") as tmp:
        return {dest[4:-4] + ".py": len(data) for dest, data, _ in library_files(board, tmp)}


def bundled(board_name="esp32", profile="full"):
    """The modules the profile's tinymqtt/__init__ holds (boards.toml bundle)."""
    return list(boards_mod.get(board_name, profile=profile).bundle)


def function_sizes(path, board_name="esp32", profile="full"):
    """(module bytes, [(bytes, "name:line")]): what the module's .mpy (as deploy compiles it for the board) loses
    when each function's body becomes `pass`, largest first. What stays (a function's name, prelude and the
    function object it becomes at run time) is the price of having the function at all. The module is compiled
    on its own (bundled or not): the bytes per function are the same inside a bundle. profile: whose file set
    sets the feature flags (mqtt311: MQTT 5's, the handlers' and the stream's hooks compiled out)."""
    from tools.deploy import library_mpy
    board = boards_mod.get(board_name, profile=profile)
    name = "tinymqtt/" + os.path.basename(path)
    with open(path, encoding="utf-8") as f:
        text = f.read()
    lines = text.splitlines(True)
    with tempfile.TemporaryDirectory(prefix="tinymqtt-size-") as tmp:
        def size(src):
            p = os.path.join(tmp, "src", os.path.basename(path))
            os.makedirs(os.path.dirname(p), exist_ok=True)
            with open(p, "w", encoding="utf-8") as f:
                f.write(src)
            return len(library_mpy(board, p, name, tmp))
        base, out = size(text), []
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                a, b = node.body[0].lineno - 1, node.end_lineno
                body = lines[:a] + [" " * node.body[0].col_offset + "pass\n"] + ["\n"] * (b - a - 1) + lines[b:]
                out.append((base - size("".join(body)), "%s:%d" % (node.name, node.lineno)))
    return base, sorted(out, reverse=True)


def transform_sizes(board_name="esp32", profiles=None, transforms=None):
    """{transform: {profile: bytes}}: how many bytes of .mpy each profile gains when deploy builds it without that
    one transform (tools.deploy.TRANSFORMS), the others on; "all" maps to the totals with every one on."""
    import tools.deploy as deploy
    profiles = profiles or list(boards_mod.profiles())

    def totals():
        return {p: sum(profile_sizes(board_name, p).values()) for p in profiles}
    out = {"all": totals()}
    try:
        for t in transforms or deploy.TRANSFORMS:
            deploy.WITHOUT.clear()
            deploy.WITHOUT.add(t)
            out[t] = {p: n - out["all"][p] for p, n in totals().items()}
    finally:
        deploy.WITHOUT.clear()
    return out


def feature_sizes(board_name="esp32", profile="full"):
    """{flag: (modules left out, bytes)}: for each optional module of tools/deploy/features.FLAGS in the profile,
    the .mpy bytes the profile loses when deploy builds it without that module: the module itself (its share of
    the bundle, if bundled) and its hooks in the other files (`_FLAG = const(1)` compiled out). MQTT 5's
    session5.py and aliases.py go with props.py (they travel together)."""
    import dataclasses
    from tools.deploy.features import FLAGS
    from tools.deploy import library_files
    board = boards_mod.get(board_name, profile=profile)
    together = {"tinymqtt/props.py": ("tinymqtt/session5.py", "tinymqtt/aliases.py")}

    def total(b):
        with tempfile.TemporaryDirectory(prefix="tinymqtt-size-") as tmp:
            return {dest[4:-4] + ".py": len(data) for dest, data, _ in library_files(b, tmp)}
    base, out = total(board), {}
    for flag, module in FLAGS.items():
        if module not in board.lib:
            continue
        gone = (module,) + together.get(module, ())
        b = dataclasses.replace(board, lib=[m for m in board.lib if m not in gone],
                                bundle=[m for m in board.bundle if m not in gone])
        without = total(b)
        out[flag] = (" ".join(m[9:] for m in gone), sum(base.values()) - sum(without.values()))
    return out


def _rows():
    """The footprint bench's rows heap32() measures: its first three (a 3.1.1 application on full is its own
    question)."""
    from tools.bench import footprint as fp
    return fp.ROWS[:3]


def heap32(profiles=None, log=print):
    """[(label, profile, version, unix32, wasm)]: the 32-bit heap of a connected client, the footprint bench's
    rows (tools/bench/footprint.py ROWS: blocking on mqtt311 at 3.1.1, blocking and asyncio on full at MQTT 5), each
    {"import": B, "connected": B} or None: on the 32-bit unix port against a real mosquitto, and on the WebAssembly
    build through its scripted link (the least of footprint.WASM_RUNS runs)."""
    from tools.bench import footprint as fp
    from tools.bench.broker import BenchBroker
    from tools import deploy
    u32, rows = fp.port32(log), []
    broker = BenchBroker().start()
    try:
        with tempfile.TemporaryDirectory(prefix="tinymqtt-size-heap-") as tmp:
            for label, profile, app, version in _rows():
                if profiles and profile not in profiles:
                    continue
                dest = fp.tree(os.path.join(tmp, "%s-%s-%d" % (profile, app[:-3], version)), profile, app, version,
                               broker.host, broker.port)
                opts = deploy.session_for(boards_mod.get("esp32", profile=profile))
                u = fp.run_unix(dest, 512 * 1024, exe=u32) if u32 else None
                w = fp.run_wasm(fp.tree32(dest, app, version, opts), app, version, opts, fp.WASM_RUNS)
                rows.append((label, profile, version, u, w))
    finally:
        broker.close()
    return rows


# Run with an older commit's checkout first on sys.path (its deploy, boards.toml and footprint code: each
# commit measured as it built itself), by history(): .mpy per profile and the 32-bit heap rows of heap32().
_HISTORY = r'''
import json, os, sys, tempfile
from tools import boards as boards_mod, deploy, size
from tools.bench import footprint as fp
from tools.bench.broker import BenchBroker
fp.micropython = lambda: sys.argv[1]  # the 32-bit unix port (older footprint.py has no exe= parameter)
out = {"mpy": {p: sum(size.profile_sizes("esp32", p).values()) for p in ("mqtt311", "full")}, "heap": []}
broker = BenchBroker().start()
try:
    with tempfile.TemporaryDirectory() as tmp:
        for label, profile, app, version in fp.ROWS[:3]:
            dest = fp.tree(os.path.join(tmp, profile + app), profile, app, version, broker.host, broker.port)
            opts = deploy.session_for(boards_mod.get("esp32", profile=profile))
            w = fp.run_wasm(fp.tree32(dest, app, version, opts), app, version, opts, fp.WASM_RUNS)
            out["heap"].append([label, profile, version, fp.run_unix(dest, 512 * 1024), w])
finally:
    broker.close()
print("HISTORY " + json.dumps(out))
'''


def history(revs, log=print):
    """{rev: {"mpy": {profile: bytes}, "heap": heap32()'s rows}} of each commit, measured in a temporary git
    worktree of it with its own tools (from 81aa425 on: tools.size and the footprint bench's functions)."""
    import subprocess
    from tools.bench import footprint as fp
    u32, out = fp.port32(log), {}
    for rev in revs:
        with tempfile.TemporaryDirectory(prefix="tinymqtt-size-history-") as tmp:
            tree = os.path.join(tmp, "tree")
            subprocess.run(["git", "-C", REPO, "worktree", "add", "-q", "--detach", tree, rev], check=True)
            try:
                link = os.path.join(tree, "node_modules")
                if os.path.lexists(link):  # (a commit or two tracked a symlink there by mistake)
                    os.remove(link)
                os.symlink(os.path.join(REPO, "node_modules"), link)
                p = subprocess.run([sys.executable, "-c", _HISTORY, u32 or "micropython"], cwd=tree, text=True,
                                   capture_output=True, env=dict(os.environ, PYTHONPATH=tree), timeout=900)
                line = [x for x in p.stdout.splitlines() if x.startswith("HISTORY ")]
                out[rev] = json.loads(line[-1][8:]) if line else None
                if not line:
                    log("size: %s failed: %s" % (rev, (p.stderr or p.stdout)[-600:]))
            finally:
                subprocess.run(["git", "-C", REPO, "worktree", "remove", "--force", tree], check=False)
    return out


# The part of tools/deploy that rewrites the library's source (issue 30: at most 400 lines); the rest of
# tools/deploy builds, copies and talks to the device.
REWRITING = ("shorten.py", "short_names.py", "features.py", "bundle.py")


def rewriting_lines():
    """{file: lines} of tools/deploy's rewriting part (REWRITING), as `wc -l` counts them."""
    out = {}
    for name in REWRITING:
        with open(os.path.join(REPO, "tools", "deploy", name), encoding="utf-8") as f:
            out[name] = f.read().count("\n")
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m tools.size", description=__doc__)
    ap.add_argument("--board", default="esp32")
    ap.add_argument("--profile", action="append", help="default: every profile in boards.toml")
    ap.add_argument("--json", action="store_true", help="print {profile: {module: bytes}}")
    ap.add_argument("--functions", metavar="FILE", help="bytes per function of one library module")
    ap.add_argument("--transforms", action="store_true", help="bytes each of deploy's transforms saves per profile")
    ap.add_argument("--features", action="store_true", help="bytes each optional module costs per profile")
    ap.add_argument("--heap", action="store_true", help="32-bit heap of a connected client (unix port, WebAssembly)")
    ap.add_argument("--without", action="append", default=[], metavar="TRANSFORM",
                    help="build without one of deploy's transforms (%s), e.g. --heap --without bundle" %
                    ", ".join(__import__("tools.deploy").deploy.TRANSFORMS))
    ap.add_argument("--history", nargs="+", metavar="REV", help=".mpy and --heap of each commit, with its own tools")
    a = ap.parse_args(argv)
    import tools.deploy as deploy
    deploy.WITHOUT.update(a.without)
    kb = lambda r, k: "-" if not r else "%.1f" % (r[k] / 1024)  # noqa: E731
    if a.history:
        print("%-10s %8s %8s   32-bit heap connected (KB), unix32 / wasm: %s" % (
            "commit", "mqtt311", "full", ", ".join("%s %s v%d" % (r[0][9:], r[1], r[3]) for r in _rows())))
        for rev, r in history(a.history).items():
            print("%-10s %8s %8s   %s" % (rev, r and r["mpy"]["mqtt311"], r and r["mpy"]["full"], "   ".join(
                "%s / %s" % (kb(u, "connected"), kb(w, "connected")) for _, _, _, u, w in (r or {}).get("heap", []))))
        return 0
    if a.heap:
        print("32-bit heap (KB)                       unix32 import  connected   wasm import  connected")
        for label, profile, version, u, w in heap32(a.profile):
            print("%-38s %13s %10s %13s %10s" % ("%s, %s, v%d" % (label, profile, version), kb(u, "import"),
                                                  kb(u, "connected"), kb(w, "import"), kb(w, "connected")))
        return 0
    if a.features:
        for p in a.profile or list(boards_mod.profiles()):
            rows = feature_sizes(a.board, p)
            print("%s, profile %s: .mpy bytes saved by building it without each optional module (the module, "
                  "its hooks in the others)" % (a.board, p))
            for flag, (gone, n) in rows.items():
                print("  %-12s %6d  %s" % (flag, n, gone))
            if not rows:
                print("  (none: its file set has no optional module, every flag is const(0) there)")
        return 0
    if a.transforms:
        rows = transform_sizes(a.board, a.profile)
        names = list(rows["all"])
        print("%-26s" % ("%s .mpy bytes" % a.board) + "".join("%10s" % p for p in names))
        print("%-26s" % "all transforms on" + "".join("%10d" % rows["all"][p] for p in names))
        for t, row in rows.items():
            if t != "all":
                print("%-26s" % ("without %s" % t) + "".join("%+10d" % row[p] for p in names))
        lines = rewriting_lines()
        print("lines of the rewriting part: %d (%s)" % (sum(lines.values()), ", ".join(
            "%s %d" % kv for kv in lines.items())))
        return 0
    if a.functions:
        p = (a.profile or ["full"])[0]
        base, rows = function_sizes(a.functions, a.board, p)
        print("%s: %d bytes of .mpy (%s, profile %s)" % (a.functions, base, a.board, p))
        for n, where in rows:
            print("%6d  %s" % (n, where))
        return 0
    try:
        names = a.profile or list(boards_mod.profiles())
        table = {p: profile_sizes(a.board, p) for p in names}
    except (DeployError, boards_mod.BoardError) as e:
        print("error: %s" % e, file=sys.stderr)
        return 1
    if a.json:
        print(json.dumps(table, indent=1))
        return 0
    mods = sorted({m for t in table.values() for m in t}, key=lambda m: -max(t.get(m, 0) for t in table.values()))
    print("%-26s" % ("%s .mpy bytes" % a.board) + "".join("%10s" % p for p in names))
    for m in mods:
        print("%-26s" % m + "".join("%10s" % (table[p].get(m, "-")) for p in names))
    print("%-26s" % "total" + "".join("%10d" % sum(table[p].values()) for p in names))
    for p in names:
        b = boards_mod.get(a.board, profile=p)
        if b.bundle and "bundle" not in deploy.WITHOUT:
            print("%s: tinymqtt/__init__.py is the bundle of %s" % (p, " ".join(m[9:-3] for m in b.bundle)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
