# Bundling (boards.toml `bundle`, tools/deploy/bundle.py): the bundler joins modules into one namespace and
# refuses a name two of them define differently; on the bundled trees deploy writes, every import form that README,
# the examples and the tests use works on the real unix-port MicroPython (and CPython for the source tree), modules
# outside the bundle load on first use, and a full tree's MQTT 5 and 3.1.1 blocking clients talk to mosquitto.
import os
import subprocess
import sys
import uuid

import pytest

from tools import boards
from tools.deploy.__main__ import main as deploy_main
from tools.deploy.bundle import BundleError, bundle

REPO = boards.REPO
MICROPYTHON = os.path.join(REPO, ".venv", "bin", "micropython")
INIT = '__version__ = "9"\n'


def run_bundle(ns, **modules):
    """The bundle of modules (name=text), executed as the package tinymqtt in ns (a fresh sys.modules entry)."""
    text = bundle(list(modules.items()), INIT)
    saved = {k: v for k, v in sys.modules.items() if k == "tinymqtt" or k.startswith("tinymqtt.")}
    pkg = type(sys)("tinymqtt")
    sys.modules["tinymqtt"] = pkg
    try:
        exec(compile(text, "tinymqtt/__init__.py", "exec"), pkg.__dict__)
        ns.update({k: sys.modules.get("tinymqtt." + k) for k in modules})
    finally:
        for k in [k for k in sys.modules if k == "tinymqtt" or k.startswith("tinymqtt.")]:
            del sys.modules[k]
        sys.modules.update(saved)
    return pkg, text


def test_the_bundler_joins_modules_and_drops_their_imports_of_each_other():
    ns = {}
    pkg, text = run_bundle(
        ns,
        b="from tinymqtt.a import f as g, K\ntry:\n    from micropython import const\nexcept ImportError:\n"
          "    const = int\n_K = const(7)\ndef h():\n    return g() + K + _K\n",
        a="try:\n    from micropython import const\nexcept ImportError:\n    const = int\n_K = const(7)\nK = 1\n"
          "def f():\n    return 2\n")
    assert pkg.h() == 10 and pkg.g is pkg.f and pkg.__version__ == "9"
    assert ns["a"] is pkg and ns["b"] is pkg and pkg.a is pkg, "sys.modules and the package name each bundled module"
    assert text.index("# ---- tinymqtt/a.py") < text.index("# ---- tinymqtt/b.py"), "dependency order"
    assert text.count("_K = const(7)") == 1 and "from tinymqtt.a" not in text


@pytest.mark.parametrize("modules, words", [
    ({"a": "X = 1\n", "b": "X = 2\n"}, "a and b both define X"),
    ({"a": "def f():\n    pass\n", "b": "class f:\n    pass\n"}, "a and b both define f"),
    ({"a": "_N = const(1)\n", "b": "_N = const(2)\n"}, "a and b both define _N, with different values"),
    ({"a": "def f():\n    pass\n", "b": "from tinymqtt.a import f as g\n", "c": "g = 3\n"}, "b and c both define g"),
    ({"a": "from os import sep\n", "b": "from sys import path as sep\n"}, "a and b both define sep"),
    ({"a": "X = 1\n", "b": "from tinymqtt.a import Y\n"}, "b imports Y from a, which does not define it"),
    ({"a": "X = 1\n", "b": "import tinymqtt.a\n"}, "of a bundled module at module level"),
    ({"a": "b = 1\n", "b": "Y = 2\n"}, "__init__ and a both define b"),  # (b: the package's name for module b)
])
def test_the_bundler_refuses_a_name_two_modules_would_bind_differently(modules, words):
    with pytest.raises(BundleError) as e:
        bundle(list(modules.items()), INIT)
    assert words in str(e.value)


def deploy(tmp_path, board, profile, *extra):
    tree = tmp_path / ("%s-%s" % (board, profile))
    rc = deploy_main(["--board", board, "--profile", profile, "--app", "examples/sensor.py", "--target", str(tree),
                      "--secrets", os.devnull] + list(extra), env={}, out=open(os.devnull, "w"),
                     err=open(os.devnull, "w"))
    assert rc == 0
    return tree


