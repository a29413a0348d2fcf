# Hooks compiled out by file set (tools/deploy/features.py): a board build without a module gets that module's
# flag written const(0), MicroPython's compiler drops the hooks, and what the hooks did for a missing module
# (refuse with 0x84, plain error text) stays what the build does. Checked on the real unix port with the mqtt311
# .mpy files deploy writes, and on the sources, which keep every flag at 1.
import os
import re
import subprocess

import pytest

from tools import boards
from tools.deploy import features, library_text

REPO = boards.REPO
MICROPYTHON = os.path.join(REPO, ".venv", "bin", "micropython")
LIB = os.path.join(REPO, "lib", "tinymqtt")


def flags(text):
    return dict(re.findall(r"^(_[A-Z0-9_]+) = const\(([01])\)", text, re.M))


def test_every_flag_in_the_library_names_an_optional_module_and_starts_on():
    seen = {}
    for name in sorted(os.listdir(LIB)):
        if name.endswith(".py"):
            with open(os.path.join(LIB, name), encoding="utf-8") as f:
                for flag, value in flags(f.read()).items():
                    if flag in features.FLAGS:
                        seen[flag] = value
    assert set(seen) == set(features.FLAGS) and set(seen.values()) == {"1"}
    for module in features.FLAGS.values():
        assert os.path.exists(os.path.join(REPO, "lib", module)), module


def test_the_file_set_alone_decides_which_flags_turn_off():
    def text(board, profile, module):
        return flags(library_text(boards.get(board, profile=profile), os.path.join(LIB, module), "tinymqtt/" + module))
    assert text("esp32", "mqtt311", "driver.py") == {"_MQTT5": "0", "_APP_ACKS": "0"}
    assert text("esp32", "full", "driver.py") == {"_MQTT5": "1", "_APP_ACKS": "1"}
    assert text("esp32", "mqtt311", "reasons.py") == {"_MQTT5": "0"}  # (the names of MQTT 5's own codes stay off)
    assert text("esp32", "full", "reasons.py") == {"_MQTT5": "1"}
    # every optional module is in lib/, none is host-only; grow.py (CPython's growing buffers) is on no board
    assert features.off(boards.profiles()["full"].lib + ["tinymqtt/grow.py"]) == []
    assert features.off(boards.profiles()["full"].lib) == ["_GROW"]
    # the flow table's check of our own moves is on in the sources and off on every board
    assert text("linux", "full", "inflight.py")["_FLOW_CHECKS"] == "0"
    with open(os.path.join(LIB, "inflight.py"), encoding="utf-8") as f:
        assert flags(f.read())["_FLOW_CHECKS"] == "1"


@pytest.mark.skipif(not os.path.exists(MICROPYTHON), reason="no unix-port micropython")
def test_an_mqtt311_build_still_refuses_mqtt5_with_0x84_everywhere(tmp_path, library_built_once):
    from tests.test_profiles import deploy
    tree = tmp_path / "board"
    assert deploy("--board", "linux", "--profile", "mqtt311", "--app", "examples/sensor.py", "--target", str(tree))[0] == 0
    code = """
from tinymqtt.packets import Packet, encode, encode_publish, read_packet, read_publish
from tinymqtt import errors
b = bytearray(64)
for f in (lambda: encode(b, Packet(12)), lambda: encode_publish(b, 5, b"t", b"x"),
          lambda: read_packet(memoryview(b"\\x40\\x02\\x00\\x01"), 0, 4, Packet(4), 5),
          lambda: read_publish(memoryview(b"\\x30\\x04\\x00\\x01tx"), 0, 6, Packet(3), 5)):
    try:
        f()
        print("accepted")
    except errors.LocalProtocolError as e:
        print(hex(e.reason))
print(encode(b, Packet(12), 4), str(errors.ConnectionLost(0x8D, "no PINGRESP")))
"""
    p = subprocess.run([MICROPYTHON, "-c", code], env={"MICROPYPATH": ".frozen:%s" % (tree / "lib")},
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.splitlines() == ["0x84"] * 4 + ["2 0x8D keep alive timeout (no PINGRESP)"]


def test_an_mqtt311_build_refuses_the_3x_retry_timer_it_leaves_out(tmp_path, library_built_once):
    # retry.py (the 3.x timer) is in full's bundle and not in mqtt311: a deployed mqtt311 Session refuses retry_ms
    # with 0x84; the same file set without deploy's flags (frozen, or installed by mip) refuses it at construction
    # too (ImportError), never at the first tick.
    import shutil
    import sys
    from tests.test_profiles import deploy
    tree = tmp_path / "board"
    assert deploy("--board", "linux", "--profile", "mqtt311", "--app", "examples/sensor.py", "--target", str(tree))[0] == 0
    code = ("from tinymqtt.session import Session\n"
            "s = Session(version=4, retry_ms=0)\n"
            "try:\n    Session(version=4, retry_ms=100)\nexcept Exception as e:\n"
            "    print(type(e).__name__, getattr(e, 'reason', ''))\n")
    if os.path.exists(MICROPYTHON):
        p = subprocess.run([MICROPYTHON, "-c", code], env={"MICROPYPATH": ".frozen:%s" % (tree / "lib")},
                           capture_output=True, text=True, timeout=30)
        assert p.stdout == "LocalProtocolError 132\n", p.stdout + p.stderr
    src = tmp_path / "src"
    shutil.copytree(os.path.join(REPO, "lib"), src, ignore=shutil.ignore_patterns("retry.py", "__pycache__"))
    p = subprocess.run([sys.executable, "-I", "-c", "import sys; sys.path.insert(0, %r)\n" % str(src) + code],
                       capture_output=True, text=True, timeout=30)
    assert p.stdout == "ModuleNotFoundError \n", p.stdout + p.stderr  # (an ImportError)


def test_the_source_rewriting_part_of_deploy_is_at_most_400_lines():
    # Issue 30: tools/deploy keeps what pays, and what rewrites the library's source stays small enough to read
    # (python -m tools.size --transforms prints the count; docs/size.md its history).
    from tools.size import REWRITING, rewriting_lines
    lines = rewriting_lines()
    assert set(lines) == set(REWRITING) and all(os.path.isfile(os.path.join(REPO, "tools", "deploy", f)) for f in lines)
    assert sum(lines.values()) <= 400, lines


def test_mqtt311_has_no_optional_module_left_to_compile_out():
    # Every flag of features.FLAGS is off in profile mqtt311 (its file set has none of their modules), so
    # python -m tools.size --features has nothing to measure there.
    from tools.size import feature_sizes
    assert features.off(boards.profiles()["mqtt311"].lib) == list(features.FLAGS)
    assert feature_sizes("esp32", "mqtt311") == {}
