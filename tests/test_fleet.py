# The fleet simulator (tools/fleet) against a real mosquitto, checked by an independent tinymqtt subscriber:
# the manifest says exactly what was sent and acknowledged, QoS 1/2 arrive, QoS 2 once, topic aliases are
# used, the retained status follows connects and deaths (the will, after its delay), cuts through the proxy
# and of the transport end in resumed sessions, rebooted devices come back online with their seq going on.
import asyncio
import collections
import json
import threading
import time
import uuid

import pytest

import tools.fleet  # noqa: F401  (sys.path: lib/ and the Linux port)
from tinymqtt.client import Client
from tools.fleet.proxy import FaultProxy
from tools.fleet.sim import Fleet, FleetConfig, read_manifest, format_summary
from tests.support.broker import Mosquitto
from tests.support.report import record


@pytest.fixture(scope="module")
def mosq():
    with Mosquitto() as b:
        yield b


class Sub:
    """Everything on <prefix>/#, received at QoS 2 by the blocking client in a thread."""

    def __init__(self, broker, prefix):
        self.msgs = []
        self.c = Client(broker.host, broker.port, client_id="sub-" + uuid.uuid4().hex[:8], version=5,
                        receive_maximum=1000, max_packet_size=65536)
        self.c.on_message = lambda p: self.msgs.append((p.topic, bytes(p.payload), p.qos, p.retain))
        self.c.connect()
        self.c.subscribe(prefix + "/#", 2)
        self._stop = False
        self.t = threading.Thread(target=self._loop, daemon=True)
        self.t.start()

    def _loop(self):
        while not self._stop:
            self.c.loop(0.05)

    def stop(self, until=None, timeout=15.0):
        """Stops once until() holds (what the test waits for has arrived), or fails after timeout."""
        deadline = time.monotonic() + timeout
        while until is not None and not until():
            assert time.monotonic() < deadline, "the subscriber did not see what the test waits for"
            time.sleep(0.05)
        self._stop = True
        self.t.join()
        self.c.disconnect()

    def telemetry(self):
        out = collections.Counter()
        for topic, payload, q, _ in self.msgs:
            if topic.endswith("/telemetry"):
                m = json.loads(payload)
                out[(m["device"], m["seq"])] += 1
        return out

    def last_status(self):
        st = {}
        for topic, payload, _, _ in self.msgs:
            if topic.endswith("/status"):
                m = json.loads(payload)
                st[m["device"]] = (m["status"], m["reason"])
        return st


def retained(broker, prefix, devices):
    """The retained status of each device, read by a fresh subscriber until all `devices` have answered."""
    got = {}
    c = Client(broker.host, broker.port, client_id="ret-" + uuid.uuid4().hex[:8], version=5)
    c.on_message = lambda p: got.__setitem__(p.topic, json.loads(bytes(p.payload)))
    c.connect()
    c.subscribe(prefix + "/+/status", 1)
    end = time.monotonic() + 10.0
    while len(got) < devices and time.monotonic() < end:
        c.loop(0.05)
    c.disconnect()
    return {m["device"]: m["status"] for m in got.values()}


def run(cfg):
    fleet = Fleet(cfg)
    sm = asyncio.run(fleet.run())
    return fleet, sm


def prefix():
    return "tf-" + uuid.uuid4().hex[:8]


def test_manifest_matches_what_the_broker_delivered(mosq, tmp_path):
    pre = prefix()
    sub = Sub(mosq, pre)
    cfg = FleetConfig(host=mosq.host, port=mosq.port, devices=20, rate=10, duration=2.0, qos_per="device",
                      prefix=pre, manifest=str(tmp_path / "m.jsonl"), seed=3)
    fleet, sm = run(cfg)
    man = read_manifest(cfg.manifest)
    sub.stop(until=lambda: set(sub.telemetry()) >= {(m["device"], m["seq"]) for m in man})
    assert len(man) == sm.total_sent() == sum(len(d.records) for d in fleet.devices)
    assert 250 <= len(man) <= 420  # 20 devices x 10/s x 2 s, give or take a phase (and a busy machine)
    by_dev = collections.defaultdict(list)
    for m in man:
        by_dev[m["device"]].append(m)
    for d in fleet.devices:
        rows = by_dev[d.id]
        assert [r["seq"] for r in rows] == list(range(1, len(rows) + 1))  # per-device sequence, no gaps
        assert {r["qos"] for r in rows} == {d.qos}  # qos_per="device"
        assert all(r["acked"] == (r["qos"] > 0) for r in rows)  # no faults: every QoS 1/2 acknowledged
        assert all(r["ack_ts"] >= r["sent_ts"] for r in rows if r["acked"])
    assert {m["qos"] for m in man} == {0, 1, 2}
    got = sub.telemetry()
    sent = {(m["device"], m["seq"]): m for m in man}
    assert set(got) == set(sent)  # a local broker, no faults: even QoS 0 arrives
    assert all(got[k] == 1 for k, m in sent.items() if m["qos"] == 2)
    payloads = {}
    for topic, payload, q, _ in sub.msgs:
        if topic.endswith("/telemetry"):
            p = json.loads(payload)
            payloads[(p["device"], p["seq"])] = (p, q)
    for k, m in sent.items():
        p, q = payloads[k]
        assert p["ts"] == m["sent_ts"] and q == m["qos"] and isinstance(p["value"], float)
    assert sm.aliases == 20  # mosquitto granted topic aliases to every device ...
    assert all(d.client.session.aliases.alias.get(d.telemetry.encode()) for d in fleet.devices)  # ... and they used one
    assert set(sub.last_status().values()) == {("online", "connect")}
    assert set(retained(mosq, pre, 20).values()) == {"online"}
    record("fleet: 20 devices x 10 msg/s", "%.0f msgs/s" % sm.msgs_per_s)


