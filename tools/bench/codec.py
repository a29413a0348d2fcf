# Sections 4 and 5 on CPython: bytes on the wire per publish (measured through a counting TCP proxy in front
# of the bench's mosquitto, checked against the encoder's exact sizes), and codec / session speed per packet.
import os
import sys
import time

from tools.bench.workers import ROOT

WIRE_TOPIC = "fleet/site-042/device-00017/telemetry/temperature"
WIRE_PAYLOAD = b"21.5"


def _path():
    for p in (os.path.join(ROOT, "host"), os.path.join(ROOT, "ports", "linux"), os.path.join(ROOT, "lib")):
        if p not in sys.path:
            sys.path.insert(0, p)


def speed(min_time=0.2):
    """{name: microseconds per call} for the cases in tools/bench/cycles.py, best of 3 timed loops."""
    _path()
    from tools.bench.cycles import codec_cases
    out = {}
    for name, fn in codec_cases():
        n = 1000
        while True:
            t = time.perf_counter()
            for _ in range(n):
                fn(0)
            dt = time.perf_counter() - t
            if dt >= min_time / 3:
                break
            n *= 2
        best = dt
        for _ in range(2):
            t = time.perf_counter()
            for _ in range(n):
                fn(0)
            best = min(best, time.perf_counter() - t)
        out[name] = best / n * 1e6
    return out


def _settle(px, timeout=2.0):
    # The proxy forwards on its own thread: wait until its counters stop moving.
    last, t = (px.up, px.down), time.monotonic()
    end = t + timeout
    while time.monotonic() < end:
        time.sleep(0.05)
        now = (px.up, px.down)
        if now == last:
            return now
        last = now
    return last


def wire(broker, count=100):
    """Bytes per message each way, as the proxy counted them, for 3.1.1 and 5.0 with and without topic
    aliases, QoS 0/1/2, after one warm-up publish (which sets the alias). Returns rows of dicts."""
    _path()
    from tests.support.proxy import Proxy
    from tinymqtt.client import Client
    from tinymqtt.packets import encode_publish
    from tools.bench.broker import Counter
    rows = []
    # A subscriber on the topic, as in real use: with none, a 5.0 server acks with 0x10 "no matching
    # subscribers", a byte longer than the plain ack.
    counter = Counter(broker.port, WIRE_TOPIC, 0)
    time.sleep(0.2)
    with Proxy(broker.host, broker.port) as px:
        for label, version, aliases in (("MQTT 3.1.1", 4, 0), ("MQTT 5.0", 5, 0), ("MQTT 5.0 + topic alias", 5, 16)):
            for qos in (0, 1, 2):
                c = Client(px.host, px.port, reconnect=False, batch=False, client_id="bench-wire-%d" % os.getpid(),
                           version=version, max_inflight=count + 1,
                           **({"send_alias_maximum": aliases} if version == 5 else {}))
                c.connect()
                alias_max = c.session.aliases.max if version == 5 else 0
                c.wait_for(c.publish(WIRE_TOPIC, WIRE_PAYLOAD, qos) or 0, 5)
                up0, down0 = _settle(px)
                for _ in range(count):
                    c.publish(WIRE_TOPIC, WIRE_PAYLOAD, qos)
                while c.session.flights.count and c.is_connected():
                    c.loop(0.2)
                up1, down1 = _settle(px)
                c.disconnect()
                buf = bytearray(256)
                first = encode_publish(buf, version, WIRE_TOPIC.encode(), WIRE_PAYLOAD, qos, False, False,
                                       1 if qos else 0, None, 1 if alias_max else 0)
                rows.append({"proto": label, "qos": qos, "up": (up1 - up0) / count, "down": (down1 - down0) / count,
                             "first_publish": first, "alias_max": alias_max})
    counter.close()
    return rows
