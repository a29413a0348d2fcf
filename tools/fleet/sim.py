# The fleet simulator: N devices, each a real tinymqtt AsyncClient (MQTT 5) in one asyncio process, sending
# JSON telemetry {device, seq, ts, value} at QoS 0/1/2 (per device or per message) to <prefix>/<id>/telemetry
# with a topic alias, and a retained status on <prefix>/<id>/status: "online" on every connect, "offline"
# from the will (with a Will Delay, so a short cut does not flap it). Faults: connections cut mid-flow
# (through the simulator's own TCP proxy, or by aborting a device's transport), devices that die (the will
# fires; optionally they reboot later with a fresh session), reconnects resuming the session.
#
# The manifest (JSON lines, one per telemetry message: device, seq, qos, sent_ts, acked, state, ack_ts; state
# is acked / unacked / refused / dropped (the device died first) for QoS 1/2, "sent" for QoS 0) is what the
# audit checks the pipeline against: a QoS 1/2 message counts as owed once the broker acknowledged it
# (PUBACK / PUBCOMP); QoS 0 messages are all counted, as nobody acknowledges them.
import asyncio
import json
import math
import os
import random
import sys
import time
from dataclasses import dataclass, field, asdict

import tools.fleet  # noqa: F401  (sys.path)
from tinymqtt import props as P
from tinymqtt.aio import AsyncClient
from tinymqtt.errors import MQTTError
from tinymqtt.packets import Packet, PUBLISH, PUBACK, PUBREC, PUBCOMP
from tinymqtt.session import LOST

from tools.fleet.proxy import FaultProxy

UNACKED, ACKED, REFUSED, DROPPED = 0, 1, 2, 3
TELEMETRY_PROPS = {P.PAYLOAD_FORMAT_INDICATOR: 1, P.CONTENT_TYPE: "application/json"}


@dataclass
class FleetConfig:
    host: str = "127.0.0.1"
    port: int = 1883
    devices: int = 100
    rate: float = 1.0  # telemetry messages per second per device
    duration: float = 10.0  # seconds of publishing
    qos_mix: tuple = (0.2, 0.4, 0.4)  # weights of QoS 0, 1, 2
    qos_per: str = "device"  # "device": each device has one QoS; "message": each message draws one
    prefix: str = "fleet"
    cuts: int = 0  # connection-cut events, spread over the run
    cut_fraction: float = 0.1  # share of the live connections each cut hits
    cut_via: str = "proxy"  # "proxy" (the simulator's TCP proxy), "transport" (abort the client's), "mixed"
    deaths: int = 0  # devices that die (no DISCONNECT: their will fires)
    reboot_after: float = None  # seconds until a dead device boots again with a fresh session (None: stays dead)
    will_delay: int = 2  # MQTT 5 Will Delay Interval (a reconnect within it cancels the will)
    session_expiry: int = 600
    keepalive: int = 30
    max_inflight: int = 32
    connect_rate: float = 400.0  # new connections per second while the fleet comes up
    drain_timeout: float = 30.0  # after the run: how long to wait for outstanding acks
    final_status: str = "online"  # "online": leave the retained status as is; "offline": publish offline first
    seed: int = 1
    manifest: str = None  # JSON lines written here (and <manifest>.summary.json)
    progress: bool = False  # a progress bar on stderr

    def use_proxy(self):
        return self.cuts > 0 and self.cut_via in ("proxy", "mixed")


@dataclass
class Summary:
    devices: int = 0
    connected: int = 0
    sent: list = field(default_factory=lambda: [0, 0, 0])  # per QoS
    acked: list = field(default_factory=lambda: [0, 0, 0])
    unacked: list = field(default_factory=lambda: [0, 0, 0])
    cuts: int = 0  # connections cut
    cut_events: int = 0
    deaths: int = 0
    reboots: int = 0
    connects: int = 0
    sessions_resumed: int = 0
    lost_sessions: int = 0
    connect_failures: int = 0
    alive_at_end: int = 0
    aliases: int = 0  # devices whose broker granted topic aliases
    publish_seconds: float = 0.0
    wall_seconds: float = 0.0
    msgs_per_s: float = 0.0
    manifest: str = None

    def total_sent(self):
        return sum(self.sent)

    def as_dict(self):
        return asdict(self)


