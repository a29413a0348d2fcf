# Profiles (boards.toml [profile.NAME]): a board's file set, never a fork. The mqtt311 tree that tools/deploy
# writes runs its example on its own (no other tinymqtt on the path) against a real mosquitto; an app that
# needs a module the profile leaves out is refused at deploy time; tools.size measures what each profile costs.
import json
import os
import shutil
import subprocess
import sys
import uuid

import pytest

from tests.support import report
from tinymqtt.client import Client
from tinymqtt.errors import LocalProtocolError
from tools import boards, size
from tools.deploy import config_values as deploy_values, library_mpy as deploy_mpy
from tools.deploy.__main__ import main as deploy_main

REPO = boards.REPO


def deploy(*argv):
    import io
    out, err = io.StringIO(), io.StringIO()
    rc = deploy_main(list(argv) + ["--secrets", os.devnull], env={}, out=out, err=err)
    return rc, out.getvalue(), err.getvalue()


def test_profiles_are_file_sets_of_the_one_library():
    p = boards.profiles()
    assert {"full", "mqtt311"} <= set(p)
    assert set(p["mqtt311"].lib) < set(p["full"].lib)
    assert "tinymqtt/aio.py" not in p["mqtt311"].lib and p["mqtt311"].leaves_out
    for b in boards.load().values():
        assert b.lib == p["full"].lib and b.profile == "full"
    b = boards.get("esp32", profile="mqtt311")
    assert b.lib == p["mqtt311"].lib and b.mpy_cross == ["-march=xtensawin"]


def test_deploy_refuses_an_app_the_profile_cannot_run(tmp_path):
    rc, out, err = deploy("--board", "esp32", "--profile", "mqtt311", "--app", "examples/telemetry.py",
                          "--target", str(tmp_path))
    assert rc == 1 and err.strip().splitlines()[-1] == (
        "error: telemetry.py imports aio, which profile mqtt311 leaves out: pick another --profile")
    rc, out, err = deploy("--board", "esp32", "--profile", "nope", "--app", "examples/sensor.py",
                          "--target", str(tmp_path))
    assert rc == 1 and "no profile 'nope' (profiles: full, mqtt311)" in err


MICROPYTHON = os.path.join(REPO, ".venv", "bin", "micropython")
# (profile, example, how to run the tree): CPython with nothing but the tree on its path, the real unix-port
# MicroPython (real sockets) importing the tree's .mpy files, and the simulated board (the 32-bit WebAssembly
# MicroPython with the sim port, deployed as board "sim")
RUNS = [("mqtt311", "examples/sensor.py", "cpython"), ("mqtt311", "examples/sensor.py", "unix"),
        ("mqtt311", "examples/sensor.py", "sim"), ("full", "examples/sensor.py", "unix"),
        ("full", "examples/telemetry.py", "unix"), ("full", "examples/telemetry.py", "sim")]


def runner(kind, tree):
    if kind == "cpython":  # -I: no PYTHONPATH, no site-packages, no repo: only the board's tree provides tinymqtt
        code = "import sys; sys.path[:0] = [%r, %r]; import main" % (str(tree), str(tree / "lib"))
        return [sys.executable, "-I", "-c", code], None
    if kind == "sim":
        import tools.sim
        return tools.sim.command(str(tree), "sim")
    if not os.path.exists(MICROPYTHON):
        pytest.skip("no unix-port micropython")
    return [MICROPYTHON, "main.py"], {"MICROPYPATH": ".frozen:%s:%s" % (tree / "lib", tree)}


@pytest.mark.parametrize("profile, app, kind", RUNS)
def test_each_profile_tree_runs_its_example_against_mosquitto(broker, tmp_path, profile, app, kind):
    tree = tmp_path / "board"
    prefix = "p%s/%s" % (profile, uuid.uuid4().hex)
    rc, out, err = deploy("--board", "sim" if kind == "sim" else "linux", "--profile", profile, "--app", app, "--target", str(tree),
                          *(["--source"] if kind == "cpython" else []),
                          "--broker", "%s:%d" % (broker.host, broker.port),
                          "--set", "COUNT=3", "--set", "PERIOD_MS=50", "--set", "PREFIX=%r" % prefix)
    assert rc == 0, err
    p = boards.profiles()[profile]  # the bundle is the package's __init__: the other modules load on first use
    assert sorted(os.path.relpath(os.path.join(d, f), tree / "lib") for d, _, fs in os.walk(tree / "lib" / "tinymqtt")
                  for f in fs) == sorted(m[:-3] + (".py" if kind == "cpython" else ".mpy")
                                         for m in p.lib if m not in p.bundle)
    assert p.bundle and "tinymqtt/session.py" in p.bundle
    got = []
    w = Client(broker.host, broker.port, version=4, client_id="w" + prefix[-8:], reconnect=False)
    w.on_message = lambda m: got.append((m.topic, bytes(m.payload)))
    w.connect()
    w.subscribe(prefix + "/#", 1)
    cmd, env = runner(kind, tree)
    p = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.split() == ["READY", prefix + "/status", "SENT", "1", "SENT", "2", "SENT", "3", "DONE"]
    for _ in range(100):
        if (prefix + "/status", b"offline") in got:
            break
        w.loop(0.05)
    w.disconnect()
    readings = [m for m in got if m[0].endswith("/telemetry")]
    assert [json.loads(m[1])["n"] for m in readings] == [1, 2, 3]
    assert (prefix + "/status", b"online") in got and got[-1] == (prefix + "/status", b"offline")


