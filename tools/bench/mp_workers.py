# The MicroPython row's publishers: run by MicroPython's unix port (tools/bench/mp_unix.py), with the protocol
# of tools/bench/workers.py:  micropython mp_workers.py CLIENT MODE QOS N PORT CAP_S WINDOW PAYLOAD_LEN TOPIC
# CLIENT: mp-raw (pre-encoded packets, the ceiling) | mp-tinymqtt | mp-tinymqtt-aio (await publish()) |
# mp-tinymqtt-aio-nowait (publish_nowait() + await flush()) | mp-umqtt |
# mp-umqtt-nodelay (umqtt.simple with TCP_NODELAY set on its socket) | mp-mqtt_as (Peter Hinch's mqtt_as: its
# `network` and `machine` are stand-ins on the unix port, tools/bench/mp_peers.py puts them on the path). MODE:
# tput, or alloc (heap bytes per publish and per received message through the client's public API: RESULT
# {"pub q0": B, "rx q1": B, ...}). tools/bench/mp_unix.py runs CLIENT mp32-NAME as mp-NAME on the 32-bit port.
import json
import os
import sys
import time

HOST = "127.0.0.1"
_CPU0 = [0.0]


def now():
    return time.ticks_us() / 1e6  # CLOCK_MONOTONIC on the unix port: the coordinator's time.monotonic()


