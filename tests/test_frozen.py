# tinymqtt frozen into MicroPython firmware through the repo's manifest.py, as a board user includes it: the
# firmware manifest is `include("$(MPY_DIR)/extmod/asyncio")` plus `include(".../manifest.py", profile=...,
# port="linux")`, built into the 32-bit unix port by MicroPython's own manifest machinery (tools/mp32.py; built
# again, ~5 s, when this checkout's library changed). The board tree then holds only main.py and config.py:
# every tinymqtt module and the port come from the firmware. Against a real mosquitto: the examples as deploy
# writes them, and the QoS 0/1/2 scenario both ways (connect, subscribe, publish, receive) of the unix-port
# suites, blocking on both profiles and asyncio on full.
import os
import subprocess
import uuid

import pytest

from tests import test_sim_board as flows
from tests.support import unixport
from tests.test_sim_board import APPS as AIO_APPS, peers, prefix, uid  # noqa: F401 (fixtures)
from tests.test_unix_blocking import APPS as BLOCKING_APPS
from tests.test_profiles import deploy
from tinymqtt.client import Client
from tools import mp32

# (profile, MQTT version): mqtt311 has 3.1 and 3.1.1 only (boards.toml)
RUNS = [pytest.param("mqtt311", 4, id="mqtt311-v3.1.1"), pytest.param("full", 4, id="full-v3.1.1"),
        pytest.param("full", 5, id="full-v5")]


def firmware(profile):
    unixport.need32()
    return mp32.frozen(profile)


def frozen_board(apps, profile):
    """The body of a `board` fixture (tests/test_sim_board.py's flows): apps run on the firmware of profile."""
    started = []

    def start(app, host, port, **config):
        env = dict(config, BROKER_HOST=host, BROKER_PORT=port, CLIENT_ID="f%d%s" % (config.get("VERSION", 0), uid()))
        b = unixport.Board(os.path.join(apps, app), "linux", env, frozen=profile)
        b.config = env
        started.append(b)
        return b

    yield start
    for b in started:
        b.close()


@pytest.mark.parametrize("qos", [0, 1, 2])
@pytest.mark.parametrize("profile, version", RUNS)
def test_blocking_qos_both_directions_on_frozen_firmware(broker, peers, prefix, profile, version, qos):
    firmware(profile)
    gen = frozen_board(BLOCKING_APPS, profile)
    try:
        flows.test_qos_both_directions(broker, next(gen), peers, prefix, version, qos)
    finally:
        gen.close()


@pytest.mark.parametrize("qos", [0, 1, 2])
def test_asyncio_qos_both_directions_on_frozen_firmware(broker, peers, prefix, qos):
    firmware("full")
    gen = frozen_board(AIO_APPS, "full")
    try:
        flows.test_qos_both_directions(broker, next(gen), peers, prefix, 5, qos)
    finally:
        gen.close()


@pytest.mark.parametrize("profile, app", [("mqtt311", "examples/sensor.py"), ("full", "examples/sensor.py"),
                                          ("full", "examples/telemetry.py")])
def test_examples_run_on_frozen_firmware(broker, tmp_path, profile, app):
    exe = firmware(profile)
    tree = tmp_path / "board"
    pre = "fz%s/%s" % (profile, uuid.uuid4().hex)
    rc, out, err = deploy("--board", "linux", "--profile", profile, "--app", app, "--target", str(tree),
                          "--broker", "%s:%d" % (broker.host, broker.port),
                          "--set", "COUNT=3", "--set", "PERIOD_MS=50", "--set", "PREFIX=%r" % pre)
    assert rc == 0, err
    lib = tree / "lib"
    for d, _, files in os.walk(lib, topdown=False):  # what deploy compiled: the firmware has it all
        for f in files:
            os.remove(os.path.join(d, f))
        os.rmdir(d)
    assert "lib" not in os.listdir(tree) and not any(f.endswith(".mpy") and f.startswith("tinymqtt")
                                                     for f in os.listdir(tree)), os.listdir(tree)
    got = []
    w = Client(broker.host, broker.port, version=4, client_id="w" + pre[-8:], reconnect=False)
    w.on_message = lambda m: got.append((m.topic, bytes(m.payload)))
    w.connect()
    w.subscribe(pre + "/#", 1)
    p = subprocess.run([exe, "main.py"], cwd=tree, env={"MICROPYPATH": ".frozen:%s" % tree}, capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.split() == ["READY", pre + "/status", "SENT", "1", "SENT", "2", "SENT", "3", "DONE"]
    for _ in range(100):
        if (pre + "/status", b"offline") in got:
            break
        w.loop(0.05)
    w.disconnect()
    assert [m[1] for m in got if m[0].endswith("/telemetry")] and got[-1] == (pre + "/status", b"offline"), got


@pytest.mark.parametrize("profile", ["mqtt311", "full"])
def test_the_firmware_holds_the_profile_and_the_port(profile):
    code = ("import sys, tinymqtt, tinymqtt.client, tinymqtt_port\n"
            "try:\n    import tinymqtt.aio\n    print('aio')\nexcept ImportError:\n    print('no aio')\n"
            "print(sys.implementation._build, sys.maxsize)\n")
    p = subprocess.run([firmware(profile), "-c", code], env={"MICROPYPATH": ".frozen"}, capture_output=True,
                       text=True, timeout=30)
    assert p.returncode == 0, p.stdout + p.stderr
    # mqtt311 leaves the asyncio client out (boards.toml); a 32-bit build: sys.maxsize is 2**31 - 1
    assert p.stdout.splitlines() == ["no aio" if profile == "mqtt311" else "aio", "standard %d" % ((1 << 31) - 1)]
