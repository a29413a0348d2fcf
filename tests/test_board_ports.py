# The ESP32 and Pico W ports under real MicroPython 1.27 (the WebAssembly build, tools/sim/run.mjs), as
# deploy builds them (.mpy with each board's mpy-cross flags), over fake `network` modules that behave like
# the documented drivers (tests/fakes/esp32, tests/fakes/picow): WLAN bring-up and its named failures, a
# drop and the rejoin through network_up(); the blocking socket path over a scripted fake `socket`/`ssl`
# (DNS, connect errors, the busy errno values, resets, TLS set-up); and the asyncio path end to end against
# a real mosquitto through a fake asyncio.open_connection over the simulator's TCP bridge (tests/fakes/
# jsstream.py), including a WLAN drop in the middle, with the heap it takes.
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
        simboard.add_fakes(root, "socket", "ssl", "jsstream", board=b)
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


# ------------------------------------------------------------------------------------------ blocking sockets

SOCKET_SCRIPT = '''
import socket, ssl
from tinymqtt.errors import ConnectionLost

def outcome(fn):
    try:
        return {"value": fn()}
    except ConnectionLost as e:
        return {"lost": str(e)}
    except OSError as e:
        return {"oserror": e.args[0], "msg": str(e)}
    except ValueError as e:
        return {"valueerror": str(e)}

if %(no_nodelay)r:
    del socket.TCP_NODELAY  # lwIP on the Pico W may not offer it: open() must do without

t = port.open("broker.example", 1883, timeout_ms=5000)
s = socket.sockets[-1]
result(step="open", log=[list(x) for x in socket.log], timeout=s.timeout, opts=[list(o) for o in s.opts])

buf = bytearray(16)
s.script = [b"abc", b"0123456789abcdefXYZ", 11, 110, 116, -110, -116, 115, 119, None]
reads = []
for off in (0, 0, 0):
    reads.append(t.readinto(buf, off, 100))
reads.append(bytes(buf))
for i in range(7):
    reads.append(t.readinto(buf, 0, 50))
result(step="reads", reads=[r if isinstance(r, int) else r.decode() for r in reads], timeout=s.timeout)

lost = {}
for code in (b"", 104, -1, 9, 128, 113, 118, -30592, -0x2700):
    s.script = [code]
    lost[repr(code)] = outcome(lambda: t.readinto(buf, 0, 50))
result(step="lost", lost=lost)

socket.write_chunk = 3
t.write(b"hello world, in pieces", 17)
result(step="write", sent=bytes(s.sent).decode())
socket.write_chunk = 0
t.close()
result(step="close", closed=s.closed)

socket.log.clear()
result(step="dns", r=outcome(lambda: port.open("nope.example", 1883)))
socket.connect_error[("10.0.0.2", 1884)] = 111
result(step="refused", r=outcome(lambda: port.open("broker.example", 1884)), closed=socket.sockets[-1].closed)

with open("ca.pem", "wb") as f:
    f.write(b"-----BEGIN CERTIFICATE-----\\nfake\\n-----END CERTIFICATE-----\\n")
port.open("broker.example", 8883, tls={"cafile": "ca.pem"})
c = ssl.contexts[-1]
result(step="tls", protocol=c.protocol, verify=c.verify_mode, cadata=c.cadata.decode(), wrapped=c.wrapped)
port.open("10.0.0.2", 8883, tls={"cafile": "ca.pem", "server_hostname": "mqtt.example"})
result(step="tls name", wrapped=ssl.contexts[-1].wrapped)
result(step="tls no ca", r=outcome(lambda: port.open("broker.example", 8883, tls=True)))
result(step="tls empty", r=outcome(lambda: port.open("broker.example", 8883, tls={})))
port.open("broker.example", 8883, tls={"insecure": True})
result(step="tls insecure", verify=ssl.contexts[-1].verify_mode)
ssl.verify_error = -0x2700
result(step="tls bad cert", r=outcome(lambda: port.open("broker.example", 8883, tls={"cadata": b"x"})),
       closed=socket.sockets[-1].closed)
ssl.verify_error = 0

# The blocking client over it: CONNACK, a publish, a reset, and the reconnect that goes through network_up().
from tinymqtt.client import Client
reset()
connack = b"\\x20\\x03\\x00\\x00\\x00"
socket.scripts[:] = [[connack], [connack]]
c = Client("broker.example", 1883, port_impl=port, client_id="b1", version=5, backoff_min_ms=1, backoff_max_ms=2)
c.connect(timeout=2)
c.publish("t/x", b"hi")
first = socket.sockets[-1]
first.script = [104]
c.loop(0.05)
lost_first = not c.is_connected()
for i in range(50):
    c.loop(0.01)
    if c.is_connected():
        break
result(step="client", first=bytes(first.sent).hex(), lost=lost_first, again=c.is_connected(),
       error=str(c.last_error), joins=port.station.joins, sockets=len(socket.sockets))
'''