class Device:
    def __init__(self, fleet, idx):
        self.fleet, self.cfg = fleet, fleet.cfg
        self.idx = idx
        self.id = "dev%05d" % idx
        self.rng = random.Random(fleet.cfg.seed * 1000003 + idx)
        self.telemetry = "%s/%s/telemetry" % (self.cfg.prefix, self.id)
        self.status = "%s/%s/status" % (self.cfg.prefix, self.id)
        self.qos = self._draw_qos()
        self.base = 18 + 8 * self.rng.random()
        self.phase = self.rng.random() * 2 * math.pi
        self.seq = 0
        self.conn = 0
        self.boots = 0
        self.records = []  # [seq, qos, sent_ts, state, ack_ts]
        self.pending = {}  # packet id -> record (None for status messages)
        self.client = None
        self.alive = False  # connected once and publishing (False again after death or shutdown)
        self.dead = False  # died (and not rebooted since)
        self.room = asyncio.Event()

    def _draw_qos(self):
        w = self.cfg.qos_mix
        x = self.rng.random() * sum(w)
        for q in range(3):
            x -= w[q]
            if x < 0:
                return q
        return 2

    def _status_payload(self, status, reason):
        return json.dumps({"device": self.id, "status": status, "reason": reason, "ts": time.time(),
                           "conn": self.conn}).encode()

    def _new_client(self, port):
        cfg = self.cfg
        will = Packet(PUBLISH, topic=self.status, payload=self._status_payload("offline", "will"), qos=1,
                      retain=True, props={P.WILL_DELAY_INTERVAL: cfg.will_delay})
        c = AsyncClient(cfg.host, port, client_id=self.id, version=5, keepalive=cfg.keepalive, clean=True,
                        session_expiry=cfg.session_expiry, will=will, send_alias_maximum=2,
                        max_inflight=cfg.max_inflight, max_packet_size=2048, backoff_min_ms=200,
                        backoff_max_ms=2000)
        c.on_connect = self._on_connect
        c.on_event = self._on_event
        return c

    # ---------------------------------------------------------------- session events (sync callbacks)

    def _on_connect(self, connack):
        f = self.fleet
        self.conn += 1
        f.summary.connects += 1
        if connack.session_present:
            f.summary.sessions_resumed += 1
        if self.client.session.version == 5 and self.client.session.aliases.max:
            f.alias_ok.add(self.id)
        pid = self.client.publish_nowait(self.status, self._status_payload("online", "connect"), 1, True)
        if pid > 0:
            self.pending[pid] = None

    def _on_event(self, ev, value, reason):
        if ev == PUBACK or ev == PUBCOMP or (ev == PUBREC and reason >= 0x80):
            rec = self.pending.pop(value, None)
            if rec is not None:
                rec[3] = ACKED if reason < 0x80 else REFUSED
                rec[4] = time.time()
            self.room.set()
        elif ev == LOST:  # the broker's session was gone before it acknowledged this one
            rec = self.pending.pop(value.pid, None)
            if rec is not None:
                rec[3] = DROPPED
            self.fleet.summary.lost_sessions += 1
            self.room.set()

    # ---------------------------------------------------------------- life

    async def boot(self, port):
        """Connects (retrying while the broker or proxy refuses); True once connected."""
        self.client = self._new_client(port)
        self.pending = {}
        self.boots += 1
        delay = 0.1
        for _ in range(20):
            try:
                await self.client.connect(timeout=10)
                self.alive, self.dead = True, False
                return True
            except (OSError, MQTTError):
                self.fleet.summary.connect_failures += 1
                self.client = self._new_client(port)
                await asyncio.sleep(delay * (0.5 + self.rng.random()))
                delay = min(delay * 2, 2.0)
        return False

    def reading(self, t):
        return round(self.base + 2.0 * math.sin(2 * math.pi * t / 60.0 + self.phase) + self.rng.gauss(0, 0.2), 3)

    async def run(self, start, end):
        period = 1.0 / self.cfg.rate
        loop = asyncio.get_running_loop()
        next_t = start + self.rng.random() * period
        while True:
            if not self.alive:
                return
            delay = next_t - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            if not self.alive or loop.time() >= end:
                return
            c = self.client
            s = c.session
            while s.flights.count >= s.flights.size:  # every in-flight slot taken: wait for an ack
                self.room.clear()
                try:
                    await asyncio.wait_for(self.room.wait(), 1.0)
                except asyncio.TimeoutError:
                    pass
                if not self.alive or loop.time() >= end:
                    return
            q = self.qos if self.cfg.qos_per == "device" else self._draw_qos()
            self.seq += 1
            ts = time.time()
            payload = json.dumps({"device": self.id, "seq": self.seq, "ts": ts, "value": self.reading(ts)},
                                 separators=(",", ":")).encode()
            pid = c.publish_nowait(self.telemetry, payload, q, False, TELEMETRY_PROPS)
            rec = [self.seq, q, ts, UNACKED, 0.0]
            self.records.append(rec)
            self.fleet.summary.sent[q] += 1
            if q:
                self.pending[pid] = rec
            try:
                await c.flush()
            except (OSError, MQTTError):  # a cut link: the transport's OSError, or ConnectionLost (an MQTTError)
                pass  # the reader task notices the dead link and reconnects; the message waits in the session
            next_t += period
            now = loop.time()
            if next_t < now - period:  # fell behind (offline, window full): no burst to catch up
                next_t = now

    async def die(self):
        """No DISCONNECT: the transport is aborted and the client dropped. The broker fires the will."""
        self.alive, self.dead = False, True
        self.room.set()
        c = self.client
        if c is not None:
            if c.stream is not None:
                abort_transport(c)
            await c.close()
        for rec in self.pending.values():
            if rec is not None and rec[3] == UNACKED:
                rec[3] = DROPPED  # never acknowledged: the device lost it with its RAM
        self.pending = {}

    async def shutdown(self, final_status):
        if not self.alive:
            return
        c = self.client
        if final_status == "offline" and c.is_connected():
            try:
                await asyncio.wait_for(c.publish(self.status, self._status_payload("offline", "shutdown"), 1, True),
                                       5)
            except (asyncio.TimeoutError, MQTTError, OSError):
                pass
        self.alive = False
        try:
            await asyncio.wait_for(c.disconnect(), 5)  # reason 0: the will is discarded
        except (asyncio.TimeoutError, OSError, MQTTError):
            await c.close()


