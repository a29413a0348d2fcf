# Board app (MicroPython: the unix ports, the simulated board): one streamed QoS 2 message both ways, through the
# fault proxy the test puts between the board and mosquitto. The board writes a file of config.SIZE bytes (a
# pattern each byte of which it can check), subscribes to TOPIC with chunks=True at QoS 2, then publishes the file
# to the same TOPIC at QoS 2 with length= (streamed from the file through the 2 KB send buffer), so the message
# goes up and comes back down in chunks through the 4 KB receive buffer, with a heap smaller than the message. The
# session is kept (clean False), so whatever the proxy cuts resumes: the handler checks every byte at its offset,
# counts the times the message begins (offset 0) and the times it ends (its last chunk). Once the publish's flow
# is complete and the message arrived, it loops on for a while to let a duplicate show.
# Prints RESULT {"published": bool, "starts": n, "done": n, "bytes": n, "bad": n, "pending": [...]}.
import json

import config
from tinymqtt.client import Client

N = config.SIZE
TOPIC = config.PREFIX + "/x"


def pattern(o):
    return (o * 31 + (o >> 10)) & 255


st = {"starts": 0, "done": 0, "bytes": 0, "bad": 0}


def on_chunk(msg, total, offset, chunk):
    if offset == 0:  # the message begins (again, after a cut)
        st["starts"] += 1
        st["bytes"] = st["bad"] = 0
    if offset != st["bytes"]:
        st["bad"] += 1
    for i in range(len(chunk)):
        if chunk[i] != pattern(offset + i):
            st["bad"] += 1
    st["bytes"] = offset + len(chunk)
    if offset + len(chunk) == total:
        st["done"] += 1


buf = bytearray(2048)
with open("image.bin", "wb") as f:
    for at in range(0, N, len(buf)):
        k = min(len(buf), N - at)
        for i in range(k):
            buf[i] = pattern(at + i)
        f.write(memoryview(buf)[:k])

opts = {"session_expiry": 600} if config.VERSION == 5 else {}
c = Client(config.BROKER_HOST, config.BROKER_PORT, client_id=config.CLIENT_ID, version=config.VERSION, clean=False,
           keepalive=30, backoff_min_ms=10, backoff_max_ms=200, max_packet_size=4096, out_size=2048,
           max_stream_size=1 << 20, **opts)
c.connect()
c.subscribe(TOPIC, 2, handler=on_chunk, chunks=True)
with open("image.bin", "rb") as f:
    published = c.wait_for(c.publish(TOPIC, f, 2, length=N), 30)
k = 0
while (not st["done"] or c.session._rx_pid) and k < 300:  # (_rx_pid: QoS 2 messages whose PUBREL is due)
    c.loop(0.1)
    k += 1
for _ in range(5):  # a duplicate would come now
    c.loop(0.1)
c.disconnect()
print("RESULT", json.dumps(dict(st, published=published, pending=list(c.session._rx_pid))))
