# Soak: python -m tools.soak --minutes 10 [--rate 200] [--cut-every 1.5] [--board] [--json FILE]
# The blocking client publishes at a steady rate (QoS 1 and 2 alternating) and receives a feeder's messages (QoS 1
# and 2) through tests/support/faultproxy.py, which cuts its connection every --cut-every seconds (FIN or RST at
# random); a watcher subscribed straight to mosquitto counts what arrives. Every second it samples this process:
# RSS (/proc/self/status), Python's allocated blocks, open fds (/proc/self/fd), the client's in-flight and inbound
# tables. On MicroPython (the simulated board, tools/sim: Node + the npm MicroPython), the Session alone runs the
# same flows and cuts in fast motion for the soak's length and its heap must stay flat. With --board the asyncio
# client runs there too, through the same proxy; its heap is reported, not judged: the simulator's socket bridge
# itself keeps ~64 B per awaited read (a bare `await jsnet.readinto()` loop grows alike; `sleep_ms(0)` does not).
# At the end: every message delivered (both ways), no QoS 2 duplicate on the way out, tables drained, fds back
# to where they started, and memory drift (least-squares slope after a warm-up, and the last quarter's mean
# against the second quarter's) within bounds. Exit status 0 when every check holds.
# tests/test_soak_short.py runs a ~10 s version of this in CI.
import argparse
import array
import json
import os
import random
import shutil
import sys
import threading
import time
import uuid

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for _d in (_REPO, os.path.join(_REPO, "lib"), os.path.join(_REPO, "ports", "linux")):
    if _d not in sys.path:
        sys.path.insert(0, _d)

from tests.support.broker import Mosquitto  # noqa: E402
from tests.support.faultproxy import FaultProxy  # noqa: E402
from tinymqtt.client import Client  # noqa: E402

BACKOFF = dict(backoff_min_ms=20, backoff_max_ms=200)
PERSIST = dict(version=5, session_expiry=600, clean=False)  # Clean Start 0: see tests/test_faults.py

# The MicroPython side (runs on the simulated board): publishes RATE msgs/s, receives PREFIX/bdown, and prints
# HEAP <ms> <gc.mem_alloc after collect> <in flight> <inbound open> <inbound table size> <received> <published>.
BOARD_APP = r'''
import asyncio, gc, time
import config
from tinymqtt.aio import AsyncClient


async def main():
    c = AsyncClient(config.BROKER_HOST, config.BROKER_PORT, client_id=config.CLIENT_ID, version=5, clean=False,
                    session_expiry=600, keepalive=5, backoff_min_ms=20, backoff_max_ms=200, max_packet_size=1024,
                    max_inflight=8, receive_maximum=8)
    got = [0]

    def on(m):
        got[0] += 1

    await c.connect()
    await c.subscribe(config.PREFIX + "bdown", 2, handler=on)
    print("READY")
    t0 = time.ticks_ms()
    end = time.ticks_add(t0, config.SECONDS * 1000)
    period = 1000 // config.RATE
    nxt = sample = t0
    i = 0
    topic = config.PREFIX + "bup"
    while time.ticks_diff(end, time.ticks_ms()) > 0:
        now = time.ticks_ms()
        if time.ticks_diff(now, nxt) >= 0:
            if c.publish_nowait(topic, b"%d-%08d" % (1 + i % 2, i), 1 + i % 2) >= 0:
                i += 1
                nxt = time.ticks_add(nxt, period)
            if c.is_connected():
                try:
                    await c.flush()
                except OSError:
                    pass
        if time.ticks_diff(now, sample) >= 0:
            m = 1 << 30
            for _ in range(3):  # this MicroPython frees only after the JS event loop ran: the least reading
                await asyncio.sleep_ms(2)
                gc.collect()
                m = min(m, gc.mem_alloc())
            s = c.session
            print("HEAP", time.ticks_diff(now, t0), m, s.flights.count, len(s._rx_pid), len(s._rx_pid), got[0], i)
            sample = time.ticks_add(sample, 1000)
        await asyncio.sleep_ms(max(1, min(period, 20)))
    for _ in range(3000):
        if not c.session.flights.count and c.is_connected():
            break
        await asyncio.sleep_ms(10)
    gc.collect()
    print("DONE", gc.mem_alloc(), c.session.flights.count, got[0], i)
    await asyncio.sleep_ms(int(config.LINGER * 1000))
    await c.disconnect()


asyncio.run(main())
'''


