# examples/ota.py on real MicroPython (the 64-bit unix port, MQTT 5 and 3.1.1; the 32-bit one and the 32-bit
# WebAssembly build, the simulated board, MQTT 5) against a real mosquitto, through the fault proxy: tools/ota_publish.py (CPython, streamed from the file) publishes a
# 256 KB image retained at QoS 1 with its SHA-256; the board, with the esp32's buffers (boards.toml: 4 KB in,
# 2 KB out) and a heap smaller than the image, receives it in chunks into a file; its first connection is cut in
# the middle of the image, the session resumes, the broker sends the image again, and the board reports the
# right hash once.
import hashlib
import os
import time

import pytest

import tools.sim
from tests.support import unixport
from tests.support.faultproxy import DOWN, Cut, FaultProxy, Plan
from tinymqtt.client import Client
from tools import ota_publish

APP = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples", "ota.py")
IMAGE = 256 << 10
ESP32_BUFFERS = {"max_packet_size": 4096, "out_size": 2048}


@pytest.mark.parametrize("board,v,heap", [("unix", 5, "160k"), ("unix", 4, "160k"), ("unix32", 5, "128k"),
                                          ("sim", 5, 160 * 1024)])
def test_ota_image_arrives_whole_once_after_a_cut(broker, tmp_path, board, v, heap):
    if board == "unix32":
        unixport.need32()
    elif not os.path.exists(tools.sim.MICROPYTHON):
        pytest.skip("no MicroPython unix port")
    prefix = "ota/%s/%d/%d" % (board, v, os.getpid())
    image = tmp_path / "image.bin"
    image.write_bytes(os.urandom(IMAGE))
    digest = hashlib.sha256(image.read_bytes()).hexdigest()
    ota_publish.publish(broker.host, broker.port, prefix, v, str(image), client_id="ota-pub-%s-%d" % (board, v))
    statuses = []
    w = Client(broker.host, broker.port, client_id="ota-watch-%s-%d" % (board, v))
    w.connect()
    w.subscribe(prefix + "/status", 1, handler=lambda m: statuses.append(bytes(m.payload).decode()))
    with FaultProxy(broker.host, broker.port) as px:
        # the board's first connection is cut half way through the image coming down
        px.plan = lambda number: Plan(Cut(DOWN, at=IMAGE // 2)) if number == 1 else None
        env = dict(BROKER_HOST=px.host, BROKER_PORT=px.port, PREFIX=prefix, VERSION=v, SESSION=ESP32_BUFFERS,
                   MAX_IMAGE=1 << 20, IMAGE_FILE="ota.bin", CLIENT_ID="ota-board-%s-%d-%d" % (board, v, os.getpid()))
        p = tools.sim.run_app(APP, env=env, board=board, heap=heap, timeout=120)
        assert p.returncode == 0, "exit %d\n%s\n%s" % (p.returncode, p.stdout[-3000:], p.stderr[-3000:])
        assert len(px.cuts) == 1 and px.cuts[0][3], px.cuts  # one cut, inside a packet (the image)
    assert "OTA ok %s %d starts 2" % (digest, IMAGE) in p.stdout, p.stdout[-2000:]
    end = time.time() + 5
    while not statuses and time.time() < end:
        w.loop(0.1)
    w.loop(0.3)
    assert statuses == ["ok %s %d" % (digest, IMAGE)]  # reported once, with the right hash
    w.disconnect()
