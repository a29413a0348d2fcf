# Raspberry Pi Pico W port (RP2040 + CYW43439, MicroPython 1.27+): the WLAN station and the CYW43 status
# codes; the sockets, TLS, asyncio streams and the clock are tinymqtt_board's (ports/common), which deploy
# copies along. network_up() sets the regulatory country before the radio starts and turns power saving
# off (pm=0xa11140) before each join: in power-save mode the CYW43 answers late and drops small packets.
import network

from tinymqtt_board import (Station, WLANError, ticks_ms, open, open_stream, IDLE, CONNECTING, NO_IP, UP,
                            WRONG_PASSWORD, NO_AP, CONNECT_FAIL)

PM_PERFORMANCE = 0xa11140  # power saving off; the value the Pico W documentation gives

# network.WLAN.status() on the Pico W is the CYW43 link status.
_STATUS = {
    0: ("STAT_IDLE", IDLE),  # CYW43_LINK_DOWN
    1: ("STAT_CONNECTING", CONNECTING),  # CYW43_LINK_JOIN
    2: ("LINK_NOIP", NO_IP),  # CYW43_LINK_NOIP: joined, waiting for DHCP
    3: ("STAT_GOT_IP", UP),  # CYW43_LINK_UP
    -1: ("STAT_CONNECT_FAIL", CONNECT_FAIL),  # CYW43_LINK_FAIL
    -2: ("STAT_NO_AP_FOUND", NO_AP),  # CYW43_LINK_NONET
    -3: ("STAT_WRONG_PASSWORD", WRONG_PASSWORD),  # CYW43_LINK_BADAUTH
}


def _prepare(net, wlan, config):
    cc = getattr(config, "WIFI_COUNTRY", None)
    if cc:
        try:
            net.country(cc)
        except AttributeError:  # before MicroPython 1.20 the country lived in rp2
            import rp2
            rp2.country(cc)
    name = getattr(config, "HOSTNAME", None)
    if name:
        net.hostname(name)


def _activated(wlan, config):
    wlan.config(pm=getattr(config, "WIFI_PM", PM_PERFORMANCE))


station = Station(_STATUS, CONNECTING, _prepare, _activated)


def network_up(timeout_ms=None):
    """Joins the WLAN from config (WIFI_SSID, WIFI_PASSWORD, WIFI_COUNTRY, WIFI_TIMEOUT_MS)."""
    return station.up(timeout_ms)
