# The ESP32 and Pico W ports under real MicroPython 1.27 (the WebAssembly build, tools/sim/run.mjs), as
# deploy builds them (.mpy with each board's mpy-cross flags), over fake `network` modules that behave like
# the documented drivers (tests/fakes/esp32, tests/fakes/picow): WLAN bring-up and its named failures, a
# drop and the rejoin through network_up(); and the asyncio path end to end against
# a real mosquitto through a fake asyncio.open_connection over the simulator's TCP bridge (tests/fakes/
# jsstream.py; the build has no socket module: tests/fakes/socket.py only resolves names), including a WLAN
# drop in the middle, with the heap it takes on 32 bits. Sockets, TLS and the blocking path run on real
# sockets under the unix port instead: tests/test_unix_transport.py, test_unix_aio.py, test_unix_faults.py.
import pytest

from tests.fakes import simboard
from tests.support import report
from tools import boards as boards_mod

pytestmark = pytest.mark.skipif(not simboard.available(), reason="needs node and the npm MicroPython (tools/bootstrap.sh)")

BOARDS = ("esp32", "picow")
WIFI = {"TINYMQTT_WIFI_SSID": "home", "TINYMQTT_WIFI_PASSWORD": "secret"}


@pytest.fixture(scope="module")
def trees(tmp_path_factory):
    """esp32 and picow trees from deploy, with the fake board modules in lib/."""
    out = {}
    for b in BOARDS:
        root = tmp_path_factory.mktemp(b)
        rc, _, err = simboard.deploy(b, "examples/telemetry.py", root, "--set", "HOSTNAME='board1'", env=WIFI)
        assert rc == 0, err
        simboard.add_fakes(root, "socket", "jsstream", board=b)
        out[b] = root
    return out


def run_script(root, name, code, timeout=30):
    (root / name).write_text(PRELUDE + code)
    p = simboard.run(root, name, timeout=timeout)
    assert p.returncode == 0, "MicroPython failed\n--- stdout\n%s\n--- stderr\n%s" % (p.stdout, p.stderr)
    return simboard.results(p.stdout)


PRELUDE = '''
import gc, json, network, config
gc.collect()
BASE = gc.mem_alloc()  # the heap before any tinymqtt module
import tinymqtt_port as port
from tinymqtt_board import WLANError

def result(**kw):
    print("RESULT " + json.dumps(kw))

def reset(**world):
    network.world.__init__()
    network._sta.__init__()
    port.station.joins = 0
    if hasattr(network, "_country"):
        network._country = "XX"
    network.world.air = {"home": "secret"}
    for k in world:
        setattr(network.world, k, world[k])

def attempt(timeout=2000):
    try:
        port.network_up(timeout)
        return None
    except WLANError as e:
        return {"status": e.status, "name": e.name, "msg": str(e), "oserror": isinstance(e, OSError)}
'''

# ------------------------------------------------------------------------------------------ WLAN

WLAN_SCRIPT = '''
scenarios = %r
for name, world, timeout in scenarios:
    reset(**world)
    err = attempt(timeout)
    w = network.WLAN(network.STA_IF)
    info = {"joins": port.station.joins, "log": [list(x) for x in network.world.log], "up": w.isconnected()}
    if hasattr(w, "pm"):
        info["pm"] = w.pm
        info["country_at_start"] = w.country_at_start
    result(scenario=name, err=err, **info)
'''

SCENARIOS = {
    "esp32": [
        ("ok", {}, 2000),
        ("wrong password", {"air": {"home": "nope"}}, 2000),
        ("wrong password, ESP-IDF 5", {"air": {"home": "nope"}, "bad_key_reason": 15}, 2000),
        ("no AP", {"air": {}}, 2000),
        ("connect fail", {"air": {"home": "nope"}, "bad_key_reason": 203}, 2000),
        ("no IP", {"dhcp": False}, 300),
    ],
    "picow": [
        ("ok", {}, 2000),
        ("wrong password", {"air": {"home": "nope"}}, 2000),
        ("no AP", {"air": {}}, 2000),
        ("connect fail", {"fail": True}, 2000),
        ("no IP", {"dhcp": False}, 300),
    ],
}

EXPECTED = {
    ("esp32", "wrong password"): (202, "STAT_WRONG_PASSWORD", "WLAN: wrong password for 'home'"),
    ("esp32", "wrong password, ESP-IDF 5"): (15, "4WAY_HANDSHAKE_TIMEOUT", "WLAN: wrong password for 'home'"),
    ("esp32", "no AP"): (201, "STAT_NO_AP_FOUND", "WLAN: no access point named 'home'"),
    ("esp32", "connect fail"): (203, "STAT_ASSOC_FAIL", "WLAN: could not join 'home'"),
    ("esp32", "no IP"): (1001, "STAT_CONNECTING", "WLAN: no connection to 'home' within 300 ms"),
    ("picow", "wrong password"): (-3, "STAT_WRONG_PASSWORD", "WLAN: wrong password for 'home'"),
    ("picow", "no AP"): (-2, "STAT_NO_AP_FOUND", "WLAN: no access point named 'home'"),
    ("picow", "connect fail"): (-1, "STAT_CONNECT_FAIL", "WLAN: could not join 'home'"),
    ("picow", "no IP"): (2, "LINK_NOIP", "WLAN: joined 'home' but got no IP address (DHCP) within 300 ms"),
}