# Every import form of README, examples/, tests/sim_apps and tests/unix_apps (grep "from tinymqtt"), then which
# modules are loaded; the MQTT 5 forms only where the profile has MQTT 5.
FORMS = '''import sys
from tinymqtt.client import Client
from tinymqtt.driver import _LINK_ERRORS
from tinymqtt.errors import ConnectionLost
from tinymqtt.packets import Packet, PUBLISH
from tinymqtt.packets import encode_publish, v5
from tinymqtt.session import LOST, Session
import tinymqtt.packets as p
import tinymqtt.session
import tinymqtt
assert tinymqtt.session.Session is Session and p.CONNECT == 1 and PUBLISH == 3 and LOST == 16
assert tinymqtt.__version__ and Packet and encode_publish and _LINK_ERRORS and issubclass(ConnectionLost, Exception)
assert tinymqtt.__file__.endswith("tinymqtt/__init__." + EXT), tinymqtt.__file__
print(sorted(m for m in sys.modules if m.startswith("tinymqtt")))
if FULL:
    from tinymqtt.aio import AsyncClient
    from tinymqtt.session5 import Session5
    from tinymqtt import props as P
    from tinymqtt import aliases
    assert v5() is P and P.USER_PROPERTY == 0x26 and p.sub_options(1, True) == 5 and aliases.TopicAliases
    assert issubclass(Session5, Session) and AsyncClient
    got = []
    c = Client(HOST, PORT, client_id=PREFIX[-12:], version=5, reconnect=False)
    c.on_message = lambda m: got.append((m.topic, bytes(m.payload), m.props.get(P.USER_PROPERTY)))
    c.connect()
    c.subscribe(PREFIX + "/#", 1)
    c.publish(PREFIX + "/t", b"v5", qos=1, props={P.USER_PROPERTY: [("k", "v")]})
    for _ in range(200):
        if got:
            break
        c.loop(0.05)
    c.disconnect()
    print(got)
else:
    try:
        v5()
    except Exception as e:
        print(type(e).__name__, e.reason)
'''


@pytest.mark.parametrize("profile, kind", [("mqtt311", "unix"), ("full", "unix"), ("full", "cpython")])
def test_every_import_form_works_on_the_bundled_tree(broker, tmp_path, profile, kind):
    if kind == "unix" and not os.path.exists(MICROPYTHON):
        pytest.skip("no unix-port micropython")
    tree = deploy(tmp_path, "linux", profile, *(["--source"] if kind == "cpython" else []))
    prefix = "bundle/%s" % uuid.uuid4().hex
    code = "HOST, PORT, PREFIX, FULL, EXT = %r, %d, %r, %r, %r\n" % (
        broker.host, broker.port, prefix, profile == "full", "py" if kind == "cpython" else "mpy") + FORMS
    if kind == "cpython":  # -I: only the tree provides tinymqtt
        cmd, env = [sys.executable, "-I", "-c", "import sys; sys.path[:0] = [%r]\n" % str(tree / "lib") + code], None
    else:
        cmd, env = [MICROPYTHON, "-c", code], {"MICROPYPATH": ".frozen:%s" % (tree / "lib")}
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    loaded, last = p.stdout.splitlines()[-2:]
    bundled = sorted("tinymqtt." + m[9:-3] for m in boards.get("linux", profile=profile).bundle)
    assert eval(loaded) == sorted(["tinymqtt"] + bundled + (["tinymqtt.client"] if profile == "full" else [])), \
        "the bundle's names, and no module outside it before it is used"
    if profile == "full":
        assert eval(last) == [(prefix + "/t", b"v5", [("k", "v")])], "MQTT 5, in the bundle"
    else:
        assert last == "LocalProtocolError 132", "mqtt311 has no props.py: v5() says 0x84"


# On the full tree, whose bundle holds MQTT 5 (boards.toml): an MQTT 5 app whose first import is the examples' `from
# tinymqtt import props as P`, and a 3.1.1 app; both through mosquitto.
LAZY_APPS = {5: '''from tinymqtt import props as P
import sys
from tinymqtt.client import Client
import tinymqtt.aliases
from tinymqtt.aliases import TopicAliases
import tinymqtt.session5 as s5
assert P is s5 is sys.modules["tinymqtt.props"] is tinymqtt.aliases and P.Session5 and TopicAliases
''', 4: '''import sys
from tinymqtt.client import Client
'''}
LAZY_RUN = '''got = []
c = Client(HOST, PORT, client_id=PREFIX[-12:], version=VERSION, reconnect=False)
c.on_message = lambda m: got.append((m.topic, bytes(m.payload)))
c.connect()
c.subscribe(PREFIX + "/#", 1)
c.publish(PREFIX + "/t", b"v%d" % VERSION, qos=1)
for _ in range(200):
    if got:
        break
    c.loop(0.05)
c.disconnect()
print(sorted(m for m in sys.modules if m.startswith("tinymqtt.")))
print(got)
'''