# The session alone under real MicroPython on the simulated board (no network), as a long run in fast motion:
# QoS 1/2 flows both ways, then a cut with half a packet read, a reconnect resuming the session and the DUP resend
# acked, cycle after cycle. This WebAssembly MicroPython reclaims memory only once control went back to the JS event
# loop, and not at every collection: a sample is the least of a few `await sleep_ms(); gc.collect()` readings.
MP_SESSION_SOAK = r'''
import asyncio, gc
from tinymqtt.session5 import Session5
from tinymqtt.packets import encode_publish
import config
CYCLES, PER, SAMPLE = config.CYCLES, config.PER, config.SAMPLE
got = [0]


def on_msg(m):
    got[0] += 1


s = Session5(client_id="mp", version=5, session_expiry=600, clean=False, keepalive=30, max_packet_size=1024,
            max_inflight=8, receive_maximum=8)
s.subscribe([("in/#", 2)], handler=on_msg)
TOPIC, INTOPIC, PAY = b"out/t", b"in/x", b"0123456789abcdef"
pkt = bytearray(64)


def feed(data):
    n = len(data)
    s.inbuf[s.inlen:s.inlen + n] = data
    while s.received(n, 0):
        s.outlen = 0
        s.pump()
        n = 0
    s.outlen = 0
    s.pump()
    s.outlen = 0


def ack(t, pid):
    feed(bytes([t, 2, pid >> 8, pid & 255]))


def cycle(ipid):
    for k in range(PER):
        q = 1 + (k & 1)
        pid = s.publish(TOPIC, PAY, q)
        s.outlen = 0
        if q == 1:
            ack(0x40, pid)
        else:
            ack(0x50, pid)
            ack(0x70, pid)
        ipid = ipid % 60000 + 1
        feed(bytes(pkt[:encode_publish(pkt, 5, INTOPIC, PAY, q, False, False, ipid)]))
        if q == 2:
            ack(0x62, ipid)
    pid = s.publish(TOPIC, PAY, 1)  # in flight when the link dies
    s.outlen = 0
    encode_publish(pkt, 5, INTOPIC, PAY, 1, False, False, 1)
    s.inbuf[s.inlen:s.inlen + 5] = pkt[:5]  # half a packet read
    s.received(5, 0)
    s.connection_lost()
    s.connect(0)
    s.outlen = 0
    feed(b"\x20\x03\x01\x00\x00")  # session present: the DUP resend goes out, then its PUBACK
    ack(0x40, pid)
    return ipid


async def heap():
    m = 1 << 30
    for _ in range(4):
        await asyncio.sleep_ms(5)
        gc.collect()
        m = min(m, gc.mem_alloc())
    return m


async def main():
    s.connect(0)
    s.outlen = 0
    feed(b"\x20\x03\x00\x00\x00")
    for i in range(s.flights.size):  # the SUBSCRIBEs' packet ids (CONTROL slots)
        if s.flights.state[i] == 8:  # CONTROL (tinymqtt/inflight.py)
            pid = s.flights.pid[i]
            feed(bytes([0x90, 4, pid >> 8, pid & 255, 0, 2]))
    ipid = 0
    for c in range(CYCLES + 1):
        if c % SAMPLE == 0:
            print("HEAP", c, await heap(), s.flights.count, len(s._rx_pid), len(s._rx_pid), got[0])
        ipid = cycle(ipid)
        await asyncio.sleep_ms(0)
    print("DONE", s.flights.count, len(s._rx_pid), got[0])


asyncio.run(main())
'''


