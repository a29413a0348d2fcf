# Real mpremote against a real MicroPython without hardware: tools/deploy puts the linux board's file set
# (.mpy library and port, main.py, config.py) on the unix port behind a TCP-to-pty bridge
# (tests/support/mpbridge.py) with `mpremote connect socket://...`, the example it deployed runs there against
# mosquitto, and a redeploy copies only what changed (and the example runs again with the new config).
import io
import os
import time

import pytest

from tests.support import unixport
from tests.support.mpbridge import Device
from tests.test_sim_board import Peer, until, uid

pytestmark = pytest.mark.skipif(not unixport.available(), reason="needs .venv/bin/micropython")


def deploy(device, broker, prefix, *more):
    from tools.deploy.__main__ import main
    out, err = io.StringIO(), io.StringIO()
    argv = ["--board", "linux", "--app", "examples/telemetry.py", "--device", device.url, "--secrets", os.devnull,
            "--broker", "%s:%d" % (broker.host, broker.port), "--set", "PREFIX=%r" % prefix, "--set", "COUNT=3",
            "--client-id", "dev-" + uid()] + list(more)
    rc = main(argv, env={}, out=out, err=err)
    return rc, out.getvalue(), err.getvalue()


def test_deploy_run_and_redeploy_with_real_mpremote(broker, tmp_path, library_built_once):
    # (the redeploy takes the library the first deploy built: tests/conftest.py; what changed is config.py)
    prefix = "mp/" + uid()
    peer = Peer(broker, 5)
    peer.c.subscribe(prefix + "/#", 1)
    with Device(str(tmp_path)) as dev:
        rc, out, err = deploy(dev, broker, prefix, "--set", "PERIOD_MS=100")
        assert rc == 0, out + err + dev.output.decode(errors="replace")
        files = [l for l in out.splitlines() if "files changed" in l][0]
        total = int(files.split(" of ")[1].split()[0])
        assert "MicroPython 1.29.0 on linux; %d of %d files changed" % (total, total) in out, out
        assert (tmp_path / "lib" / "tinymqtt" / "__init__.mpy").is_file() and (tmp_path / "config.py").is_file()  # (the bundle)
        assert not os.path.exists("/lib/tinymqtt"), "the device's files went to its own folder, not the host's /"

        def readings():
            return [m for m in peer.msgs if m.topic.endswith("/telemetry")]

        assert until(lambda: len(readings()) >= 3 and peer.payloads(prefix + "/status")[-1:] == [b"offline"],
                     20, [peer]), dev.output[-2000:]
        time.sleep(0.3)  # the program has ended: its last output is on the pty
        rc, out, err = deploy(dev, broker, prefix, "--set", "PERIOD_MS=150")
        assert rc == 0, out + err
        assert "1 of %d files changed" % total in out, out
        assert until(lambda: len(readings()) >= 6, 20, [peer]), dev.output[-2000:]
        assert [b'"n": %d' % n in m.payload for n, m in zip((1, 2, 3, 1, 2, 3), readings())] == [True] * 6
        assert dev.alive()
    peer.close()
