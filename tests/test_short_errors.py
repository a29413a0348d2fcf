# Short error text on boards (boards.toml short_errors, tools/deploy/shorten.py): every raise in the library
# keeps its exception class and reason code, its message becomes the packet it names or its number in the
# library's table of messages (an int: free on a board; `python -m tools.deploy.shorten` prints module, line and
# full text), and source lines stay where they were. The library is compiled with -O3 (no line-number tables).
# Checked on the source, with mpy-cross, and on the real unix-port MicroPython importing the esp32 tree.
import os
import re
import subprocess

import pytest

from tools import boards, deploy
from tools.deploy import shorten as shorten_mod
from tools.deploy.shorten import shorten
from tools.deploy.__main__ import main as deploy_main

REPO = boards.REPO
LIB = os.path.join(REPO, "lib", "tinymqtt")
MICROPYTHON = os.path.join(REPO, ".venv", "bin", "micropython")
MODULES = sorted(f[:-3] for f in os.listdir(LIB) if f.endswith(".py"))


@pytest.mark.parametrize("mod", MODULES)
def test_every_raise_message_becomes_its_place_and_lines_stay(mod, tmp_path):
    src = open(os.path.join(LIB, mod + ".py"), encoding="utf-8").read()
    out = shorten(src, mod)
    assert out.count("\n") == src.count("\n")
    lines = out.splitlines()
    numbers = {line: n for n, m, line, _ in shorten_mod.table() if m == mod}  # (one message a line, here)
    for k, line in enumerate(src.splitlines()):
        if lines[k] != line:  # a raise's message, replaced in place: its first line holds the short form ...
            m = re.search(r'[(, ](\d+|"[A-Z]+")(?:[,)]|$)', lines[k].strip())
            if m and (m.group(1) == str(numbers.get(k + 1)) or m.group(1).strip('"') in line):
                continue
            assert line.rstrip().endswith(lines[k].strip()), (k + 1, lines[k], line)  # ... the others, what followed
    compile(out, mod, "exec")
    path = tmp_path / "m.py"
    path.write_text(out)
    b = boards.get("esp32")
    assert deploy.compile_mpy(str(path), "tinymqtt/%s.py" % mod, b.mpy_cross, str(tmp_path))[:2] == b"M\x06"


def test_only_the_raised_calls_message_is_shortened():
    # A string inside a nested call is code, not text: getattr's attribute name must stay.
    src = 'raise E(getattr(e, "reason", 0x80), "no %s" % "PUBLISH")\n'
    assert shorten(src, "m") == 'raise E(getattr(e, "reason", 0x80), "PUBLISH")\n'


def test_an_error_built_to_hand_on_is_shortened_too():
    # client.connect() gives its ConnectionLost to _close() rather than raising it there: its text goes as well;
    # a call of anything else keeps its strings.
    src = ('self._close(ConnectionLost(0x88, "no CONNACK within %.1f s" % t))\n'
           'log("no CONNACK within %.1f s" % t)\n')
    assert shorten(src, "m") == 'self._close(ConnectionLost(0x88, "CONNACK"))\nlog("no CONNACK within %.1f s" % t)\n'


def test_the_esp32_tree_is_smaller_and_linux_keeps_the_text(tmp_path):
    esp, linux = boards.get("esp32"), boards.get("linux")
    assert esp.short_errors and boards.get("picow").short_errors and not linux.short_errors
    path = os.path.join(LIB, "packets.py")
    long_ = deploy.compile_mpy(path, "tinymqtt/packets.py", esp.mpy_cross, str(tmp_path))
    short = deploy.library_mpy(esp, path, "tinymqtt/packets.py", str(tmp_path))
    assert len(short) < len(long_) - 500 and b"Remaining Length in non-minimal form" not in short


@pytest.mark.skipif(not os.path.exists(MICROPYTHON), reason="no unix-port micropython")
def test_short_errors_keep_class_code_and_line_on_micropython(tmp_path):
    rc = deploy_main(["--board", "esp32", "--profile", "mqtt311", "--app", "examples/sensor.py", "--target",
                      str(tmp_path), "--secrets", os.devnull], env={}, out=open(os.devnull, "w"),
                     err=open(os.devnull, "w"))
    assert rc == 0
    code = ("from tinymqtt.packets import encode_publish, read_publish, Packet\n"
            "import sys\n"
            "for f in (lambda: encode_publish(bytearray(64), 4, 'a', b'', qos=3),\n"
            "          lambda: read_publish(memoryview(b'\\x32\\x03\\x00\\x01a'), 0, 5, Packet(3), 4)):\n"
            "    try:\n"
            "        f()\n"
            "    except Exception as e:\n"
            "        print(type(e).__name__, e.reason, str(e))\n"
            "        sys.print_exception(e)\n")
    p = subprocess.run([MICROPYTHON, "-c", code], env={"MICROPYPATH": ".frozen:" + str(tmp_path / "lib")},
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stdout + p.stderr
    first, second = re.findall(r"^(\w+) (\d+) (\w+) \(0x\w+\)$", p.stdout, re.M)
    assert first == ("LocalProtocolError", "129", "PUBLISH"), "the packet the message names stays"
    assert second[:2] == ("RemoteProtocolError", "129") and second[2].isdigit()
    n, mod, line, text = shorten_mod.table()[int(second[2]) - 1]  # the message's number: its row of the table
    assert mod == "packets" and "packet ends inside" in text
    assert "packet ends inside" in open(os.path.join(LIB, "packets.py")).read().splitlines()[line - 1]


def test_the_table_numbers_every_library_message_once_the_core_first():
    rows = shorten_mod.table()
    assert [r[0] for r in rows] == list(range(1, len(rows) + 1)) and len(rows) > 40
    core = {b[9:-3] for b in boards.get("esp32", profile="mqtt311").bundle}
    assert max(n for n, mod, _, _ in rows if mod in core) < 48, "the core's numbers take one byte of code"
    for n, mod, line, text in rows:  # each row names the line where its full text starts
        assert text.split('"')[1][:12] in open(os.path.join(LIB, mod + ".py")).read().splitlines()[line - 1], (n, mod)
    import io
    out = io.StringIO()
    assert shorten_mod.main(out) == 0 and out.getvalue().splitlines()[0].startswith("  1  wire.py:")
    assert shorten('raise E(0x81, "not in the library")\n', "m") == "raise E(0x81, 1)\n"  # elsewhere: its line


def test_a_message_the_table_does_not_hold_at_that_place_keeps_its_line():
    # A copy of a library module whose message differs (another version) gets its line, not another row's number.
    row = next(r for r in shorten_mod.table() if r[1] == "packets")
    n, mod, line, text = row
    src = open(os.path.join(LIB, "packets.py"), encoding="utf-8").read()
    assert re.search(r"[(, ]%d[,)]" % n, shorten(src, "packets").splitlines()[line - 1])  # the file: its number
    changed = src.replace(text, '"another text"', 1)
    assert changed != src
    out = shorten(changed, "packets").splitlines()[line - 1]
    assert re.search(r"[(, ]%d[,)]" % line, out) and not re.search(r"[(, ]%d[,)]" % n, out), out
