# Board app, blocking client: tests/sim_apps/reconnect.py's link that dies with messages in flight both ways.
# The device client goes through the test's proxy with a Will and a persistent session and reconnects by
# itself; a control client, straight to the broker (CTRL_PORT), takes orders on PREFIX/ctl: "pub" publishes N
# at QoS 1 and N at QoS 2 on PREFIX/data (SENT once written, DONE {codes} once every flow completed), "end"
# prints RESULT {connects, got}. Messages on PREFIX/cmd (QoS 2) print GOT payload. Both are looped in turn.
import json

import config
from tinymqtt.client import Client
from tinymqtt.packets import Packet, PUBLISH

V, N, PREFIX = config.VERSION, config.N, config.PREFIX
if V == 5:  # (props.py only then: profile mqtt311 has none)
    from tinymqtt import props as P
connects, got, orders = [], [], []


def on_cmd(msg):
    got.append([bytes(msg.payload).decode(), msg.qos, msg.dup])
    print("GOT", got[-1][0])


will = Packet(PUBLISH, topic=PREFIX + "will", payload=b"lost", qos=1,
              props={P.WILL_DELAY_INTERVAL: 0} if V == 5 else None)
persist = {"session_expiry": 300} if V == 5 else {"clean": False}
dev = Client(config.BROKER_HOST, config.BROKER_PORT, client_id=config.CLIENT_ID, version=V, will=will,
             backoff_min_ms=100, backoff_max_ms=400, max_inflight=2 * N + 2, **persist)
dev.on_connect = lambda connack: connects.append(dev.session.session_present)
dev.on_message = on_cmd  # (only PREFIX/cmd; profile mqtt311 has no per-subscription handlers)
ctl = Client(config.BROKER_HOST, config.CTRL_PORT, client_id=config.CLIENT_ID + "c", version=V, reconnect=False)
ctl.on_message = lambda m: orders.append(bytes(m.payload))
dev.connect()
dev.subscribe(PREFIX + "cmd", 2)
ctl.connect()
ctl.subscribe(PREFIX + "ctl", 1)
print("READY")
pids, done = [], False
while True:
    dev.loop(0.01)
    ctl.loop(0.01)
    if pids and not done and all(dev.session.flights.find(p) < 0 for p in pids):
        done = True
        print("DONE", json.dumps([0] * len(pids)))  # 0: every flow completed
    if not orders:
        continue
    order = orders.pop(0)
    if order == b"pub":
        for i in range(N):
            pids.append(dev.publish(PREFIX + "data", b"q1-%d" % i, qos=1))
            pids.append(dev.publish(PREFIX + "data", b"q2-%d" % i, qos=2))
        print("SENT")  # publish() wrote each PUBLISH before it returned
    elif order == b"end":
        break
print("RESULT", json.dumps({"connects": connects, "got": got}))
dev.disconnect(props={P.SESSION_EXPIRY_INTERVAL: 0} if V == 5 else None)
ctl.disconnect()
