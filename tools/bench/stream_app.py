# Board app (MicroPython, the unix port) for tools/bench/stream.py: a 1 MB payload streamed both ways, beside a raw
# socket moving the same bytes, each timed on the board with ticks_ms. With the esp32's buffers (4 KB in, 2 KB out):
#   receive: subscribe(..., chunks=True) to the retained 1 MB image on PREFIX + "1048576", to its last chunk;
#   raw receive: a plain socket reads the same number of bytes from the host's sender into a 4 KB buffer;
#   publish: publish(topic, file, 1, length=n) from a 1 MB file on the board's file system, to its PUBACK;
#   raw send: a plain socket writes the same file in 2 KB pieces to the host's sink, to its one-byte answer;
#   raw MQTT receive / publish: a plain socket speaking MQTT 3.1.1 through the same mosquitto with packets encoded
#   by hand before the clock starts: SUBSCRIBE (QoS 0) to the same retained image, read in 4 KB pieces to its last
#   byte; a QoS 1 PUBLISH header and the same file in 2 KB writes, to its PUBACK (the ceiling through the broker).
# Each is run ROUNDS times; the best time counts (ticks_us). The payload file is written before any timing.
# Prints RESULT {"receive_us": ..., "raw_receive_us": ..., "publish_us": ..., "raw_send_us": ...,
#                "mqtt_raw_receive_us": ..., "mqtt_raw_publish_us": ..., "bytes": n}.
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


def raw_socket(port):
    """A plain socket connected to port, Nagle off as tinymqtt's port has it (else its last small write waits
    for a delayed ACK)."""
    s = socket.socket()
    s.setsockopt(getattr(socket, "IPPROTO_TCP", 6), getattr(socket, "TCP_NODELAY", 1), 1)
    s.connect(addr(port))
    return s


ROUNDS = config.ROUNDS
best = {}


def timed(key, fn, after=None):
    for _ in range(ROUNDS):
        t = time.ticks_us()
        fn()
        us = time.ticks_diff(time.ticks_us(), t)
        if after:  # (not timed)
            after()
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


def unsubscribe():
    c.unsubscribe(config.PREFIX + str(N))


def raw_receive():
    s = raw_socket(config.RAW_SENDER)
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
    s = raw_socket(config.RAW_SINK)
    with open("image.bin", "rb") as f:
        while True:
            k = f.readinto(mv[:2048])
            if not k:
                break
            s.write(mv[:k])
    s.read(1)  # the sink has every byte
    s.close()


def vbi(n):  # MQTT's Remaining Length: a variable byte integer
    out = b""
    while True:
        d, n = n & 0x7F, n >> 7
        out += bytes([d | (0x80 if n else 0)])
        if not n:
            return out


def utf8(s):
    b = s.encode()
    return bytes([len(b) >> 8, len(b) & 255]) + b


def mqtt_socket():
    """A plain socket with an MQTT 3.1.1 session (clean) open on the broker: CONNECT sent, CONNACK read."""
    body = utf8("MQTT") + b"\x04\x02\x00\x3c" + utf8("raw-" + config.CLIENT_ID)
    s = raw_socket(config.BROKER_PORT)
    s.write(b"\x10" + vbi(len(body)) + body)
    s.read(4)
    return s


IMAGE = utf8(config.PREFIX + str(N))
SUBSCRIBE = b"\x82" + vbi(2 + len(IMAGE) + 1) + b"\x00\x01" + IMAGE + b"\x00"
EXPECT = 5 + 1 + len(vbi(len(IMAGE) + N)) + len(IMAGE) + N  # SUBACK, then the image's PUBLISH at QoS 0
RAW = utf8(config.PREFIX + "raw")
PUBLISH = b"\x32" + vbi(len(RAW) + 2 + N) + RAW + b"\x00\x01"  # QoS 1, packet id 1; the payload follows


def mqtt_raw_receive():
    s = mqtt_socket()
    t = time.ticks_us()
    s.write(SUBSCRIBE)
    n = 0
    while n < EXPECT:
        k = s.readinto(mv[:min(4096, EXPECT - n)])
        if not k:
            break
        n += k
    us = time.ticks_diff(time.ticks_us(), t)
    s.close()
    fig["mqtt_raw_received"] = n == EXPECT
    return us


def mqtt_raw_publish():
    s = mqtt_socket()
    with open("image.bin", "rb") as f:
        t = time.ticks_us()
        h = len(PUBLISH)  # the header goes out with the first payload bytes, in one 2 KB write, as tinymqtt's does
        buf[:h] = PUBLISH
        k = h + f.readinto(mv[h:2048])
        while k:
            s.write(mv[:k])
            k = f.readinto(mv[:2048])
        ack = s.read(4)  # PUBACK
        us = time.ticks_diff(time.ticks_us(), t)
    s.close()
    fig["mqtt_raw_acked"] = ack == b"\x40\x02\x00\x01"
    return us


def timed_inside(key, fn):  # fn times itself (its connection is opened before its clock starts)
    for _ in range(ROUNDS):
        us = fn()
        if key not in best or us < best[key]:
            best[key] = us


timed("receive_us", receive, unsubscribe)
timed_inside("mqtt_raw_receive_us", mqtt_raw_receive)
timed("raw_receive_us", raw_receive)
timed("publish_us", publish)
timed_inside("mqtt_raw_publish_us", mqtt_raw_publish)
timed("raw_send_us", raw_send)
c.disconnect()
fig.update(best)
print("RESULT", json.dumps(fig))