def test_size_tool_measures_each_profile_as_deploy_compiles_it():
    full, small = size.profile_sizes("esp32", "full"), size.profile_sizes("esp32", "mqtt311")
    p = boards.profiles()  # (the files deploy writes: a profile's bundle is its tinymqtt/__init__)
    assert set(full) == set(p["full"].lib) - set(p["full"].bundle)
    assert set(small) == set(p["mqtt311"].lib) - set(p["mqtt311"].bundle) == {"tinymqtt/__init__.py",
                                                                              "tinymqtt/reasons.py"}
    assert 0 < sum(small.values()) < sum(full.values())
    report.record("mpy esp32 profile full (B)", sum(full.values()))
    report.record("mpy esp32 profile mqtt311 (B)", sum(small.values()))
    base, rows = size.function_sizes(os.path.join(REPO, "lib", "tinymqtt", "topic.py"))
    import tempfile  # (a bundled module is measured alone, as deploy compiles it before it is bundled)
    with tempfile.TemporaryDirectory() as tmp:
        alone = deploy_mpy(boards.get("esp32"), os.path.join(REPO, "lib", "tinymqtt", "topic.py"), "tinymqtt/topic.py", tmp)
    assert base == len(alone) and rows and all(n > 0 for n, _ in rows)
    assert {w.split(":")[0] for _, w in rows} >= {"validate_name", "validate_filter"}


def test_mqtt311_refuses_v5_manual_ack_and_handlers_and_loads_no_v5_module_on_micropython(tmp_path):
    if not os.path.exists(MICROPYTHON):
        pytest.skip("no unix-port micropython")
    tree = tmp_path / "board"
    assert deploy("--board", "linux", "--profile", "mqtt311", "--app", "examples/sensor.py", "--target", str(tree))[0] == 0
    code = ("import sys\nfrom tinymqtt.client import Client\n"
            "try:\n    Client('127.0.0.1', 1, version=5)\nexcept Exception as e:\n    print(type(e).__name__, e.reason)\n"
            "try:\n    Client('127.0.0.1', 1, version=4, manual_ack=True)\nexcept Exception as e:\n"
            "    print(type(e).__name__, e.reason)\n"
            "from tinymqtt.session import Session\ntry:\n    Session(version=4, manual_ack=True)\nexcept Exception as e:\n"
            "    print(type(e).__name__, e.reason)\n"
            "c = Client('127.0.0.1', 1, version=4)\ntry:\n    c.subscribe('a/#', 1, handler=print)\n"
            "except Exception as e:\n    print(type(e).__name__, e.reason, c.session.subs)\nc.session.connect(0)\n"
            "print(sorted(m for m in sys.modules if m.startswith('tinymqtt.') or m == 'tinymqtt'))\n")
    p = subprocess.run([MICROPYTHON, "-c", code], env={"MICROPYPATH": ".frozen:%s" % (tree / "lib")},
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stdout + p.stderr
    refused, no_acks, no_direct_acks, no_handlers, loaded = p.stdout.splitlines()
    assert refused == "LocalProtocolError 132", "v5 is refused with 0x84 Unsupported Protocol Version"
    assert no_acks == "LocalProtocolError 132", "manual_ack (app_acks.py, not in mqtt311) is refused with 0x84"
    assert no_direct_acks == "LocalProtocolError 132", "so is a Session asked directly for manual_ack"
    assert no_handlers == "LocalProtocolError 132 {}", "handler= (handlers.py, not in mqtt311): 0x84, nothing subscribed"
    assert eval(loaded) == ["tinymqtt", "tinymqtt.client", "tinymqtt.driver", "tinymqtt.errors", "tinymqtt.inflight",
                            "tinymqtt.packets", "tinymqtt.session", "tinymqtt.topic", "tinymqtt.wire"]


def _run_mqtt311_as_installed(tmp_path, body):
    """Runs body (after `from tinymqtt.client import Client`) on CPython and the unix port against profile
    mqtt311's files as mip and manifest.py install them: unchanged (features on), without the files it leaves out.
    Returns each run's output lines."""
    lib = tmp_path / "lib" / "tinymqtt"
    lib.mkdir(parents=True, exist_ok=True)
    for f in boards.profiles()["mqtt311"].lib:
        shutil.copy(os.path.join(REPO, "lib", f), lib)
    code = "import sys\nsys.path[:0] = [%r, %r]\nfrom tinymqtt.client import Client\n%s" % (
        str(tmp_path / "lib"), os.path.join(REPO, "ports", "linux"), body)
    runs = [[sys.executable, "-I", "-c", code]] + ([[MICROPYTHON, "-c", code]] if os.path.exists(MICROPYTHON) else [])
    out = []
    for cmd in runs:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=30, cwd=str(tmp_path))
        assert p.returncode == 0, p.stdout + p.stderr
        out.append((cmd[0], p.stdout.splitlines()))
    return out


