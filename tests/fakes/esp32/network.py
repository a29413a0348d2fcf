# A stand-in for MicroPython's `network` module on ESP32, to run ports/esp32 under real MicroPython (the
# WebAssembly build) without a radio. It follows ports/esp32/network_wlan.c: status() is STAT_GOT_IP once
# joined with an address, STAT_CONNECTING while a requested join is being retried (forever, unless
# config(reconnects=N) caps the attempts), STAT_IDLE before anything happened, otherwise the ESP-IDF
# disconnect reason (201 no AP found, 202 auth failed, 15 4-way handshake timeout, 200 beacon timeout...).
# Time is the number of status()/isconnected() polls. Tests script the world around the board:
#     network.world.air = {"home": "secret"}   # access points in range: ssid -> password
#     network.world.dhcp = False               # associates, never gets an address
#     network.world.bad_key_reason = 15        # how this ESP-IDF reports a wrong password
#     network.drop()                           # the AP goes away under a connected station
STA_IF, AP_IF = 0, 1
STAT_IDLE = 1000
STAT_CONNECTING = 1001
STAT_GOT_IP = 1010
STAT_BEACON_TIMEOUT = 200
STAT_NO_AP_FOUND = 201
STAT_WRONG_PASSWORD = 202
STAT_ASSOC_FAIL = 203
STAT_HANDSHAKE_TIMEOUT = 204


class World:
    def __init__(self):
        self.air = {}
        self.dhcp = True
        self.join_polls = 2  # polls a join attempt takes
        self.bad_key_reason = STAT_WRONG_PASSWORD
        self.log = []  # what the port asked the driver: ("active", True), ("connect", ssid), ...


world = World()
_hostname = "esp32"


def hostname(name=None):
    global _hostname
    if name is None:
        return _hostname
    world.log.append(("hostname", name))
    _hostname = name


class _WLAN:
    def __init__(self):
        self._active = False
        self._requested = False  # wifi_sta_connect_requested
        self._connected = False  # wifi_sta_connected: joined and has an address
        self._reason = 0  # wifi_sta_disconn_reason
        self._conf_reconnects = 0
        self._reconnects = 0
        self._trying = False
        self._polls = 0
        self._ssid = self._key = None
        self._conf = {}
        self.connects = 0

    def _tick(self):
        if not (self._active and self._requested and self._trying) or self._connected:
            return
        self._polls += 1
        if self._polls < world.join_polls:
            return
        self._polls = 0
        if self._ssid not in world.air:
            self._fail(STAT_NO_AP_FOUND)
        elif world.air[self._ssid] != self._key:
            self._fail(world.bad_key_reason)
        elif world.dhcp:
            self._connected, self._reason = True, 0
        # else: associated, waiting for DHCP forever (status stays STAT_CONNECTING)

    def _fail(self, reason):  # the STA_DISCONNECTED event handler
        self._reason = reason
        self._connected = False
        if self._requested and self._conf_reconnects:
            self._reconnects += 1
            if self._reconnects >= self._conf_reconnects:
                self._trying = False

    def active(self, *v):
        if v:
            world.log.append(("active", bool(v[0])))
            self._active = bool(v[0])
            if not self._active:
                self._connected = self._trying = False
        return self._active

    def connect(self, ssid=None, key=None, *, bssid=None):
        if not self._active:
            raise OSError("Wifi Not Started")
        world.log.append(("connect", ssid))
        self.connects += 1
        self._ssid, self._key = ssid, key
        self._reconnects, self._polls = 0, 0
        self._requested = self._trying = True

    def disconnect(self):
        world.log.append(("disconnect",))
        self._requested = self._trying = self._connected = False

    def isconnected(self):
        self._tick()
        return self._connected

    def status(self, *param):
        if param:
            raise ValueError("unknown status param")
        self._tick()
        if self._connected:
            return STAT_GOT_IP
        if self._requested and (self._conf_reconnects == 0 or self._reconnects < self._conf_reconnects):
            return STAT_CONNECTING
        if self._reason == 0:
            return STAT_IDLE
        return self._reason

    def config(self, *args, **kw):
        if args and kw:
            raise TypeError("either pos or kw args are allowed")
        for k, v in kw.items():
            if k not in ("reconnects", "pm", "txpower", "dhcp_hostname", "hostname"):
                raise ValueError("unknown config param")
            world.log.append(("config", k, v))
            if k == "reconnects":
                self._conf_reconnects = max(v, 0)
            self._conf[k] = v
        if args:
            if args[0] in ("essid", "ssid"):
                return self._ssid or ""
            if args[0] in self._conf:
                return self._conf[args[0]]
            raise ValueError("unknown config param")

    def ifconfig(self):
        return ("192.168.1.50" if self._connected else "0.0.0.0", "255.255.255.0", "192.168.1.1", "192.168.1.1")


_sta = _WLAN()


def WLAN(interface=STA_IF):
    if interface != STA_IF:
        raise ValueError("only the station interface is faked")
    return _sta


def drop(reason=STAT_BEACON_TIMEOUT):
    """The access point went away under a connected station: the driver sees a disconnect and retries."""
    _sta._connected = False
    _sta._reconnects = _sta._polls = 0
    _sta._trying = _sta._requested
    _sta._fail(reason)
