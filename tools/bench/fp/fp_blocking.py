# Footprint of the blocking client (tools/bench/footprint.py deploys it with a profile's tree): heap after
# import and when connected, then subscribe + publish + receive one message through the broker.
import gc
import config

gc.collect()
BASE = gc.mem_alloc()
from tinymqtt.client import Client  # noqa: E402 (what importing it costs is the figure)

gc.collect()
imported = gc.mem_alloc() - BASE
got = []
c = Client(config.BROKER_HOST, config.BROKER_PORT, client_id=config.CLIENT_ID, version=config.VERSION,
           reconnect=False, **config.SESSION)
c.connect()
gc.collect()
connected = gc.mem_alloc() - BASE
topic = "fp/" + config.CLIENT_ID
c.on_message = lambda m: got.append(len(m.payload))  # (profile mqtt311 has no per-subscription handlers)
c.subscribe(topic, 1)
c.publish(topic, b"0123456789abcdef", qos=1)
n = 0
while not got and n < 200:
    c.loop(0.05)
    n += 1
c.disconnect()
print("FOOTPRINT {\"import\": %d, \"connected\": %d, \"received\": %d}" % (imported, connected, len(got)))