@pytest.mark.parametrize("version", [5, 4])
@pytest.mark.parametrize("kind", ["unix", "cpython"])
def test_full_bundles_mqtt5_and_both_versions_run_from_the_deployed_tree(broker, tmp_path, kind, version):
    if kind == "unix" and not os.path.exists(MICROPYTHON):
        pytest.skip("no unix-port micropython")
    b = boards.get("linux", profile="full")
    v5 = {"tinymqtt/session5.py", "tinymqtt/props.py", "tinymqtt/aliases.py"}
    assert v5 <= set(b.bundle)
    tree = deploy(tmp_path, "linux", "full", *(["--source"] if kind == "cpython" else []))
    ext = ".py" if kind == "cpython" else ".mpy"
    assert not any((tree / "lib" / (m[:-3] + ext)).exists() for m in v5), "in tinymqtt/__init__, not files"
    prefix = "lazy/%s" % uuid.uuid4().hex
    code = "HOST, PORT, PREFIX, VERSION = %r, %d, %r, %d\n" % (broker.host, broker.port, prefix, version) + \
        LAZY_APPS[version] + LAZY_RUN
    if kind == "cpython":
        cmd, env = [sys.executable, "-I", "-c", "import sys; sys.path[:0] = [%r]\n" % str(tree / "lib") + code], None
    else:
        cmd, env = [MICROPYTHON, "-c", code], {"MICROPYPATH": ".frozen:%s" % (tree / "lib")}
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    loaded, got = [eval(line) for line in p.stdout.splitlines()[-2:]]
    assert got == [(prefix + "/t", b"v%d" % version)]
    assert {"tinymqtt." + m[9:-3] for m in v5} <= set(loaded), "the bundle names its modules when it loads"


def test_boards_toml_refuses_a_bundle_outside_the_profiles_files():
    text = ('[profile.full]\nlib = ["tinymqtt/__init__.py", "tinymqtt/errors.py"]\nbundle = ["tinymqtt/wire.py"]\n')
    with pytest.raises(boards.BoardError) as e:
        boards.parse_profiles(text)
    assert "[profile.full] bundle: tinymqtt/wire.py is not one of the profile's lib modules" in str(e.value)


def test_steady_state_publish_allocates_nothing_from_the_bundle_on_32_bit_micropython(broker, tmp_path):
    # tests/test_heap_blocking.py's app (heap_lock() around publish + loop, MQTT 3.1.1 and 5) on the simulated
    # board with deploy's bundled full library in place of the separate modules tools.sim copies
    import shutil
    import tempfile
    import tools.sim
    from tests.test_heap_blocking import APP, check
    from tools.deploy import library_files
    root = tools.sim.assemble(APP, str(tmp_path / "board"), "sim", dict(
        BROKER_HOST=broker.host, BROKER_PORT=broker.port, PREFIX="hb/bundle/", WARMUP=20, N=100))
    shutil.rmtree(os.path.join(root, "lib", "tinymqtt"))
    with tempfile.TemporaryDirectory() as tmp:
        for dest, data, _ in library_files(boards.get("sim"), tmp):
            os.makedirs(os.path.dirname(os.path.join(root, dest)), exist_ok=True)
            with open(os.path.join(root, dest), "wb") as f:
                f.write(data)
    assert os.path.exists(os.path.join(root, "lib", "tinymqtt", "__init__.mpy"))
    assert not os.path.exists(os.path.join(root, "lib", "tinymqtt", "session.mpy"))
    argv, env = tools.sim.command(root, "sim")
    p = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    res = tools.sim.results(p.stdout)
    assert p.returncode == 0 and len(res) == 1, p.stdout[-3000:] + p.stderr[-3000:]
    check(res[0], "32-bit, bundled", 16)
