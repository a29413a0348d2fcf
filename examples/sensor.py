# Telemetry with the blocking client and MQTT 3.1.1: the smallest profile (mqtt311) runs it. The broker holds
# PREFIX/status: "online" (retained) while we are connected, "offline" after a clean exit or, as our Last
# Will, when the link dies. Readings go to PREFIX/telemetry at QoS 1 every PERIOD_MS; PREFIX/cmd is echoed.
#   config: BROKER_HOST, BROKER_PORT, CLIENT_ID, PREFIX, PERIOD_MS (5000), COUNT (0 = forever), SESSION
import config
from tinymqtt.client import Client
from tinymqtt.packets import Packet, PUBLISH

PREFIX = getattr(config, "PREFIX", "tinymqtt/" + config.CLIENT_ID)
STATUS = PREFIX + "/status"
CMD = PREFIX + "/cmd"


def on_message(msg):  # every message (profile mqtt311 has no per-subscription handlers): PREFIX/cmd's only
    if msg.topic == CMD:
        c.publish(PREFIX + "/reply", bytes(msg.payload), qos=1)  # the payload is a view into the receive buffer


c = Client(config.BROKER_HOST, getattr(config, "BROKER_PORT", 1883), client_id=config.CLIENT_ID, version=4,
           will=Packet(PUBLISH, topic=STATUS, payload=b"offline", qos=1, retain=True),
           username=getattr(config, "MQTT_USERNAME", None), password=getattr(config, "MQTT_PASSWORD", None),
           **getattr(config, "SESSION", {}))
# Every (re)connect says "online" again: the will may have replaced it while we were away.
c.on_connect = lambda connack: c.publish(STATUS, b"online", qos=1, retain=True)
c.on_message = on_message
c.connect()
c.subscribe(CMD, 1)
print("READY", STATUS)
count, period = getattr(config, "COUNT", 0), getattr(config, "PERIOD_MS", 5000)
n = 0
while not count or n < count:
    n += 1
    c.wait_for(c.publish(PREFIX + "/telemetry", '{"n": %d}' % n, qos=1))
    print("SENT", n)
    c.loop(period / 1000)
c.wait_for(c.publish(STATUS, b"offline", qos=1, retain=True))  # a clean exit does not fire the will
c.disconnect()
print("DONE")
