# The host side of examples/ota.py: publishes a firmware image to a board, retained at QoS 1 so a board that
# connects later still gets it, streamed from the file (publish(..., length=n): never whole in RAM) with its
# SHA-256: MQTT 5 as the user property "sha256", MQTT 3.1.1 in a retained manifest on PREFIX/manifest sent
# first. With --wait it then waits for the board's report on PREFIX/status and exits 0 only for "ok <sha256>".
#   python -m tools.ota_publish --host 127.0.0.1 --port 1883 --prefix ota/dev1 --version 5 image.bin --wait 60
import argparse
import hashlib
import json
import os
import sys
import time

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for _d in (os.path.join(_REPO, "lib"), os.path.join(_REPO, "ports", "linux")):
    if _d not in sys.path:
        sys.path.insert(0, _d)

from tinymqtt.client import Client  # noqa: E402


def sha256_of(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 16), b""):
            h.update(block)
    return h.hexdigest()


def publish(host, port, prefix, version, path, wait=0, client_id=None):
    """Publishes the image (and, on 3.1.1, its manifest); returns the board's status when wait > 0, else None."""
    size, digest = os.path.getsize(path), sha256_of(path)
    status = []
    c = Client(host, port, client_id=client_id or "ota-pub-%d" % os.getpid(), version=version,
               max_packet_size=4096, out_size=4096)  # (the host streams too: the image goes through 4 KB)
    c.connect()
    if wait:
        c.subscribe(prefix + "/status", 1, handler=lambda m: status.append(bytes(m.payload).decode()))
        c.loop(0.2)
        status.clear()  # (a retained status from an earlier update)
    props = None
    if version == 5:
        props = {0x26: [("sha256", digest)]}  # User Property
    else:
        c.wait_for(c.publish(prefix + "/manifest", json.dumps({"size": size, "sha256": digest}), 1, retain=True), 30)
    with open(path, "rb") as f:
        c.wait_for(c.publish(prefix + "/image", f, 1, retain=True, props=props, length=size), 120)
    end = time.time() + wait
    while wait and not status and time.time() < end:
        c.loop(0.2)
    c.disconnect()
    return status[0] if status else None


def main(argv=None):
    ap = argparse.ArgumentParser(description="Publish a firmware image to examples/ota.py on a board")
    ap.add_argument("image")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=1883)
    ap.add_argument("--prefix", required=True, help="the board's topic prefix (examples/ota.py's PREFIX)")
    ap.add_argument("--version", type=int, default=5, choices=(4, 5))
    ap.add_argument("--wait", type=float, default=0, help="seconds to wait for the board's status")
    a = ap.parse_args(argv)
    st = publish(a.host, a.port, a.prefix, a.version, a.image, a.wait)
    print("published %s (%d bytes, sha256 %s)%s" % (a.image, os.path.getsize(a.image), sha256_of(a.image),
                                                    "; board: %s" % st if a.wait else ""))
    return 0 if not a.wait or (st or "").startswith("ok " + sha256_of(a.image)) else 1


if __name__ == "__main__":
    sys.exit(main())