@pytest.mark.parametrize("board", BOARDS)
def test_blocking_socket_path_maps_board_errors(trees, board):
    r = {x["step"]: x for x in run_script(trees[board], "sock.py", SOCKET_SCRIPT % {"no_nodelay": board == "picow"})}
    opened = r["open"]
    assert ["getaddrinfo", "broker.example", 1883] in opened["log"]
    assert ["connect", ["10.0.0.2", 1883]] in opened["log"]
    assert opened["timeout"] == 5.0
    assert opened["opts"] == ([] if board == "picow" else [[6, 1, 1]]), "TCP_NODELAY where the board has it"
    # data, data split over the buffer, then every busy errno and a non-blocking None read as 0 bytes
    assert r["reads"]["reads"] == [3, 16, 3, "XYZ3456789abcdef", 0, 0, 0, 0, 0, 0, 0]
    assert r["reads"]["timeout"] == 0.05
    lost = r["lost"]["lost"]
    for code in ("b''", "104", "-1", "9", "128", "113", "118", "-30592"):
        assert "lost" in lost[code], (code, lost[code])
    assert "closed the connection" in lost["b''"]["lost"]
    assert "104" in lost["104"]["lost"] and "TLS error -0x7780" in lost["-30592"]["lost"]
    assert lost[str(-0x2700)] == {"oserror": -0x2700, "msg": "TLS: the server's certificate did not verify against the CA"}
    assert lost["128"]["lost"].startswith("connection lost (128)"), "ENOTCONN on ESP-IDF: no name, no stray space"
    assert lost["-1"]["lost"].startswith("connection lost (-1)"), "-1 (closed, on some builds) is not -EPERM"
    assert r["write"]["sent"] == "hello world, in p", "partial writes are continued"
    assert r["close"]["closed"]
    assert r["dns"]["r"]["oserror"] == -202 and "DNS lookup of 'nope.example' failed" in r["dns"]["r"]["msg"]
    assert r["refused"]["r"]["oserror"] == 111 and "TCP connect to broker.example:1884 failed" in r["refused"]["r"]["msg"]
    assert r["refused"]["closed"]
    tls = r["tls"]
    assert (tls["protocol"], tls["verify"]) == (0, 2), "PROTOCOL_TLS_CLIENT with CERT_REQUIRED"
    assert "BEGIN CERTIFICATE" in tls["cadata"]
    assert tls["wrapped"] == [["broker.example", True]], "server_hostname is the broker's name"
    assert r["tls name"]["wrapped"] == [["mqtt.example", True]]
    assert "needs the broker's CA" in r["tls no ca"]["r"]["valueerror"]
    assert "needs the broker's CA" in r["tls empty"]["r"]["valueerror"], "tls={} must never mean plain TCP"
    assert r["tls insecure"]["verify"] == 0
    assert r["tls bad cert"]["r"]["msg"].startswith("TLS: the server's certificate did not verify")
    assert r["tls bad cert"]["closed"]
    client = r["client"]
    assert client["first"].startswith("10"), "CONNECT first"
    assert client["first"].endswith("3008" "0003" + b"t/x".hex() + "00" + b"hi".hex()), "then PUBLISH t/x 'hi'"
    assert client["lost"] and client["again"], client
    assert "connection lost (104 ECONNRESET)" in client["error"]
    assert client["joins"] == 1 and client["sockets"] >= 2


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
    await c.disconnect()
    try:
        await port.open_stream("broker.example", 8883, tls={"cadata": b"x", "server_hostname": "mqtt.example"})
        tls = None
    except OSError as e:
        tls = str(e)
    result(got=got, connects=len(connects), lost=lost, joins=port.station.joins, error=str(c.last_error),
           opened=[[h, p, s is not None, n] for h, p, s, n in jsstream.log], tls=tls, imported=imported,
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
    assert r["opened"][-1] == ["10.0.0.2", 8883, True, "mqtt.example"], "resolved, with a TLS context and the name"
    assert "TCP connect to broker.example:8883 failed" in r["tls"]
    budget = boards_mod.get(board).heap_budget
    assert r["connected"] < budget, "the connected client stack fits the board's heap budget"
    report.record("heap %s: client stack imported (B)" % board, r["imported"])
    report.record("heap %s: connected, subscribed, 2 round trips (B)" % board, r["connected"])
