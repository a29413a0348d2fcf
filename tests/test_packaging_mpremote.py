# The packaging paths against a real MicroPython through the real mpremote (the unix port behind
# tests/support/mpbridge.py): `mpremote mip install` of the mqtt311 profile's metadata, then the client
# imported there; and deploy --romfs on a firmware without ROMFS (the unix port's) falling back to a plain copy
# whose 3.1.1 example then runs against mosquitto.
import io
import os
import subprocess
import sys
import time

import pytest

from tests.support import unixport
from tests.support.mpbridge import Device
from tests.test_sim_board import Peer, until, uid
from tools import boards

pytestmark = pytest.mark.skipif(not unixport.available(), reason="needs .venv/bin/micropython")
MPREMOTE = os.path.join(os.path.dirname(sys.executable), "mpremote")


def mpremote(dev, *args):
    p = subprocess.run([MPREMOTE, "connect", dev.url, "resume"] + list(args), capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr + dev.output.decode(errors="replace")[-2000:]
    return p.stdout


def test_mpremote_mip_installs_the_mqtt311_profile(tmp_path):
    with Device(str(tmp_path)) as dev:
        # (one mpremote session: the install, then the import on the same device, as two chained commands)
        out = mpremote(dev, "mip", "install", "--target", "lib", os.path.join(boards.REPO, "lib", "mqtt311.json"),
                       "+", "exec", "import sys, tinymqtt.client\n"
                                    "print(sorted(m for m in sys.modules if m.startswith('tinymqtt.')))")
        assert out.count("Installing:") == len(boards.profiles()["mqtt311"].lib)
        loaded = eval(out.strip().splitlines()[-1])
        assert "tinymqtt.client" in loaded and "tinymqtt.props" not in loaded
    assert sorted(os.listdir(tmp_path / "lib" / "tinymqtt")) == sorted(
        os.path.basename(m) for m in boards.profiles()["mqtt311"].lib)


def test_deploy_romfs_without_romfs_copies_and_runs(broker, tmp_path):
    from tools.deploy.__main__ import main
    prefix = "romfs/" + uid()
    peer = Peer(broker, 5)
    peer.c.subscribe(prefix + "/#", 1)
    with Device(str(tmp_path)) as dev:
        out, err = io.StringIO(), io.StringIO()
        rc = main(["--board", "linux", "--profile", "mqtt311", "--app", "examples/sensor.py", "--device", dev.url,
                   "--romfs", "--secrets", os.devnull, "--broker", "%s:%d" % (broker.host, broker.port),
                   "--set", "PREFIX=%r" % prefix, "--set", "COUNT=2", "--set", "PERIOD_MS=50"],
                  env={}, out=out, err=err)
        assert rc == 0, out.getvalue() + err.getvalue() + dev.output.decode(errors="replace")[-2000:]
        assert "no ROMFS partition; copying the files instead" in out.getvalue()
        assert (tmp_path / "lib" / "tinymqtt" / "__init__.mpy").is_file()  # (the bundle: errors ... client)
        assert not (tmp_path / "lib" / "tinymqtt" / "aio.mpy").exists(), "the profile's files only"
        assert until(lambda: [m.payload for m in peer.msgs if m.topic == prefix + "/status"][-1:] == [b"offline"],
                     20, [peer]), dev.output.decode(errors="replace")[-2000:]
        time.sleep(0.2)
    assert len([m for m in peer.msgs if m.topic == prefix + "/telemetry"]) == 2
    peer.close()