def abort_transport(c):
    """Cuts a client's link from its own side (RST, buffers lost): the reader task reconnects."""
    st = c.stream
    w = getattr(st, "w", None)
    if w is not None and getattr(w, "transport", None) is not None:
        w.transport.abort()
    elif st is not None:
        st.close()


class Fleet:
    def __init__(self, cfg):
        self.cfg = cfg
        self.rng = random.Random(cfg.seed)
        self.devices = [Device(self, i) for i in range(cfg.devices)]
        self.summary = Summary(devices=cfg.devices, manifest=cfg.manifest)
        self.proxy = None
        self.alias_ok = set()
        self._t_start = self._t_end = 0.0
        self._reboot_tasks = []
        self._bar_t0 = time.time()
        self.publish_start = None  # wall-clock time publishing starts (once the fleet is connected)

    async def run(self):
        cfg, sm = self.cfg, self.summary
        wall0 = time.time()
        loop = asyncio.get_running_loop()
        port = cfg.port
        if cfg.use_proxy():
            self.proxy = await FaultProxy(cfg.host, cfg.port).start()
            port = self.proxy.port
        progress = asyncio.create_task(self._progress()) if cfg.progress else None
        try:
            # Bring the fleet up at connect_rate, then everyone publishes from a common start.
            boots = []
            for i, d in enumerate(self.devices):
                boots.append(asyncio.create_task(d.boot(port)))
                if (i + 1) % max(1, int(cfg.connect_rate / 20)) == 0:
                    await asyncio.sleep(0.05)
            ok = await asyncio.gather(*boots)
            sm.connected = sum(1 for x in ok if x)
            self._t_start = loop.time() + 0.2
            self._t_end = self._t_start + cfg.duration
            t_pub0 = self._bar_t0 = self.publish_start = time.time() + 0.2
            tasks = [asyncio.create_task(d.run(self._t_start, self._t_end)) for d in self.devices if d.alive]
            await self._faults(port)  # every fault falls inside the publishing period
            await asyncio.gather(*tasks, *self._reboot_tasks)
            sm.publish_seconds = round(time.time() - t_pub0, 3)
            await self._drain()
            sm.alive_at_end = sum(1 for d in self.devices if d.alive)
            await asyncio.gather(*(d.shutdown(cfg.final_status) for d in self.devices))
        finally:
            if progress:
                progress.cancel()
                try:
                    await progress
                except asyncio.CancelledError:
                    pass
                self._bar(final=True)
            if self.proxy:
                await self.proxy.stop()
        for d in self.devices:
            for rec in d.records:
                if rec[3] == ACKED:
                    sm.acked[rec[1]] += 1
                elif rec[1]:
                    sm.unacked[rec[1]] += 1
        sm.aliases = len(self.alias_ok)
        sm.wall_seconds = round(time.time() - wall0, 3)
        sm.msgs_per_s = round(sm.total_sent() / sm.publish_seconds, 1) if sm.publish_seconds else 0.0
        if cfg.manifest:
            self.write_manifest(cfg.manifest)
        return sm

    async def _drain(self):
        deadline = time.monotonic() + self.cfg.drain_timeout
        while time.monotonic() < deadline:
            if not any(d.alive and any(r is not None for r in d.pending.values()) for d in self.devices):
                return
            await asyncio.sleep(0.1)

    async def _faults(self, port):
        cfg, loop = self.cfg, asyncio.get_running_loop()
        events = []
        for k in range(cfg.cuts):
            events.append((self._t_start + cfg.duration * (0.15 + 0.7 * (k + 0.5) / cfg.cuts), "cut", k))
        alive = [d for d in self.devices if d.alive]
        victims = self.rng.sample(alive, min(cfg.deaths, len(alive)))
        for d in victims:
            events.append((self._t_start + cfg.duration * (0.1 + 0.6 * self.rng.random()), "die", d))
        events.sort(key=lambda e: e[0])
        for t, kind, arg in events:
            await asyncio.sleep(max(0.0, t - loop.time()))
            if kind == "cut":
                self.summary.cut_events += 1
                via = cfg.cut_via if cfg.cut_via != "mixed" else ("proxy" if arg % 2 == 0 else "transport")
                if via == "proxy" and self.proxy:
                    self.summary.cuts += self.proxy.cut_random(cfg.cut_fraction, self.rng)
                else:
                    live = [d for d in self.devices if d.alive and d.client.stream is not None]
                    for d in self.rng.sample(live, int(round(len(live) * cfg.cut_fraction))):
                        abort_transport(d.client)
                        self.summary.cuts += 1
            else:
                await arg.die()
                self.summary.deaths += 1
                if cfg.reboot_after is not None:
                    self._reboot_tasks.append(asyncio.create_task(self._reboot(arg, port)))

    async def _reboot(self, d, port):
        await asyncio.sleep(self.cfg.reboot_after)
        if asyncio.get_running_loop().time() >= self._t_end:
            return
        if await d.boot(port):  # a fresh session (clean start): the device lost its state with its RAM
            self.summary.reboots += 1
            await d.run(self._t_start, self._t_end)

    # ---------------------------------------------------------------- reporting

    def expected_total(self):
        return int(self.cfg.devices * self.cfg.duration * self.cfg.rate)

    async def _progress(self):
        while True:
            self._bar()
            await asyncio.sleep(0.25 if sys.stderr.isatty() else 5.0)

    def _bar(self, final=False):
        sm = self.summary
        sent, total = sm.total_sent(), max(1, self.expected_total())
        frac = min(1.0, sent / total)
        width = 28
        filled = int(frac * width)
        online = sum(1 for d in self.devices if d.alive and d.client is not None and d.client.is_connected())
        elapsed = max(1e-3, time.time() - self._bar_t0)
        line = "fleet [%s%s] %3d%% %7d/%d msgs %6.0f msg/s  online %d/%d  cuts %d  deaths %d" % (
            "#" * filled, "." * (width - filled), frac * 100, sent, total, sent / elapsed, online, sm.devices,
            sm.cuts, sm.deaths)
        end = "\n" if final or not sys.stderr.isatty() else ""
        sys.stderr.write(("\r" if sys.stderr.isatty() else "") + line + end)
        sys.stderr.flush()

    def write_manifest(self, path):
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with open(path, "w") as f:
            for d in self.devices:
                for seq, q, ts, state, ack_ts in d.records:
                    f.write(json.dumps({"device": d.id, "seq": seq, "qos": q, "sent_ts": ts, "acked": state == ACKED,
                                        "state": ("unacked", "acked", "refused", "dropped")[state] if q else "sent",
                                        "ack_ts": ack_ts or None}, separators=(",", ":")))
                    f.write("\n")
        with open(path + ".summary.json", "w") as f:
            json.dump(self.summary.as_dict(), f, indent=1)