def micropython_session_soak(cycles=300, per=20, sample=10, timeout=300):
    """Runs MP_SESSION_SOAK on the simulated board; returns ([(cycle, heap bytes, in flight, inbound open,
    inbound table size, received)], the DONE line's values). Needs node and the npm MicroPython (tools/sim)."""
    import tools.sim
    r = tools.sim.run_app(MP_SESSION_SOAK, env=dict(CYCLES=cycles, PER=per, SAMPLE=sample), timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError("MicroPython session soak failed:\n%s\n%s" % (r.stdout[-2000:], r.stderr[-2000:]))
    heap = [tuple(int(x) for x in line.split()[1:]) for line in r.stdout.splitlines() if line.startswith("HEAP")]
    done = [int(x) for x in r.stdout.split("DONE")[1].split()] if "DONE" in r.stdout else None
    return heap, done


def rss_kb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def fds():
    return len(os.listdir("/proc/self/fd"))


def slope_per_min(points):
    """Least-squares slope of (seconds, value) points, per minute."""
    n = len(points)
    if n < 3:
        return 0.0
    mx = sum(t for t, _ in points) / n
    my = sum(v for _, v in points) / n
    sxx = sum((t - mx) ** 2 for t, _ in points)
    return 60 * sum((t - mx) * (v - my) for t, v in points) / sxx if sxx else 0.0


def drift(points):
    """(slope per minute after the first quarter, last quarter's mean - second quarter's mean)."""
    n = len(points)
    q = max(n // 4, 1)
    warm = points[q:]
    second, last = points[q:2 * q], points[-q:]

    def mean(p):
        return sum(v for _, v in p) / len(p) if p else 0.0
    return slope_per_min(warm), mean(last) - mean(second)


class Counter:
    """Deliveries per message number, preallocated (growing it would show up as drift)."""

    def __init__(self, n):
        self.q = {1: bytearray(n), 2: bytearray(n)}
        self.bad = 0

    def add(self, payload):
        try:
            q, i = int(payload[0:1]), int(payload[2:])
            a = self.q[q]
            a[i] = min(a[i] + 1, 255)
        except (ValueError, KeyError, IndexError):
            self.bad += 1

    def missing(self, q, n):
        a = self.q[q]
        return sum(1 for i in range(q - 1, n, 2) if not a[i])

    def dups(self, q, n):
        a = self.q[q]
        return sum(a[i] - 1 for i in range(q - 1, n, 2) if a[i] > 1)


def _loop_thread(client, stop, body=None):
    def run():
        try:
            while not stop.is_set():
                if body:
                    body()
                client.loop(0.02)
        except BaseException as e:  # reported at the end
            client.thread_error = e
    client.thread_error = None
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def soak(seconds=60.0, rate=200, cut_every=1.5, board=False, board_rate=20, sample_every=1.0, seed=1, log=print,
         drain_seconds=60.0, micropython=None):
    """Runs the soak; returns a dict of figures and `failures` (an empty list when every check held)."""
    rng = random.Random(seed)
    if micropython is None:
        from tests.support.micropython import available
        micropython = available()
    fd0 = fds()
    prefix = "soak/%s/" % uuid.uuid4().hex[:8]
    total = int(seconds * rate) + 10
    fed_total = int(seconds * rate / 2) + 10
    up, down = Counter(total), Counter(fed_total)
    stop = threading.Event()
    board_samples, failures = [], []
    # Samples go into preallocated columns (a growing list would be the soak's own drift):
    # seconds, RSS kB, Python blocks, fds, in flight, inbound open, inbound table size.
    cols = [array.array("d", bytes(8 * (int(seconds / sample_every) + 16))) for _ in range(7)]
    nsamples = [0]

    def sample(el):
        k = nsamples[0]
        if k < len(cols[0]):
            s = c.session
            for col, v in zip(cols, (el, rss_kb(), sys.getallocatedblocks(), fds(), s.flights.count, len(s._rx_pid),
                                     len(s._rx_pid))):
                col[k] = v
            nsamples[0] = k + 1
    mp = {}
    mp_thread = None
    if micropython:
        def run_mp():
            try:
                mp["heap"], mp["done"] = micropython_session_soak(cycles=max(100, int(seconds * 10)))
            except Exception as e:  # reported as a failure
                mp["error"] = e
        mp_thread = threading.Thread(target=run_mp, daemon=True)
        mp_thread.start()
    br = Mosquitto().start()
    px = FaultProxy(br.host, br.port, seed=seed)
    b = None
    try:
        w = Client(br.host, br.port, client_id="sw" + uuid.uuid4().hex[:8], receive_maximum=256, keepalive=5,
                   **BACKOFF, **PERSIST)
        w.on_message = lambda m: up.add(bytes(m.payload))
        w.connect()
        w.subscribe(prefix + "up", 2)
        c = Client(px.host, px.port, client_id="sc" + uuid.uuid4().hex[:8], max_inflight=32, receive_maximum=32,
                   keepalive=5, **BACKOFF, **PERSIST)
        c.on_message = lambda m: down.add(bytes(m.payload))
        lost = []
        c.on_event = lambda ev, value, reason: lost.append(value) if ev == 16 else None
        c.connect()
        c.subscribe(prefix + "down", 2)
        if board:
            import tools.sim
            b = tools.sim.start_app(BOARD_APP, env=dict(BROKER_HOST=px.host, BROKER_PORT=px.port, PREFIX=prefix,
                                                        SECONDS=int(seconds), RATE=board_rate, LINGER=1.0))
            b.expect("READY", 20)
        feeder = Client(br.host, br.port, client_id="sf" + uuid.uuid4().hex[:8], max_inflight=64, keepalive=5,
                        **BACKOFF, **PERSIST)
        feeder.connect()
        fed = [0]
        t_start = time.monotonic()

        def feed():
            due = int((time.monotonic() - t_start) * rate / 2)
            while fed[0] < min(due, fed_total - 10) and not stop.is_set():
                i = fed[0]
                if feeder.publish(prefix + "down", b"%d-%08d" % (1 + i % 2, i), 1 + i % 2) < 0:
                    break
                if board:
                    feeder.publish(prefix + "bdown", b"%d-%08d" % (1 + i % 2, i), 1 + i % 2)
                fed[0] += 1

        threads = [_loop_thread(w, stop), _loop_thread(feeder, stop, feed)]
        sent, next_cut, next_sample = 0, t_start + cut_every, t_start
        cuts = 0
        log("soak: %.0f s, %d msgs/s out, %d msgs/s in, a cut every %.1f s%s" % (
            seconds, rate, rate // 2, cut_every, ", MicroPython board too" if board else ""))
        while True:
            now = time.monotonic()
            el = now - t_start
            if el >= seconds:
                break
            while sent < min(int(el * rate), total - 10):
                c.publish(prefix + "up", b"%d-%08d" % (1 + sent % 2, sent), 1 + sent % 2)
                sent += 1
            if now >= next_cut:
                px.cut_all(reset=rng.random() < 0.3)
                cuts += 1
                next_cut = now + cut_every * rng.uniform(0.7, 1.3)
            if now >= next_sample:
                px.clear_logs()
                sample(el)
                next_sample += sample_every
            if b:
                line = b.line("HEAP")
                while line:
                    board_samples.append([int(x) for x in line.split()[1:]])
                    line = b.line("HEAP")
            c.loop(0.005)
        # Drain: no more cuts; every flow completes and everything arrives.
        end = time.monotonic() + drain_seconds
        while time.monotonic() < end:
            c.loop(0.02)
            if (not c.session.flights.count and not len(c.session._rx_pid) and not up.missing(1, sent)
                    and not up.missing(2, sent) and fed[0] >= min(int(seconds * rate / 2), fed_total - 10)
                    and not feeder.session.flights.count and not down.missing(1, fed[0])
                    and not down.missing(2, fed[0])):
                break
        s = c.session
        sample(time.monotonic() - t_start)
        board_done = None
        if b:
            got = b.expect("DONE", 60)
            board_done = [int(x) for x in got.split()]
            line = b.line("HEAP")
            while line:
                board_samples.append([int(x) for x in line.split()[1:]])
                line = b.line("HEAP")
        stop.set()
        for t in threads:
            t.join(5)
        for x in (w, feeder):
            if x.thread_error:
                failures.append("a helper client failed: %r" % x.thread_error)
        res = {
            "seconds": round(time.monotonic() - t_start, 1), "published": sent, "received_from_feeder": fed[0],
            "cuts": cuts, "connections": px.accepted,
            "out_lost": up.missing(1, sent) + up.missing(2, sent), "out_qos2_dups": up.dups(2, sent),
            "out_qos1_dups": up.dups(1, sent),
            "in_lost": down.missing(1, fed[0]) + down.missing(2, fed[0]), "in_qos2_dups": down.dups(2, fed[0]),
            "lost_events": len(lost), "in_flight_end": s.flights.count, "inbound_open_end": len(s._rx_pid),
            "in_flight_max": int(max(cols[4][:nsamples[0]])), "inbound_table_max": int(max(cols[6][:nsamples[0]])),
        }
        c.disconnect()
        w.disconnect()
        feeder.disconnect()
        if b:
            b.wait(15)
    finally:
        stop.set()
        if b:
            b.close()
        px.close()
        br.close()
    time.sleep(0.2)  # let the proxy's threads close their sockets
    samples = [tuple(col[k] for col in cols) for k in range(nsamples[0])]
    res["fds_start"], res["fds_end"] = fd0, fds()
    pts = [(x[0], x[1]) for x in samples]
    res["rss_kb_first"], res["rss_kb_last"] = samples[0][1], samples[-1][1]
    res["rss_kb_slope_per_min"], res["rss_kb_drift"] = [round(v, 1) for v in drift(pts)]
    res["blocks_slope_per_min"], res["blocks_drift"] = [round(v, 1) for v in drift([(x[0], x[2]) for x in samples])]
    res["fds_max_first_half"] = max(x[3] for x in samples[:len(samples) // 2 or 1])
    res["fds_max_second_half"] = max(x[3] for x in samples[len(samples) // 2:])
    if board_samples:
        bp = [(x[0] / 1000, x[1]) for x in board_samples]
        res["board_heap_first"], res["board_heap_last"] = board_samples[0][1], board_samples[-1][1]
        res["board_heap_slope_per_min"], res["board_heap_drift"] = [round(v, 1) for v in drift(bp)]
        res["board_in_flight_max"] = max(x[2] for x in board_samples)
        res["board_inbound_table_max"] = max(x[4] for x in board_samples)
        res["board_done"] = board_done  # [heap, in flight, received, published]
    if mp_thread:
        mp_thread.join(600)
        if "error" in mp or "heap" not in mp:
            failures.append("MicroPython session soak: %r" % mp.get("error", "no result"))
        else:
            h = mp["heap"]
            res["mp_cycles"] = h[-1][0]
            res["mp_messages_each_way"] = mp["done"][2] if mp["done"] else 0
            res["mp_heap_first"], res["mp_heap_last"] = h[0][1], h[-1][1]
            res["mp_heap_max_after_warmup"] = max(x[1] for x in h[1:]) if len(h) > 1 else h[0][1]
            res["mp_heap_drift"] = res["mp_heap_last"] - h[min(1, len(h) - 1)][1]
            res["mp_done"] = mp["done"]
            res["mp_samples"] = h
    failures += check(res, board)
    res["failures"] = failures
    res["samples"] = samples
    res["board_samples"] = board_samples
    return res


def check(r, board, rss_kb=4096, blocks=20000, mp_heap=1024):
    """Every check the soak asserts (generous bounds: a trend, not noise). Returns the failures."""
    out = []

    def need(ok, what):
        if not ok:
            out.append(what)
    need(r["out_lost"] == 0, "%d published messages never reached the watcher" % r["out_lost"])
    need(r["out_qos2_dups"] == 0, "%d QoS 2 duplicates on the way out" % r["out_qos2_dups"])
    need(r["in_lost"] == 0, "%d of the feeder's messages never arrived" % r["in_lost"])
    need(r["lost_events"] == 0, "%d LOST events" % r["lost_events"])
    need(r["in_flight_end"] == 0 and r["inbound_open_end"] == 0, "tables not drained at the end")
    need(r["fds_end"] <= r["fds_start"], "fd leak: %d open at the start, %d at the end" % (r["fds_start"], r["fds_end"]))
    need(r["fds_max_second_half"] <= r["fds_max_first_half"] + 4, "fds grow: %d -> %d" % (
        r["fds_max_first_half"], r["fds_max_second_half"]))
    need(r["rss_kb_drift"] < rss_kb, "RSS grew %.0f kB" % r["rss_kb_drift"])
    need(r["blocks_drift"] < blocks, "Python heap grew %d blocks" % r["blocks_drift"])
    need(r["cuts"] >= 3, "only %d cuts" % r["cuts"])
    if "mp_heap_drift" in r:
        need(r["mp_heap_drift"] < mp_heap and r["mp_heap_max_after_warmup"] - r["mp_heap_first"] < mp_heap,
             "MicroPython session heap grew: %r" % [x[1] for x in r["mp_samples"]][:20])
        need(r["mp_done"] and r["mp_done"][:2] == [0, 0], "MicroPython session tables not drained: %r" % r["mp_done"])
    if board:
        need("board_heap_drift" in r, "no heap figures from the board")
        need(r.get("board_done") and r["board_done"][1] == 0, "the board's flows did not complete: %r" %
             r.get("board_done"))
    return out


def summary(r):
    lines = ["%(seconds).0f s, %(published)d msgs out and %(received_from_feeder)d in, %(cuts)d cuts "
             "(%(connections)d connections)" % r,
             "lost: %(out_lost)d out, %(in_lost)d in; QoS 2 duplicates: %(out_qos2_dups)d out, %(in_qos2_dups)d in "
             "(in: mosquitto re-sends after PUBREL); QoS 1 duplicates out: %(out_qos1_dups)d" % r,
             "RSS %(rss_kb_first)d -> %(rss_kb_last)d kB (drift %(rss_kb_drift).0f kB, slope %(rss_kb_slope_per_min).0f"
             " kB/min); Python blocks drift %(blocks_drift).0f (slope %(blocks_slope_per_min).0f /min)" % r,
             "fds %(fds_start)d at the start, %(fds_end)d at the end; in flight max %(in_flight_max)d, inbound "
             "table max %(inbound_table_max)d" % r]
    if "mp_heap_drift" in r:
        lines.append("MicroPython Session (simulated board, no network): %(mp_cycles)d cycles, %(mp_messages_each_way)d "
                     "msgs each way, heap %(mp_heap_first)d -> %(mp_heap_last)d B (drift %(mp_heap_drift)d B after the "
                     "first sample)" % r)
    if "board_heap_drift" in r:
        lines.append("board asyncio client (simulator bridge included, not judged): heap %(board_heap_first)d -> "
                     "%(board_heap_last)d B (drift %(board_heap_drift).0f B, slope %(board_heap_slope_per_min).0f "
                     "B/min), in flight max %(board_in_flight_max)d, done %(board_done)s" % r)
    lines.append("checks: " + ("all hold" if not r["failures"] else "FAILED: " + "; ".join(r["failures"])))
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m tools.soak")
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--rate", type=int, default=200, help="messages per second the client publishes")
    ap.add_argument("--cut-every", type=float, default=1.5, help="seconds between cuts (jittered +-30%%)")
    ap.add_argument("--board", action="store_true", help="also run the asyncio client on the simulated board")
    ap.add_argument("--board-rate", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", help="write the figures and samples here")
    a = ap.parse_args(argv)
    if a.board and not shutil.which("node"):
        ap.error("--board needs node (and `npm ci` for the MicroPython package)")
    r = soak(a.minutes * 60, a.rate, a.cut_every, a.board, a.board_rate, seed=a.seed)
    print(summary(r))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(r, f, indent=1)
    return 1 if r["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