def cpu():
    with open("/proc/self/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / 100  # clock ticks of 10 ms (Linux's USER_HZ)


def ready():
    print("READY")
    if sys.stdin.readline().strip() != "GO":
        raise SystemExit("no GO")
    _CPU0[0] = cpu()
    return now()


def result(**kw):
    kw["cpu"] = cpu() - _CPU0[0]
    print("RESULT " + json.dumps(kw))


# tinymqtt's buffers: `out` (a burst of messages per write) and the largest packet it reads, 64 KB each unless
# the environment's MP_BUFFERS says "OUT,IN" (the esp32 and Pico W ports' defaults: "2048,4096")
_out, _in = (os.getenv("MP_BUFFERS") or "65536,65536").split(",")
BUFFERS = {"out_size": int(_out), "max_packet_size": int(_in)}


def cid(name):
    return "bench-mp-%s-%d" % (name, time.ticks_us() % 1000000)


def _str(b):
    return bytes([len(b) >> 8, len(b) & 255]) + b


def _vbi(n):
    out = bytearray()
    while True:
        d, n = n & 127, n >> 7
        out.append(d | (128 if n else 0))
        if not n:
            return bytes(out)


# ------------------------------------------------------------------------------------------ the ceiling

def raw(mode, qos, n, port, cap, window, payload, topic):
    """PUBLISH packets encoded before the clock starts, written in batches of up to 64 KiB (at most `window`
    QoS 1/2 messages unacknowledged); acks read as they come, each PUBREC answered with a PUBREL."""
    import socket
    import select
    s = socket.socket()
    s.connect(socket.getaddrinfo(HOST, port)[0][-1])
    s.setsockopt(6, 1, 1)  # IPPROTO_TCP, TCP_NODELAY (the unix port names neither)
    body = _str(b"MQTT") + bytes([4, 2, 0, 60]) + _str(cid("raw").encode())
    s.write(bytes([0x10]) + _vbi(len(body)) + body)
    ack = s.read(4)
    if ack[:2] != b"\x20\x02" or ack[3]:
        raise SystemExit("raw: bad CONNACK %r" % ack)
    tb = topic.encode()
    npid = min(65535, max(window, 1) * 2) if qos else 1
    one = len(bytes([0x30 | qos << 1]) + _vbi(2 + len(tb) + (2 if qos else 0) + len(payload))) + 2 + len(tb) + \
        (2 if qos else 0) + len(payload)
    per = max(1, 65536 // one)
    if qos:
        per = min(per, max(window // 2, 1))
    batches = []
    for i in range(0, n, per):
        b = bytearray()
        for k in range(i, min(n, i + per)):
            pid = k % npid + 1
            pb = _str(tb) + (bytes([pid >> 8, pid & 255]) if qos else b"") + payload
            b += bytes([0x30 | qos << 1]) + _vbi(len(pb)) + pb
        batches.append(b)
    s.setblocking(False)
    poll = select.poll()
    poll.register(s, select.POLLIN)
    buf = bytearray(65536)
    mv = memoryview(buf)
    have = [0]
    acked = [0]

    def read_acks(timeout_ms):
        poll.poll(timeout_ms)
        k = s.readinto(mv[have[0]:])
        if not k:
            return
        have[0] += k
        end = have[0] - have[0] % 4  # every 3.1.1 ack is 4 bytes
        rel = bytearray()
        for j in range(0, end, 4):
            if buf[j] == 0x50:
                rel += b"\x62\x02" + buf[j + 2:j + 4]
            else:
                acked[0] += 1  # PUBACK or PUBCOMP
        buf[:have[0] - end] = buf[end:have[0]]
        have[0] -= end
        if rel:
            write_all(rel)

    def write_all(b):
        v, off = memoryview(b), 0
        while off < len(b):
            k = s.write(v[off:])
            if k:
                off += k
            else:
                poll.poll(10)

    t0 = ready()
    stop = t0 + cap
    sent = 0
    for b in batches:
        k = len(b) // one
        while qos and sent + k - acked[0] > window:
            read_acks(100)
        write_all(b)
        sent += k
        if now() > stop:
            break
    t_pub = now()
    while qos and acked[0] < sent and now() < stop + 10:
        read_acks(100)
    result(sent=sent, t0=t0, t_pub=t_pub, t_done=now(), pending=sent - acked[0] if qos else 0)
    write_all(b"\xe0\x00")
    s.close()


# ------------------------------------------------------------------------------------------ tinymqtt

def tinymqtt(mode, qos, n, port, cap, window, payload, topic):
    from tinymqtt.client import Client
    c = Client(HOST, port, reconnect=False, batch=True, client_id=cid("tiny"), version=4, max_inflight=window,
               **BUFFERS)
    c.connect()
    t0 = ready()
    stop = t0 + cap
    sent = 0
    while sent < n:
        c.publish(topic, payload, qos)
        sent += 1
        if not sent & 1023 and now() > stop:
            break
    c.flush()
    t_pub = now()
    f = c.session.flights
    while f.count and c.is_connected() and now() < stop + 10:
        c.loop(0.5)
    result(sent=sent, t0=t0, t_pub=t_pub, t_done=now(), pending=f.count)
    c.disconnect()


def tinymqtt_aio(mode, qos, n, port, cap, window, payload, topic, nowait=False):
    import asyncio
    from tinymqtt.aio import AsyncClient

    async def main():
        c = AsyncClient(HOST, port, reconnect=False, client_id=cid("aio"), version=4, max_inflight=window,
                        **BUFFERS)
        await c.connect()
        t0 = ready()
        stop = t0 + cap
        sent = 0
        while sent < n:
            if not nowait:
                await c.publish(topic, payload, qos, wait=False)
            elif c.publish_nowait(topic, payload, qos) < 0:  # every slot taken: let the reader take acks in
                await c.flush()
                continue
            else:  # no coroutine per message: flush() is the stream's drain, a bare yield
                await c.flush()
            sent += 1
            if not sent & 1023 and now() > stop:
                break
        await c.flush()
        t_pub = now()
        f = c.session.flights
        while f.count and c.is_connected() and now() < stop + 10:
            await asyncio.sleep_ms(1)
        result(sent=sent, t0=t0, t_pub=t_pub, t_done=now(), pending=f.count)
        await c.disconnect()

    asyncio.run(main())


# ------------------------------------------------------------------------------------------ umqtt.simple

def umqtt(mode, qos, n, port, cap, window, payload, topic, nodelay=False):
    from umqtt.simple import MQTTClient
    if qos == 2:
        print("UNSUPPORTED umqtt.simple has no QoS 2")
        return
    c = MQTTClient(cid("umqtt"), HOST, port)
    c.connect()
    if nodelay:
        c.sock.setsockopt(6, 1, 1)  # IPPROTO_TCP, TCP_NODELAY
    if mode == "alloc":
        return umqtt_alloc(c, topic, payload)
    t0 = ready()
    stop = t0 + cap
    sent = 0
    while sent < n:
        c.publish(topic, payload, qos=qos)  # QoS 1: returns once its PUBACK came
        sent += 1
        if not sent & 15 and now() > stop:
            break
    t = now()
    result(sent=sent, t0=t0, t_pub=t, t_done=t, pending=0)
    c.disconnect()


def per_call(fn, n=200, warm=20):
    import gc
    for _ in range(warm):
        fn()
    gc.collect()
    gc.disable()
    a = gc.mem_alloc()
    for _ in range(n):
        fn()
    b = gc.mem_alloc()
    gc.enable()
    return (b - a) / n


def umqtt_alloc(c, topic, payload):
    """umqtt.simple through its public API: publish(), and wait_msg() with a callback for a message it
    receives from its own subscription (its publish of it measured apart and taken off)."""
    got = [0]

    def on_message(t, m):
        got[0] += 1

    c.set_callback(on_message)
    rtopic = topic + "/rx"
    c.subscribe(rtopic, qos=1)
    out = {}
    for q in (0, 1):
        out["pub q%d" % q] = per_call(lambda: c.publish(topic, payload, qos=q))

        def rx():
            n = got[0]
            c.publish(rtopic, payload, qos=q)  # at QoS 1 it may take the message in while it waits for the PUBACK
            while got[0] == n:
                c.wait_msg()

        out["rx q%d" % q] = per_call(rx) - out["pub q%d" % q]
    out["received"] = got[0]
    print("RESULT " + json.dumps(out))
    c.disconnect()


# ------------------------------------------------------------------------------------------ mqtt_as

def mqtt_as(mode, qos, n, port, cap, window, payload, topic):
    import asyncio
    from mqtt_as import MQTTClient, config
    if qos == 2:
        print("UNSUPPORTED mqtt_as has no QoS 2")
        return
    config["server"], config["port"], config["client_id"] = HOST, port, cid("mqtt_as")

    async def main():
        c = MQTTClient(config)
        await c.connect(quick=True)
        t0 = ready()
        stop = t0 + cap
        sent = 0
        while sent < n:
            await c.publish(topic, payload, qos=qos)  # QoS 1: returns once its PUBACK came (polled every 100 ms)
            sent += 1
            if not sent & 15 and now() > stop:
                break
        t = now()
        result(sent=sent, t0=t0, t_pub=t, t_done=t, pending=0)
        await c.disconnect()

    asyncio.run(main())


CLIENTS = {"mp-raw": raw, "mp-tinymqtt": tinymqtt, "mp-tinymqtt-aio": tinymqtt_aio,
           "mp-tinymqtt-aio-nowait": lambda *a: tinymqtt_aio(*a, nowait=True), "mp-umqtt": umqtt,
           "mp-umqtt-nodelay": lambda *a: umqtt(*a, nodelay=True), "mp-mqtt_as": mqtt_as}


def main(argv):
    client, mode, qos, n, port, cap, window, plen, topic = argv
    CLIENTS[client](mode, int(qos), int(n), int(port), float(cap), int(window), b"x" * int(plen), topic)


main(sys.argv[1:])
