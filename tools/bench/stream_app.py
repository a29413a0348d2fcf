# Board app (MicroPython, the unix port) for tools/bench/stream.py: a 1 MB payload streamed both ways, beside a raw
# socket moving the same bytes, each timed on the board with ticks_ms. With the esp32's buffers (4 KB in, 2 KB out):
#   receive: subscribe(..., chunks=True) to the retained 1 MB image on PREFIX + "1048576", to its last chunk;
#   raw receive: a plain socket reads the same number of bytes from the host's sender into a 4 KB buffer;
#   publish: publish(topic, file, 1, length=n) from a 1 MB file on the board's file system, to its PUBACK;
#   raw send: a plain socket writes the same file in 2 KB pieces to the host's sink, to its one-byte answer.
# Each is run ROUNDS times; the best time counts (ticks_us). The payload file is written before any timing.
# Prints RESULT {"receive_us": ..., "raw_receive_us": ..., "publish_us": ..., "raw_send_us": ..., "bytes": n}.
import json
import socket
import time

import config
from tinymqtt.client import Client

N = 1 << 20
fig = {"bytes": N}
got = [0]


def on_chunk(msg, total, offset, chunk):
    got[0] = offset + len(chunk)


def addr(port):
    return socket.getaddrinfo(config.BROKER_HOST, port)[0][-1]


ROUNDS = config.ROUNDS
best = {}


def timed(key, fn):
    for _ in range(ROUNDS):
        t = time.ticks_us()
        fn()
        us = time.ticks_diff(time.ticks_us(), t)
        if key not in best or us < best[key]:
            best[key] = us


buf = bytearray(4096)
mv = memoryview(buf)
with open("image.bin", "wb") as f:  # the payload on the board's file system (not timed)
    for i in range(N // 4096):
        buf[0] = i & 255
        f.write(buf)

c = Client(config.BROKER_HOST, config.BROKER_PORT, client_id=config.CLIENT_ID, version=5, max_packet_size=4096,
           out_size=2048, max_stream_size=2 << 20)
c.connect()


def receive():  # the retained image, sent again at each new subscription
    got[0] = 0
    c.subscribe(config.PREFIX + str(N), 1, handler=on_chunk, chunks=True)
    while got[0] < N:
        c.loop(1.0)
    c.unsubscribe(config.PREFIX + str(N))


def raw_receive():
    s = socket.socket()
    s.connect(addr(config.RAW_SENDER))
    n = 0
    while n < N:
        k = s.readinto(mv[:min(4096, N - n)])
        if not k:
            break
        n += k
    s.close()
    fig["raw_received"] = n


def publish():
    with open("image.bin", "rb") as f:
        fig["publish_acked"] = c.wait_for(c.publish(config.PREFIX + "up", f, 1, length=N), 60)


def raw_send():
    s = socket.socket()
    s.connect(addr(config.RAW_SINK))
    with open("image.bin", "rb") as f:
        while True:
            k = f.readinto(mv[:2048])
            if not k:
                break
            s.write(mv[:k])
    s.read(1)  # the sink has every byte
    s.close()


timed("receive_us", receive)
timed("raw_receive_us", raw_receive)
timed("publish_us", publish)
timed("raw_send_us", raw_send)
c.disconnect()
fig.update(best)
print("RESULT", json.dumps(fig))
