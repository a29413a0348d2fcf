# One publisher per process, so no client shares a GIL with the counter or with another client:
#   python -m tools.bench.workers CLIENT MODE QOS N PORT CAP_S WINDOW PAYLOAD_LEN TOPIC
# CLIENT: tinymqtt | tinymqtt-aio | paho | minimqtt | raw;  MODE: tput | lat.
# It connects, prints READY, waits for GO on stdin, then
#   tput: publishes N messages (fewer when CAP_S seconds pass first) as fast as the client allows and waits
#         until every QoS 1/2 flow is complete;
#   lat:  publishes one message at a time and waits for its flow to complete (QoS 1: PUBACK, QoS 2: PUBCOMP),
#         N times or for CAP_S seconds,
# and prints one line: RESULT {json}. Times are time.monotonic(), which every process on the machine shares.
import json
import os
import re
import socket
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HOST = "127.0.0.1"
_CPU0 = [0.0]


def _ready():
    sys.stdout.write("READY\n")
    sys.stdout.flush()
    line = sys.stdin.readline()
    if line.strip() != "GO":
        raise SystemExit("no GO")
    _CPU0[0] = time.process_time()
    return time.monotonic()


def _result(**kw):
    kw["cpu"] = time.process_time() - _CPU0[0]  # CPU seconds of this process (every thread) since GO
    sys.stdout.write("RESULT " + json.dumps(kw) + "\n")
    sys.stdout.flush()


def _cid(name):
    return "bench-%s-%d" % (name, os.getpid())


# ------------------------------------------------------------------------------------------ tinymqtt

def _tinymqtt_path():
    # TINYMQTT_BENCH_LIB: another lib/ folder to measure (an A/B comparison of two versions of the library).
    lib = os.environ.get("TINYMQTT_BENCH_LIB") or os.path.join(ROOT, "lib")
    for p in (os.path.join(ROOT, "ports", "linux"), lib):
        if p not in sys.path:
            sys.path.insert(0, p)


def tinymqtt_blocking(mode, qos, n, port, cap, window, payload, topic):
    _tinymqtt_path()
    from tinymqtt.client import Client
    c = Client(HOST, port, reconnect=False, batch=(mode == "tput"), client_id=_cid("tiny"), version=4,
               max_inflight=window, out_size=65536, max_packet_size=65536)
    c.connect()
    t0 = _ready()
    stop = t0 + cap
    sent = 0
    if mode == "tput":
        pub = c.publish
        mono = time.monotonic
        while sent < n:
            pub(topic, payload, qos)
            sent += 1
            if not sent & 1023 and mono() > stop:
                break
        c.flush()
        t_pub = time.monotonic()
        f = c.session.flights
        while f.count and c.is_connected() and time.monotonic() < stop + 10:
            c.loop(0.5)
        t_done = time.monotonic()
        _result(sent=sent, t0=t0, t_pub=t_pub, t_done=t_done, pending=f.count)
    else:
        lat = []
        while len(lat) < n and time.monotonic() < stop:
            a = time.perf_counter()
            pid = c.publish(topic, payload, qos)
            c.wait_for(pid, 5.0)
            lat.append(time.perf_counter() - a)
        _result(lat=lat)
    c.disconnect()


def tinymqtt_aio(mode, qos, n, port, cap, window, payload, topic):
    _tinymqtt_path()
    import asyncio
    from tinymqtt.aio import AsyncClient

    async def main():
        c = AsyncClient(HOST, port, reconnect=False, client_id=_cid("aio"), version=4, max_inflight=window,
                        out_size=65536, max_packet_size=65536)
        await c.connect()
        t0 = await asyncio.get_running_loop().run_in_executor(None, _ready)
        stop = t0 + cap
        sent = 0
        if mode == "tput":
            pub = c.publish
            mono = time.monotonic
            while sent < n:
                await pub(topic, payload, qos, wait=False)
                sent += 1
                if not sent & 1023 and mono() > stop:
                    break
            await c.flush()
            t_pub = time.monotonic()
            f = c.session.flights
            while f.count and c.is_connected() and time.monotonic() < stop + 10:
                await asyncio.sleep(0.001)
            t_done = time.monotonic()
            _result(sent=sent, t0=t0, t_pub=t_pub, t_done=t_done, pending=f.count)
        else:
            lat = []
            while len(lat) < n and time.monotonic() < stop:
                a = time.perf_counter()
                await c.publish(topic, payload, qos)
                lat.append(time.perf_counter() - a)
            _result(lat=lat)
        await c.disconnect()

    asyncio.run(main())


