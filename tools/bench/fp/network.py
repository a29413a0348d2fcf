# The unix port has no `network`: the peers that take a station at import (PyPI micropython-mqtt's mqtt_async,
# fp_mqtt_async.py; mqtt_as, real_mqtt_as.py) get one that is always joined. mqtt_as also switches it on,
# joins, asks status() and leaves it on a reconnect: all answered as a joined board would.
STA_IF = 0
STAT_IDLE, STAT_CONNECTING, STAT_GOT_IP = 1000, 1001, 1010


class WLAN:
    def __init__(self, *args):
        pass

    def isconnected(self):
        return True

    def active(self, on=None):
        return True

    def connect(self, *args, **kw):
        pass

    def disconnect(self):
        pass

    def status(self, *args):
        return STAT_GOT_IP

    def config(self, *args, **kw):
        pass
