# Short error text on boards (boards.toml short_errors, tools/deploy/shorten.py): every error the library raises
# keeps its exception class and reason code, and its message becomes the number of what it concerns in
# reasons.SUBJECTS (the packet, else the argument or field); source lines stay where they were. A board shows
# `ConnectError: 0x87 not authorized (CONNACK)`: reasons.py names the code and the subject when an error is shown.
# Checked on the source, on every raise of both profiles' board builds, and on the real unix-port MicroPython
# running the esp32 trees.
import ast
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
PACKETS = "CONNECT CONNACK PUBLISH PUBACK PUBREC PUBREL PUBCOMP SUBSCRIBE SUBACK UNSUBSCRIBE UNSUBACK PINGREQ " \
          "PINGRESP DISCONNECT AUTH".split()


@pytest.mark.parametrize("mod", MODULES)
def test_every_raise_message_becomes_its_subject_and_lines_stay(mod, tmp_path):
    src = open(os.path.join(LIB, mod + ".py"), encoding="utf-8").read()
    out = shorten(src)
    assert out.count("\n") == src.count("\n")
    # no error text is left: a number, or the name of the argument the text starts with ("payload must be ...")
    assert [m for m in shorten_mod.messages(out) if not re.fullmatch(r'"[a-z_]+"', m[1])] == [], "error text left"
    compile(out, mod, "exec")
    path = tmp_path / "m.py"
    path.write_text(out)
    b = boards.get("esp32")
    assert deploy.compile_mpy(str(path), "tinymqtt/%s.py" % mod, b.mpy_cross, str(tmp_path))[:2] == b"M\x06"


def test_only_the_raised_calls_message_is_shortened():
    # A string inside a nested call is code, not text: getattr's attribute name must stay.
    src = 'raise E(getattr(e, "reason", 0x80), "no PUBLISH")\n'
    assert shorten(src) == 'raise E(getattr(e, "reason", 0x80), 3)\n'


def test_an_error_built_to_hand_on_is_shortened_too():
    # client.connect() gives its ConnectionLost to _close() rather than raising it there: its text goes as well;
    # a call of anything else keeps its strings.
    src = ('self._close(ConnectionLost(0x88, "no CONNACK within %.1f s" % t))\n'
           'log("no CONNACK within %.1f s" % t)\n')
    assert shorten(src) == 'self._close(ConnectionLost(0x88, 2))\nlog("no CONNACK within %.1f s" % t)\n'


def test_the_subject_is_the_packet_at_hand_then_the_argument_or_field():
    subjects = shorten_mod.reasons()[1]
    assert subjects[1:16] == PACKETS and subjects[0] == ""
    cases = {  # message -> what replaces it
        '"%s before CONNACK" % NAMES.split()[t]': "t",  # the packet the session got, not the one it awaits
        '"%s in non-minimal form" % what': "what",  # the field the caller named
        '"QoS %d: MQTT has QoS 0, 1 and 2" % qos': "0",  # 0x9B's name says it: qos not supported
        '"no packet identifier free: %d messages in flight" % n': str(subjects.index("in flight")),
    }
    for msg, new in cases.items():
        code = "0x9B" if "QoS" in msg else "0x97"
        assert shorten("raise E(%s, %s)\n" % (code, msg)) == "raise E(%s, %s)\n" % (code, new), msg
    assert shorten('raise E(0x82, "props: MQTT 3.x carries no properties")\n') == 'raise E(0x82, "props")\n'
    assert shorten('raise E(0x82, "%spayload must be bytes" % arg)\n') == 'raise E(0x82, "payload")\n'
    # A text with none: 0, the code and its name alone (the test below fails on it: add its words to TAGS)
    assert shorten('raise E(0x80, "something else entirely")\n') == "raise E(0x80, 0)\n"