def test_mqtt311_files_installed_as_they_are_refuse_v5_with_0x84_also_given_v5_options(tmp_path):
    # mip and manifest.py install the profile's files unchanged (features on, no session5.py): version=5 with an
    # MQTT 5 option a full board's config holds must still meet 0x84, not a TypeError for the option.
    for exe, lines in _run_mqtt311_as_installed(tmp_path, (
            "for o in ({}, {'topic_alias_maximum': 4}):\n    try:\n        Client('127.0.0.1', 1, version=5, **o)\n"
            "    except Exception as e:\n        print(type(e).__name__, e.reason)\n")):
        assert lines == ["LocalProtocolError 132"] * 2, exe


def test_mqtt311_files_installed_as_they_are_refuse_a_handler_with_0x84(tmp_path):
    # (no handlers.py there: the session's import of it fails, which must read as 0x84, not an ImportError)
    for exe, lines in _run_mqtt311_as_installed(tmp_path, (
            "c = Client('127.0.0.1', 1, version=4)\ntry:\n    c.subscribe('a/#', 1, handler=print)\n"
            "except Exception as e:\n    print(type(e).__name__, e.reason, c.session.subs)\n")):
        assert lines == ["LocalProtocolError 132 {}"], exe


def test_a_311_client_of_the_full_library_never_imports_mqtt5():
    code = ("import sys; sys.path.insert(0, %r)\nfrom tinymqtt.session import Session\nfrom tinymqtt.client import Client\n"
            "s = Session(version=4, client_id='x'); s.connect(0)\n"
            "print(sorted(m for m in sys.modules if m.startswith('tinymqtt')))\n" % os.path.join(REPO, "lib"))
    p = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    assert not {"tinymqtt.session5", "tinymqtt.props", "tinymqtt.aliases", "tinymqtt.reasons",
                "tinymqtt.app_acks"} & set(eval(p.stdout))


def test_full_builds_a_session_with_app_acks_only_when_asked():
    # The drivers' new_session() picks app_acks.extended(cls) for manual_ack True / None (aio); a session class without
    # it refuses manual_ack with 0x84 (not ignored), and Session refuses MQTT 5.
    from tinymqtt.session import Session
    from tinymqtt.session5 import Session5
    from tinymqtt.app_acks import extended
    from tinymqtt.driver import new_session
    for cls, version in ((Session, 4), (Session5, 5)):
        plain, acks = new_session(None, version=version), new_session(None, version=version, manual_ack=True)
        assert type(plain) is cls and not hasattr(plain, "ack") and not hasattr(plain, "hold_pubrel")
        assert type(acks) is extended(cls) and isinstance(acks, cls)
        assert acks.manual_ack and acks.hold_pubrel is None and acks.version == version
        assert type(acks) is type(new_session(None, version=version, manual_ack=None))  # (one class per base)
        assert type(new_session(None, version=version, manual_ack=False)) is cls
        with pytest.raises(LocalProtocolError) as e:
            cls(version=version, manual_ack=True)
        assert e.value.reason == 0x84 and "extended" in str(e.value)
    for options in ({"version": 5}, {"version": 5, "manual_ack": True}):
        with pytest.raises(LocalProtocolError) as e:
            Session(**options)
        assert e.value.reason == 0x84
    with pytest.raises(TypeError):  # a mistyped option is no option
        Session(version=4, manual_acks=True)
    for option in ("props", "session_expiry", "send_alias_maximum"):  # MQTT 5's: Session5's
        Session5(**{option: None if option == "props" else 1})
        for make in (Session, lambda **o: new_session(None, **o)):
            with pytest.raises(TypeError):
                make(version=4, **{option: 1})
    # (a full board's config.SESSION has topic_alias_maximum, and its app may speak 3.1.1: taken and ignored)
    assert type(new_session(None, version=4, topic_alias_maximum=4)) is Session

def test_config_session_holds_mqtt5_options_only_for_a_file_set_with_mqtt5():
    for profile in ("full", "mqtt311"):
        b = boards.get("esp32", profile=profile)
        cfg = deploy_values(b, client_id="x")["SESSION"]
        assert ("topic_alias_maximum" in cfg) == (profile == "full")
        assert {k: v for k, v in b.session_options().items() if k != "topic_alias_maximum"} == \
            {k: v for k, v in cfg.items() if k != "topic_alias_maximum"}
