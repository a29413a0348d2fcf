# A stand-in for MicroPython's `network` module on the Pico W (CYW43439), to run ports/picow under real
# MicroPython (the WebAssembly build) without a radio. status() is the CYW43 link status: 0 down, 1 joining,
# 2 joined without an address (DHCP pending), 3 up, -1 join failed, -2 no such network, -3 bad password.
# network.country() only counts when set before the radio starts; config(pm=...) needs the radio on.
# Time is the number of status()/isconnected() polls. Tests script the world around the board:
#     network.world.air = {"home": "secret"}; network.world.dhcp = False; network.world.fail = True
#     network.drop()                            # the link goes down under a connected station
STA_IF, AP_IF = 0, 1
STAT_IDLE = 0
STAT_CONNECTING = 1
STAT_WRONG_PASSWORD = -3
STAT_NO_AP_FOUND = -2
STAT_CONNECT_FAIL = -1
STAT_GOT_IP = 3
_LINK_NOIP = 2


class World:
    def __init__(self):
        self.air = {}
        self.dhcp = True
        self.fail = False  # the join fails outright (CYW43_LINK_FAIL)
        self.join_polls = 2
        self.log = []


world = World()
_country = "XX"  # the CYW43 worldwide default
_hostname = "PicoW"


def country(cc=None):
    global _country
    if cc is None:
        return _country
    world.log.append(("country", cc))
    _country = cc


def hostname(name=None):
    global _hostname
    if name is None:
        return _hostname
    world.log.append(("hostname", name))
    _hostname = name


class _WLAN:
    PM_NONE = 0x10
    PM_PERFORMANCE = 0xa11142
    PM_POWERSAVE = 0x11

    def __init__(self):
        self._active = False
        self._link = 0
        self._polls = 0
        self._ssid = self._key = None
        self.pm = self.PM_POWERSAVE
        self.country_at_start = None  # the regulatory domain the radio started with
        self.connects = 0

    def _tick(self):
        if self._link not in (1, _LINK_NOIP):
            return
        self._polls += 1
        if self._polls < world.join_polls:
            return
        self._polls = 0
        if self._link == 1:
            if world.fail:
                self._link = STAT_CONNECT_FAIL
            elif self._ssid not in world.air:
                self._link = STAT_NO_AP_FOUND
            elif world.air[self._ssid] != self._key:
                self._link = STAT_WRONG_PASSWORD
            else:
                self._link = _LINK_NOIP
        elif world.dhcp:
            self._link = STAT_GOT_IP

    def active(self, *v):
        if v:
            world.log.append(("active", bool(v[0])))
            if v[0] and not self._active:
                self.country_at_start = _country
                self.pm = self.PM_POWERSAVE
            self._active = bool(v[0])
            if not self._active:
                self._link = 0
        return self._active

    def connect(self, ssid=None, key=None, *, bssid=None, security=None):
        if not self._active:
            raise OSError(1)  # EPERM: the CYW43 is not up
        world.log.append(("connect", ssid))
        self.connects += 1
        self._ssid, self._key = ssid, key
        self._link, self._polls = 1, 0

    def disconnect(self):
        world.log.append(("disconnect",))
        self._link = 0

    def isconnected(self):
        self._tick()
        return self._link == STAT_GOT_IP

    def status(self, *param):
        if param:
            raise ValueError("unknown status param")
        self._tick()
        return self._link

    def config(self, *args, **kw):
        if not self._active:
            raise OSError(1)  # EPERM
        for k, v in kw.items():
            if k not in ("pm", "txpower", "ssid", "channel", "security", "key"):
                raise ValueError("unknown config param")
            world.log.append(("config", k, v))
            if k == "pm":
                self.pm = v
        if args:
            if args[0] == "pm":
                return self.pm
            if args[0] in ("ssid", "essid"):
                return self._ssid or ""
            raise ValueError("unknown config param")

    def ifconfig(self):
        return ("192.168.1.51" if self._link == STAT_GOT_IP else "0.0.0.0", "255.255.255.0", "192.168.1.1",
                "192.168.1.1")


_sta = _WLAN()


def WLAN(interface=STA_IF):
    if interface != STA_IF:
        raise ValueError("only the station interface is faked")
    return _sta


def drop():
    """The link went down under a connected station (the CYW43 does not rejoin by itself)."""
    _sta._link = 0