def test_cuts_deaths_and_reboots(mosq, tmp_path):
    pre = prefix()
    sub = Sub(mosq, pre)
    cfg = FleetConfig(host=mosq.host, port=mosq.port, devices=40, rate=8, duration=5.0, qos_per="message",
                      prefix=pre, cuts=2, cut_via="mixed", cut_fraction=0.25, deaths=4, will_delay=1,
                      manifest=str(tmp_path / "m.jsonl"), seed=5)
    fleet, sm = run(cfg)
    dead = {d.id for d in fleet.devices if d.dead}
    # the dead devices' wills fire after their 1 s delay: wait for them, not for a guess at how long
    sub.stop(until=lambda: all(sub.last_status().get(d, ("",))[0] == "offline" for d in dead))
    print(format_summary(sm))
    assert sm.cut_events == 2 and sm.cuts >= 15  # 25% of 40 connections, twice (proxy once, transport once)
    assert sm.deaths == 4 and sm.alive_at_end == 36
    assert sm.sessions_resumed >= sm.cuts - 2  # a cut device reconnects into its session
    man = read_manifest(cfg.manifest)
    got = sub.telemetry()
    owed = [m for m in man if m["qos"] and m["acked"]]
    assert len(owed) > 0.9 * sum(1 for m in man if m["qos"])
    missing = [m for m in owed if (m["device"], m["seq"]) not in got]
    assert missing == []  # QoS 1/2 the broker acknowledged all arrive, cuts and deaths notwithstanding
    assert all(got[(m["device"], m["seq"])] == 1 for m in owed if m["qos"] == 2)  # and QoS 2 once
    assert len(dead) == 4
    states = collections.Counter(m["state"] for m in man if m["device"] in dead)
    assert set(states) <= {"acked", "dropped", "sent"}  # what a dead device never got acked is "dropped"
    st = sub.last_status()
    assert {d: st[d] for d in dead} == {d: ("offline", "will") for d in dead}
    assert all(st[d.id] == ("online", "connect") for d in fleet.devices if not d.dead)
    ret = retained(mosq, pre, 40)
    assert sorted(d for d, s in ret.items() if s == "offline") == sorted(dead)
    assert len(ret) == 40


def test_reboot_comes_back_with_a_fresh_session(mosq, tmp_path):
    pre = prefix()
    sub = Sub(mosq, pre)
    cfg = FleetConfig(host=mosq.host, port=mosq.port, devices=6, rate=10, duration=4.0, prefix=pre, deaths=2,
                      reboot_after=1.5, will_delay=0, manifest=str(tmp_path / "m.jsonl"), seed=11)
    fleet, sm = run(cfg)

    def rebooted_online():
        st = [(json.loads(p)["device"], json.loads(p)["status"]) for t, p, _, _ in list(sub.msgs)
              if t.endswith("/status")]
        return all([s for dev, s in st if dev == d.id][-1:] == ["online"] for d in fleet.devices if d.boots == 2)
    sub.stop(until=rebooted_online)
    assert sm.deaths == 2 and sm.reboots == 2 and sm.alive_at_end == 6
    for d in fleet.devices:
        seqs = [r[0] for r in d.records]
        assert seqs == list(range(1, len(seqs) + 1))  # the seq survives the reboot (kept "in flash")
    rebooted = [d for d in fleet.devices if d.boots == 2]
    assert len(rebooted) == 2
    statuses = [(json.loads(p)["device"], json.loads(p)["status"]) for t, p, _, _ in sub.msgs if t.endswith("/status")]
    for d in rebooted:  # online, offline (the will: delay 0), online again
        assert [s for dev, s in statuses if dev == d.id][-3:] == ["online", "offline", "online"]
    assert set(retained(mosq, pre, 6).values()) == {"online"}


def test_proxy_cut_loses_buffered_bytes_and_the_session_resends(mosq):
    async def go():
        proxy = await FaultProxy(mosq.host, mosq.port).start()
        from tinymqtt.aio import AsyncClient
        c = AsyncClient(mosq.host, proxy.port, client_id="px-" + uuid.uuid4().hex[:6], version=5, session_expiry=60,
                        backoff_min_ms=50, backoff_max_ms=200)
        await c.connect()
        assert len(proxy.pairs) == 1
        assert proxy.cut(list(proxy.pairs)) == 1
        rc = await asyncio.wait_for(c.publish("px/t", b"after the cut", qos=1), 10)  # waits for the reconnect
        assert rc in (0, 0x10)
        assert proxy.accepted == 2 and proxy.cut_count == 1
        await c.disconnect()
        await proxy.stop()
    asyncio.run(go())
