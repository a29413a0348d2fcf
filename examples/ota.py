# An over-the-air update (docs/streaming.md): the board takes a firmware image far larger than its receive
# buffer, and larger than its heap, from the retained QoS 1 message on PREFIX/image, in chunks as the bytes arrive
# (subscribe(..., chunks=True)), writing each chunk to a file and hashing it. The image's SHA-256 comes with it:
# MQTT 5, as the message's user property "sha256"; MQTT 3.1.1, in the retained manifest on PREFIX/manifest
# ({"size": n, "sha256": hex}), subscribed first so the broker sends it first. When the last chunk is in, the
# board compares the hashes and reports on PREFIX/status ("ok <sha256> <bytes>" or "bad ..."). The session is
# kept (clean False): a link cut in the middle of the image resumes, the broker sends the unacknowledged image
# again from its start, and the file is written again from offset 0. The image is acknowledged only after its
# last chunk was written and hashed. Its publisher on a host: tools/ota_publish.py.
#   config: BROKER_HOST, BROKER_PORT, CLIENT_ID, PREFIX, VERSION (5 or 4), IMAGE_FILE, MAX_IMAGE (bytes),
#   SESSION (the board's buffers from boards.toml: max_packet_size, out_size)
import binascii
import hashlib
import json

import config
from tinymqtt.client import Client

PREFIX = getattr(config, "PREFIX", "ota/" + config.CLIENT_ID)
VERSION = getattr(config, "VERSION", 5)
FILE = getattr(config, "IMAGE_FILE", "ota.bin")
MAX_IMAGE = getattr(config, "MAX_IMAGE", 2 << 20)


class Update:
    """The image being received: its file, its running hash and what it should come to."""

    def __init__(self):
        self.expected = None  # the SHA-256, hex (from the manifest, or the message's user property)
        self.result = None  # the status to report once the image is whole
        self.f = self.h = None
        self.starts = 0  # how many times the image began (a cut one begins again)

    def manifest(self, msg):
        self.expected = json.loads(bytes(msg.payload).decode())["sha256"]

    def chunk(self, msg, total, offset, data):
        if offset == 0:  # the image begins (again, after a cut): a new file, a new hash
            if self.f:
                self.f.close()
            self.f = open(FILE, "wb")
            self.h = hashlib.sha256()
            self.starts += 1
            if msg.props:  # MQTT 5: the hash travels with the image
                for k, v in msg.props.get(0x26, ()):  # User Property pairs
                    if k == "sha256":
                        self.expected = v
        self.f.write(data)
        self.h.update(data)
        if offset + len(data) == total:  # the last chunk: the file is whole
            self.f.close()
            self.f = None
            got = binascii.hexlify(self.h.digest()).decode()
            self.result = ("ok %s %d" if got == self.expected else "bad %s %d") % (got, total)


def main():
    u = Update()
    opts = dict(getattr(config, "SESSION", {}))
    if VERSION == 5:
        opts["session_expiry"] = 3600  # the broker keeps the session (and the unacknowledged image) across a cut
    c = Client(config.BROKER_HOST, getattr(config, "BROKER_PORT", 1883), client_id=config.CLIENT_ID,
               version=VERSION, clean=False, keepalive=30, max_stream_size=MAX_IMAGE, backoff_min_ms=100,
               backoff_max_ms=1000, **opts)
    c.connect()
    if VERSION != 5:
        c.subscribe(PREFIX + "/manifest", 1, handler=u.manifest)
    c.subscribe(PREFIX + "/image", 1, handler=u.chunk, chunks=True)
    print("READY", PREFIX)
    while u.result is None:
        c.loop(1.0)
    c.wait_for(c.publish(PREFIX + "/status", u.result, 1, retain=True), 10)
    print("OTA", u.result, "starts", u.starts)
    c.disconnect()


main()
