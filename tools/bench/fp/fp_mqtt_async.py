# Footprint of PyPI micropython-mqtt's mqtt_async (Thorsten von Eicken's asyncio client, derived from
# mqtt_as), measured the same way as tinymqtt's clients: its public API (config, MQTTClient, connect,
# subscribe, publish), the broker on loopback. `network` (fp/network.py) and `machine` (tests/fakes) are
# imported before the baseline: a board has them built in.
import gc
import asyncio
import machine  # noqa: F401
import network  # noqa: F401
import config

gc.collect()
BASE = gc.mem_alloc()
import mqtt_async  # noqa: E402 (what importing it costs is the figure)

gc.collect()
imported = gc.mem_alloc() - BASE
got = []


async def main():
    cfg = mqtt_async.config
    cfg.server, cfg.port, cfg.client_id = config.BROKER_HOST, config.BROKER_PORT, config.CLIENT_ID
    cfg.subs_cb = lambda topic, msg, retained, qos: got.append(len(msg))
    c = mqtt_async.MQTTClient(cfg)
    # Its one unix-port snag: it opens getaddrinfo()[0][-1] as (ip, port), the form boards return, where
    # the unix port gives a raw sockaddr; so the address is handed over in the board's form.
    c._addr, c._dns_lookup = (config.BROKER_HOST, config.BROKER_PORT), lambda: None
    await c.connect()
    gc.collect()
    connected = gc.mem_alloc() - BASE
    topic = "fp/" + config.CLIENT_ID
    await c.subscribe(topic, 1)
    await c.publish(topic, b"0123456789abcdef", qos=1)
    n = 0
    while not got and n < 200:
        await asyncio.sleep_ms(20)
        n += 1
    await c.disconnect()
    print("FOOTPRINT {\"import\": %d, \"connected\": %d, \"received\": %d}" % (imported, connected, len(got)))

asyncio.run(main())
