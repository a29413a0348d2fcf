# Board app, blocking client: tests/sim_apps/keepalive.py. One client per version in config.VERSIONS (client
# id CLIENT_ID + "v<N>"), keepalive config.KEEPALIVE s, idle for config.IDLE s (each looped in turn). Prints
# RESULT {version: {connected, pinging, error}}.
import json
import time

import config
from tinymqtt.client import Client

cs = [Client(config.BROKER_HOST, config.BROKER_PORT, client_id=config.CLIENT_ID + "v%d" % v, version=v,
             keepalive=config.KEEPALIVE, reconnect=False) for v in config.VERSIONS]
for c in cs:
    c.connect()
start = time.ticks_ms()
while time.ticks_diff(time.ticks_ms(), start) < config.IDLE * 1000:
    for c in cs:
        c.loop(0.02)
res = {}
for v, c in zip(config.VERSIONS, cs):
    res[v] = {"connected": c.is_connected(), "pinging": c.session.pinging, "error": str(c.last_error)}
    c.disconnect()
print("RESULT", json.dumps(res))