def read_manifest(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def run_fleet(cfg):
    """Runs a fleet to completion in a new event loop; returns its Summary."""
    return asyncio.run(Fleet(cfg).run())


def format_summary(sm):
    rows = [("devices", "%d (%d connected, %d alive at the end)" % (sm.devices, sm.connected, sm.alive_at_end)),
            ("sent QoS 0/1/2", "%d / %d / %d  (total %d)" % (*sm.sent, sm.total_sent())),
            ("acked QoS 1/2", "%d / %d" % (sm.acked[1], sm.acked[2])),
            ("never acked QoS 1/2", "%d / %d" % (sm.unacked[1], sm.unacked[2])),
            ("publish rate", "%.0f msgs/s over %.1f s" % (sm.msgs_per_s, sm.publish_seconds)),
            ("faults", "%d connections cut in %d events, %d deaths, %d reboots" % (sm.cuts, sm.cut_events,
                                                                                  sm.deaths, sm.reboots)),
            ("connects", "%d (%d resumed a session, %d sessions lost)" % (sm.connects, sm.sessions_resumed,
                                                                          sm.lost_sessions)),
            ("topic aliases", "granted to %d devices" % sm.aliases),
            ("wall time", "%.1f s" % sm.wall_seconds)]
    w = max(len(k) for k, _ in rows)
    return "\n".join("  %-*s  %s" % (w, k, v) for k, v in rows)
