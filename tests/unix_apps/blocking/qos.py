# Board app, blocking client: tests/sim_apps/qos.py's QoS 0/1/2 both ways. Subscribes to PREFIX/in (QoS 2),
# says READY, publishes N messages at QoS config.QOS on PREFIX/out (half waited for one by one, half queued
# while the in-flight window lasts), then loops until the N messages the test publishes to PREFIX/in are in.
# Prints RESULT {codes: 0 per acknowledged awaited publish, inflight, got: [[payload, qos, dup], ...]}.
import json

import config
from tinymqtt.client import Client

V, Q, N = config.VERSION, config.QOS, config.N
c = Client(config.BROKER_HOST, config.BROKER_PORT, client_id=config.CLIENT_ID, version=V, reconnect=False)
got = []
c.on_message = lambda m: got.append([bytes(m.payload).decode(), m.qos, m.dup])
c.connect()
c.subscribe(config.PREFIX + "in", 2)
print("READY")
out = config.PREFIX + "out"
codes = []
for i in range(N // 2):
    pid = c.publish(out, b"m%d" % i, qos=Q)
    codes.append(0 if not Q or c.wait_for(pid, 10) else -1)
for i in range(N // 2, N):
    c.publish(out, b"m%d" % i, qos=Q)  # waits by itself while every in-flight slot is taken
for i in range(500):  # until every flow is complete
    if not c.session.flights.count:
        break
    c.loop(0.01)
for i in range(100):
    if len(got) >= N:
        break
    c.loop(0.05)
print("RESULT", json.dumps({"codes": codes, "inflight": c.session.flights.count, "got": got}))
c.disconnect()
