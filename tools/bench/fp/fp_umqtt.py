# Footprint of umqtt.simple (PyPI micropython-umqtt.simple), measured the same way as tinymqtt's clients.
import gc
import time
import config

gc.collect()
BASE = gc.mem_alloc()
from umqtt.simple import MQTTClient  # noqa: E402

gc.collect()
imported = gc.mem_alloc() - BASE
got = []
c = MQTTClient(config.CLIENT_ID, config.BROKER_HOST, config.BROKER_PORT)
c.set_callback(lambda t, m: got.append(len(m)))
c.connect()
gc.collect()
connected = gc.mem_alloc() - BASE
topic = b"fp/" + config.CLIENT_ID.encode()
c.subscribe(topic, qos=1)
c.publish(topic, b"0123456789abcdef", qos=1)
n = 0
while not got and n < 200:
    c.check_msg()
    time.sleep_ms(10)
    n += 1
c.disconnect()
print("FOOTPRINT {\"import\": %d, \"connected\": %d, \"received\": %d}" % (imported, connected, len(got)))
