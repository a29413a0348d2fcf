# The unix port has no `network`: PyPI micropython-mqtt's mqtt_async (fp_mqtt_async.py) takes network.WLAN at
# import and asks isconnected() before it dials, so a station that is always joined stands in for the radio.
STA_IF = 0
STAT_CONNECTING = 1001


class WLAN:
    def __init__(self, *args):
        pass

    def isconnected(self):
        return True
