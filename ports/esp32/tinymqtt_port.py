# ESP32 port (MicroPython 1.27+, ESP-IDF 5): the WLAN station and its status codes; the sockets, TLS,
# asyncio streams and the clock are tinymqtt_board's (ports/common), which deploy copies along.
# network_up() joins config.WIFI_SSID; a wrong password, a missing access point or a failed join raises
# WLANError naming the status instead of waiting out the timeout.
import network

from tinymqtt_board import (Station, WLANError, ticks_ms, open, open_stream, IDLE, CONNECTING, UP,
                            WRONG_PASSWORD, NO_AP, CONNECT_FAIL)


def _c(name, default):
    return getattr(network, name, default)


# network.WLAN.status() on ESP32: STAT_* while idle/connecting/up, otherwise the ESP-IDF disconnect reason.
_STATUS = {
    _c("STAT_IDLE", 1000): ("STAT_IDLE", IDLE),
    _c("STAT_CONNECTING", 1001): ("STAT_CONNECTING", CONNECTING),
    _c("STAT_GOT_IP", 1010): ("STAT_GOT_IP", UP),
    _c("STAT_BEACON_TIMEOUT", 200): ("STAT_BEACON_TIMEOUT", CONNECT_FAIL),
    _c("STAT_NO_AP_FOUND", 201): ("STAT_NO_AP_FOUND", NO_AP),
    _c("STAT_WRONG_PASSWORD", 202): ("STAT_WRONG_PASSWORD", WRONG_PASSWORD),
    _c("STAT_ASSOC_FAIL", 203): ("STAT_ASSOC_FAIL", CONNECT_FAIL),
    _c("STAT_HANDSHAKE_TIMEOUT", 204): ("STAT_HANDSHAKE_TIMEOUT", WRONG_PASSWORD),
    15: ("4WAY_HANDSHAKE_TIMEOUT", WRONG_PASSWORD),  # how ESP-IDF 5 usually reports a wrong WPA2 passphrase
    205: ("CONNECTION_FAIL", CONNECT_FAIL),
    210: ("NO_AP_FOUND_W_COMPATIBLE_SECURITY", NO_AP),
    211: ("NO_AP_FOUND_IN_AUTHMODE_THRESHOLD", NO_AP),
    212: ("NO_AP_FOUND_IN_RSSI_THRESHOLD", NO_AP),
}


def _prepare(net, wlan, config):
    name = getattr(config, "HOSTNAME", None)
    if name:
        net.hostname(name)


def _activated(wlan, config):
    # The driver retries a failed join forever by default and status() then says STAT_CONNECTING; a few
    # attempts let the real reason (wrong password, no AP) show. network_up() rejoins after a drop anyway.
    try:
        wlan.config(reconnects=getattr(config, "WIFI_RECONNECTS", 3))
    except (ValueError, OSError):
        pass


station = Station(_STATUS, CONNECT_FAIL, _prepare, _activated)


def network_up(timeout_ms=None):
    """Joins the WLAN from config (WIFI_SSID, WIFI_PASSWORD, WIFI_TIMEOUT_MS); returns at once when up."""
    return station.up(timeout_ms)