# ------------------------------------------------------------------------------------------ peers

def paho(mode, qos, n, port, cap, window, payload, topic):
    """paho-mqtt 2.x as its docs show it: loop_start()'s network thread, publish() from the main thread (the
    faster of its two ways here: calling loop() from one thread writes each packet with its own send()).
    Like tinymqtt's, its publish waits while `window` QoS 1/2 messages await acks: with more queued, paho
    rescans its whole queue on every ack, and its message ids wrap onto queued messages past 65535."""
    import paho.mqtt.client as mqtt
    c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=_cid("paho"), protocol=mqtt.MQTTv311)
    c.max_inflight_messages_set(window)
    c.max_queued_messages_set(0)
    done = [0]
    cond = threading.Condition()

    def on_publish(client, userdata, mid, rc, props):
        with cond:
            done[0] += 1
            cond.notify()

    c.on_publish = on_publish
    connected = threading.Event()
    c.on_connect = lambda *a: connected.set()
    c.connect(HOST, port, 60)
    c.loop_start()
    if not connected.wait(10):
        raise SystemExit("paho: no CONNACK")
    t0 = _ready()
    stop = t0 + cap
    sent = 0
    if mode == "tput":
        pub = c.publish
        mono = time.monotonic
        while sent < n:
            pub(topic, payload, qos)
            sent += 1
            if qos and sent - done[0] >= window:  # like tinymqtt: publish waits while the window is full
                with cond:
                    while sent - done[0] >= window:
                        cond.wait(1.0)
            if not sent & 1023 and mono() > stop:
                break
        t_pub = time.monotonic()
        with cond:
            while done[0] < sent and time.monotonic() < stop + 10:
                cond.wait(0.5)
        t_done = time.monotonic()
        _result(sent=sent, t0=t0, t_pub=t_pub, t_done=t_done, pending=sent - done[0])
    else:
        lat = []
        while len(lat) < n and time.monotonic() < stop:
            a = time.perf_counter()
            c.publish(topic, payload, qos).wait_for_publish(5.0)
            lat.append(time.perf_counter() - a)
        _result(lat=lat)
    c.disconnect()
    c.loop_stop()


def minimqtt(mode, qos, n, port, cap, window, payload, topic):
    import adafruit_minimqtt.adafruit_minimqtt as MQTT
    if qos > 1:
        raise SystemExit("UNSUPPORTED MiniMQTT has no QoS 2")
    c = MQTT.MQTT(broker=HOST, port=port, socket_pool=socket, is_ssl=False, client_id=_cid("mini"))
    c.connect()
    t0 = _ready()
    stop = t0 + cap
    sent = 0
    if mode == "tput":
        pub = c.publish
        mono = time.monotonic
        while sent < n:
            pub(topic, payload, qos=qos)  # QoS 1 waits for the PUBACK inside publish()
            sent += 1
            if (qos or not sent & 1023) and mono() > stop:
                break
        t_pub = t_done = time.monotonic()
        _result(sent=sent, t0=t0, t_pub=t_pub, t_done=t_done, pending=0)
    else:
        lat = []
        while len(lat) < n and time.monotonic() < stop:
            a = time.perf_counter()
            c.publish(topic, payload, qos=qos)
            lat.append(time.perf_counter() - a)
        _result(lat=lat)
    c.disconnect()


# ------------------------------------------------------------------------------------------ the ceiling

def _str(b):
    return len(b).to_bytes(2, "big") + b


def _vbi(n):
    out = bytearray()
    while True:
        d, n = n & 0x7F, n >> 7
        out.append(d | 0x80 if n else d)
        if not n:
            return bytes(out)


