# `deploy --romfs` on real ROMFS: the image deploy would write to a device's partition (library and port under
# rom/, built by mpremote's own `romfs build`), mounted by the unix-port MicroPython's VfsRom (the ROMFS code a
# board with ROMFS runs), imports from /rom/lib and runs the example against mosquitto with no other copy of
# tinymqtt on the path. The unix port has VfsRom but no ROMFS partition, so the image is mounted from memory.
import json
import os
import subprocess
import uuid

import pytest

from tinymqtt.client import Client
from tools import boards, deploy

REPO = boards.REPO
MICROPYTHON = os.path.join(REPO, ".venv", "bin", "micropython")
MPREMOTE = os.path.join(REPO, ".venv", "bin", "mpremote")

BOOT = '''import sys, vfs
f = open(%(img)r, "rb")
img = f.read()
f.close()
vfs.mount(vfs.VfsRom(img), "/rom")
sys.path.insert(0, "/rom/lib")  # where a ROMFS board looks first
import tinymqtt, tinymqtt_port
print("FROM", tinymqtt.__file__, tinymqtt_port.__file__)
import main
'''


def romfs_image(files, tmp):
    """The image deploy --romfs writes, built by mpremote from deploy's own romfs folder."""
    img = os.path.join(tmp, "romfs.img")
    p = subprocess.run([MPREMOTE, "romfs", "--no-mpy", "-o", img, "build", deploy.romfs_folder(files, tmp)],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and os.path.getsize(img) > 0, p.stdout + p.stderr
    return img


@pytest.mark.skipif(not os.path.exists(MICROPYTHON), reason="no unix-port micropython")
@pytest.mark.parametrize("profile", ["mqtt311", "full"])
def test_the_romfs_image_runs_the_example_from_vfsrom(broker, tmp_path, profile):
    board = boards.get("linux", profile=profile)
    prefix = "romfs/%s/%s" % (profile, uuid.uuid4().hex[:8])
    values = deploy.config_values(board, broker.host, broker.port, extra={"COUNT": 2, "PERIOD_MS": 50,
                                                                         "PREFIX": prefix})
    files = deploy.in_romfs(deploy.build(board, "examples/sensor.py", values))
    assert {f.dest for f in files if f.dest.startswith("lib/")} == set(), "library and port all go to rom/"
    img = romfs_image(files, str(tmp_path))
    tree = tmp_path / "board"
    deploy.write_target([f for f in files if not f.dest.startswith(deploy.ROM)], str(tree), open(os.devnull, "w"))
    (tree / "boot_romfs.py").write_text(BOOT % {"img": img})
    got = []
    w = Client(broker.host, broker.port, version=4, client_id="w" + prefix[-8:], reconnect=False)
    w.on_message = lambda m: got.append((m.topic, bytes(m.payload)))
    w.connect()
    w.subscribe(prefix + "/#", 1)
    p = subprocess.run([MICROPYTHON, "boot_romfs.py"], cwd=tree, env={"MICROPYPATH": ".frozen:%s" % tree},
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.split() == ["FROM", "/rom/lib/tinymqtt/__init__.mpy", "/rom/lib/tinymqtt_port.mpy", "READY",
                                prefix + "/status", "SENT", "1", "SENT", "2", "DONE"], p.stdout
    for _ in range(100):
        if (prefix + "/status", b"offline") in got:
            break
        w.loop(0.05)
    w.disconnect()
    assert [json.loads(m[1])["n"] for m in got if m[0].endswith("/telemetry")] == [1, 2]