@pytest.mark.parametrize("profile", ["mqtt311", "full"])
def test_every_raise_of_a_board_build_decodes_to_its_code_name_and_subject(profile):
    # Every error of every library file the board gets: its reason code (when the raise names one) has a name in
    # the board's reasons.py, and what its message became is a subject of the board's SUBJECTS that the full
    # text speaks of (the packet, the argument or field), the packet the raise names at run time, or the field the
    # caller named: never a number that decodes to nothing.
    board = boards.get("esp32", profile=profile)
    name, subjects = shorten_mod.reasons(tuple(board.lib))
    seen = 0
    for m in board.lib:
        src = open(os.path.join(LIB, m[9:]), encoding="utf-8").read()
        built = deploy.library_text(board, os.path.join(LIB, m[9:]), m)
        before = {(a.lineno, a.col_offset): (seg, code) for a, seg, code in shorten_mod.messages(src)}
        tree = ast.parse(built)
        for node in ast.walk(tree):
            call = node.exc if isinstance(node, ast.Raise) else node
            if not (isinstance(call, ast.Call) and getattr(call.func, "id", "") in shorten_mod.ERRORS):
                continue
            for arg in call.args[1:] if len(call.args) > 1 else call.args:
                if (arg.lineno, arg.col_offset) not in before:
                    continue
                seen += 1
                text, code = before[(arg.lineno, arg.col_offset)]
                if code is not None:
                    assert name(code) != "unknown reason", (m, arg.lineno, hex(code))
                new = ast.get_source_segment(built, arg)
                if isinstance(arg, ast.Constant) and isinstance(arg.value, int):
                    assert 0 <= arg.value < len(subjects), (m, arg.lineno, new)
                    said = subjects[arg.value]
                    if arg.value == 0:  # (the code's name says it)
                        said = [s for p, s in shorten_mod.TAGS if p.search(text)]  # (0 is also what none gets)
                        assert said and (code is not None and said[0].lower() in name(code) or not said[0]), \
                            (m, arg.lineno, "a message with no subject: add its words to shorten.py's TAGS", text)
                    elif said in PACKETS and re.search(r"\b%s\b" % said, text):
                        pass
                    else:  # (a TAGS entry may name a packet: "refused the connection" is CONNACK's)
                        assert any(p.search(text) and s == said for p, s in shorten_mod.TAGS), (m, arg.lineno, said)
                elif isinstance(arg, ast.Constant):  # the argument the text starts with ("qos must be ...")
                    assert re.match(r"[\"'](%%s)?%s(:| must | is | has )" % arg.value, text), (m, arg.lineno, text)
                else:  # the packet type at hand (NAMES.split()[t] in the text), or the field the caller named
                    assert "NAMES.split()[%s]" % new in text or "%s" in text and new in text.rsplit("%", 1)[1], \
                        (m, arg.lineno, new, text)
    assert seen > (40 if profile == "mqtt311" else 80)


def test_the_esp32_tree_is_smaller_and_linux_keeps_the_text(tmp_path):
    esp, linux = boards.get("esp32"), boards.get("linux")
    assert esp.short_errors and boards.get("picow").short_errors and not linux.short_errors
    path = os.path.join(LIB, "packets.py")
    long_ = deploy.compile_mpy(path, "tinymqtt/packets.py", esp.mpy_cross, str(tmp_path))
    short = deploy.library_mpy(esp, path, "tinymqtt/packets.py", str(tmp_path))
    assert len(short) < len(long_) - 500 and b"Remaining Length in non-minimal form" not in short


def test_the_table_names_every_library_message():
    import io
    out = io.StringIO()
    assert shorten_mod.main(out) == 0
    rows = out.getvalue().splitlines()
    assert len(rows) > 60 and any(r.startswith("CONNACK ") and "client.py:" in r for r in rows)
    assert not [r for r in rows if r.startswith("None ")]


# Uncaught on a board (the unix port with the esp32 trees): MicroPython prints the error's repr, which is the
# class, the code, its name and the subject; a caught one's str() is the same without the class.
UNCAUGHT = """
import sys
from tinymqtt.packets import Packet, read_publish, encode_publish
from tinymqtt.errors import ConnectError
from tinymqtt.session import Session
cases = [lambda: read_publish(memoryview(b'\\x32\\x03\\x00\\x01a'), 0, 5, Packet(3), 4),
         lambda: Session(client_id="x", version=4).publish("a/b", b"", qos=3),
         lambda: Session(client_id="x", version=4)._on_connack(Packet(2, reason=5)) if 0 else None]
for f in cases[:2]:
    try:
        f()
    except Exception as e:
        sys.print_exception(e)
raise ConnectError(0x87, %s)
"""


@pytest.mark.skipif(not os.path.exists(MICROPYTHON), reason="no unix-port micropython")
@pytest.mark.parametrize("profile", ["mqtt311", "full"])
def test_a_board_traceback_shows_code_name_and_subject(tmp_path, profile, library_built_once):
    rc = deploy_main(["--board", "esp32", "--profile", profile, "--app", "examples/sensor.py", "--target",
                      str(tmp_path), "--secrets", os.devnull], env={}, out=open(os.devnull, "w"),
                     err=open(os.devnull, "w"))
    assert rc == 0
    p = subprocess.run([MICROPYTHON, "-c", UNCAUGHT % 2], env={"MICROPYPATH": ".frozen:" + str(tmp_path / "lib")},
                       capture_output=True, text=True, timeout=30)
    errors = [l for l in p.stdout.splitlines() if not l.startswith(("Traceback", "  File"))]
    assert errors == ["RemoteProtocolError: 0x81 malformed packet (packet id)",
                      "LocalProtocolError: 0x9B qos not supported (qos)",  # (checks.py: the argument)
                      "ConnectError: 0x87 not authorized (CONNACK)"], p.stdout + p.stderr