def raw_publish(topic, payload, qos, pid):
    body = _str(topic) + (pid.to_bytes(2, "big") if qos else b"") + payload
    return bytes([0x30 | qos << 1]) + _vbi(len(body)) + body


# Acks come as whole 4-byte records, so matching from the start keeps the alignment: PUBREC (0x50) or PUBCOMP.
_PUBRECS = re.compile(rb"(\x50\x02..)|\x70\x02..", re.S)


def raw(mode, qos, n, port, cap, window, payload, topic):
    """The ceiling: MQTT 3.1.1 PUBLISH packets encoded before the clock starts, written in 64 KiB batches with
    one sendall each, while a reader thread drains the acks (and answers each PUBREC with a PUBREL). At most
    `window` QoS 1/2 messages are unacknowledged, the same window the clients get."""
    if mode != "tput":
        raise SystemExit("UNSUPPORTED the ceiling measures throughput only")
    s = socket.create_connection((HOST, port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    cid = _cid("raw").encode()
    body = _str(b"MQTT") + bytes([4, 2, 0, 60]) + _str(cid)
    s.sendall(bytes([0x10]) + _vbi(len(body)) + body)
    ack = s.recv(4)
    if ack[:2] != b"\x20\x02" or ack[3]:
        raise SystemExit("raw: bad CONNACK %r" % ack)
    tb = topic.encode()
    npid = min(65535, max(window, 1) * 2) if qos else 1
    pkts = [raw_publish(tb, payload, qos, (i % npid) + 1) for i in range(n)]
    plen = len(pkts[0])
    per = max(1, 65536 // plen)
    if qos:
        per = min(per, max(window // 2, 1))
    batches = [b"".join(pkts[i:i + per]) for i in range(0, n, per)]
    del pkts
    acked = [0]
    lock = threading.Condition()

    def reader():
        buf = bytearray(1 << 16)
        mv = memoryview(buf)
        have = 0
        want = n if qos else 0
        while acked[0] < want:
            k = s.recv_into(mv[have:])
            if not k:
                break
            have += k
            end = have - have % 4  # every ack of 3.1.1 is 4 bytes
            if qos == 2:  # in C: keep the PUBRECs (PUBCOMPs counted and dropped), then make each a PUBREL
                recs, matched = _PUBRECS.subn(b"\\1", bytes(mv[:end]))
                got = matched - len(recs) // 4
                if recs:
                    rel = bytearray(recs)
                    rel[0::4] = b"\x62" * (len(rel) // 4)
                    with wlock:
                        s.sendall(rel)
            else:
                got = end // 4
            buf[:have - end] = buf[end:have]
            have -= end
            with lock:
                acked[0] += got
                lock.notify()

    wlock = threading.Lock()
    th = threading.Thread(target=reader, daemon=True)
    th.start()
    t0 = _ready()
    stop = t0 + cap
    sent = 0
    for b in batches:
        k = len(b) // plen
        if qos:
            with lock:
                while sent + k - acked[0] > window:
                    lock.wait(1.0)
        with wlock:
            s.sendall(b)
        sent += k
        if time.monotonic() > stop:
            break
    t_pub = time.monotonic()
    if qos:
        with lock:
            while acked[0] < sent and time.monotonic() < stop + 10:
                lock.wait(0.5)
    t_done = time.monotonic()
    _result(sent=sent, t0=t0, t_pub=t_pub, t_done=t_done, pending=sent - acked[0] if qos else 0)
    s.sendall(b"\xe0\x00")
    s.close()


CLIENTS = {"tinymqtt": tinymqtt_blocking, "tinymqtt-aio": tinymqtt_aio, "paho": paho, "minimqtt": minimqtt,
           "raw": raw}


def main(argv):
    client, mode, qos, n, port, cap, window, plen, topic = argv
    CLIENTS[client](mode, int(qos), int(n), int(port), float(cap), int(window), b"x" * int(plen), topic)


if __name__ == "__main__":
    main(sys.argv[1:])