@pytest.mark.parametrize("board", BOARDS)
def test_wlan_bring_up_and_its_failures_name_the_status(trees, board):
    got = {r["scenario"]: r for r in run_script(trees[board], "wlan.py", WLAN_SCRIPT % (SCENARIOS[board],))}
    assert set(got) == {s[0] for s in SCENARIOS[board]}
    ok = got["ok"]
    assert ok["err"] is None and ok["up"] and ok["joins"] == 1
    for (b, name), (status, sname, msg) in EXPECTED.items():
        if b != board:
            continue
        err = got[name]["err"]
        assert err is not None, "%s: network_up() did not fail" % name
        assert (err["status"], err["name"]) == (status, sname), name
        assert err["msg"].startswith(msg) and ("status %d" % status) in err["msg"], err["msg"]
        assert err["oserror"], "WLANError is an OSError, so the clients back off and retry"
        assert ["disconnect"] in got[name]["log"], "a failed join is stopped"
    log = ok["log"]
    if board == "esp32":
        # The driver's endless retries would hide the reason (status stays STAT_CONNECTING): capped first.
        assert log.index(["config", "reconnects", 3]) < log.index(["connect", "home"])
        assert ["hostname", "board1"] in log
    else:
        assert ok["country_at_start"] == "GB", "the country is set before the radio starts"
        assert log.index(["country", "GB"]) < log.index(["active", True])
        assert ok["pm"] == 0xA11140, "power saving off"
        assert log.index(["config", "pm", 0xA11140]) < log.index(["connect", "home"])


DROP_SCRIPT = '''
reset()
port.network_up(2000)
port.network_up(2000)
result(step="up twice", joins=port.station.joins)
network.drop()
port.network_up(2000)  # ESP32: the driver rejoins by itself; Pico W: network_up() joins again
result(step="drop, AP still there", joins=port.station.joins, up=network.WLAN(network.STA_IF).isconnected())
network.drop()
network.world.air = {}
result(step="drop, AP gone", err=attempt(2000), joins=port.station.joins)
network.world.air = {"home": "secret"}
result(step="AP back", err=attempt(2000), joins=port.station.joins, up=network.WLAN(network.STA_IF).isconnected())
config.WIFI_SSID = None
network.drop()
result(step="no ssid", err=attempt(2000))
'''


@pytest.mark.parametrize("board", BOARDS)
def test_wlan_drop_is_rejoined_by_network_up(trees, board):
    r = {x["step"]: x for x in run_script(trees[board], "drop.py", DROP_SCRIPT)}
    assert r["up twice"]["joins"] == 1, "network_up() returns at once while the link is up"
    assert r["drop, AP still there"]["up"]
    assert r["drop, AP still there"]["joins"] == (1 if board == "esp32" else 2)
    assert r["drop, AP gone"]["err"]["name"] == "STAT_NO_AP_FOUND"
    assert r["AP back"]["err"] is None and r["AP back"]["up"]
    assert r["AP back"]["joins"] == r["drop, AP gone"]["joins"] + 1, "a failed link is joined again"
    assert "config.WIFI_SSID is not set" in r["no ssid"]["err"]["msg"]


# ------------------------------------------------------------------------------------------ asyncio, live

LIVE_SCRIPT = '''
import asyncio, jsstream
jsstream.install()
jsstream.none_every = %(none_every)d
from tinymqtt.aio import AsyncClient
gc.collect()
imported = gc.mem_alloc() - BASE
reset()

async def main():
    got = []
    c = AsyncClient("127.0.0.1", %(port)d, port_impl=port, client_id="%(cid)s", version=5, backoff_min_ms=20,
                    backoff_max_ms=40, **config.SESSION)
    connects = []
    c.on_connect = lambda p: connects.append(1)
    await c.connect()
    await c.subscribe("%(topic)s", 1)
    await c.publish("%(topic)s", b"one", qos=1)
    async for m in c.messages():
        got.append(bytes(m.payload).decode())
        break
    gc.collect()
    connected = gc.mem_alloc() - BASE
    # The WLAN drops and the TCP link dies with it: the client notices, network_up() rejoins, it reconnects.
    network.drop()
    network.world.air = {}
    jsstream.streams[-1].s.close()
    for i in range(100):
        await asyncio.sleep_ms(20)
        if not c.is_connected():
            break
    lost = not c.is_connected()
    await asyncio.sleep_ms(100)
    network.world.air = {"home": "secret"}
    for i in range(200):
        await asyncio.sleep_ms(20)
        if len(connects) == 2 and c.is_connected():
            break
    await c.publish("%(topic)s", b"two", qos=1)
    async for m in c.messages():
        got.append(bytes(m.payload).decode())
        break
    error = str(c.last_error)  # (the WLAN drop's: our own disconnect() below ends with None)
    await c.disconnect()
    result(got=got, connects=len(connects), lost=lost, joins=port.station.joins, error=error,
           opened=[[h, p, s is not None, n] for h, p, s, n in jsstream.log], imported=imported,
           connected=connected)

asyncio.run(main())
'''


@pytest.mark.parametrize("board", BOARDS)
def test_asyncio_path_against_a_real_broker_with_a_wlan_drop(trees, board, broker):
    code = LIVE_SCRIPT % {"port": broker.port, "cid": "bp-" + board, "topic": "bp/%s/echo" % board,
                          "none_every": 3}
    (r,) = run_script(trees[board], "live.py", code, timeout=40)
    assert r["got"] == ["one", "two"]
    assert r["lost"] and r["connects"] == 2, r
    assert r["joins"] >= 2, "the reconnect went through network_up(), which joined the WLAN again"
    assert "connection" in r["error"] or "WLAN" in r["error"]
    assert r["opened"][0] == ["127.0.0.1", broker.port, False, None]
    budget = boards_mod.get(board).heap_budget
    assert r["connected"] < budget, "the connected client stack fits the board's heap budget"
    report.record("heap %s: client stack imported (B)" % board, r["imported"])
    report.record("heap %s: connected, subscribed, 2 round trips (B)" % board, r["connected"])
