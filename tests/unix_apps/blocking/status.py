# Board app, blocking client: tests/sim_apps/status.py's retained online/offline status with a Will, ended
# by config.END ("crash": the socket closes without DISCONNECT; "graceful": "offline", then DISCONNECT) once a
# message arrives on PREFIX/ctl. Prints RESULT {connected, present, code} once "online" is acknowledged.
import json

import config
from tinymqtt.client import Client
from tinymqtt.packets import Packet, PUBLISH

V = config.VERSION
STATUS = config.PREFIX + "status"
props = None
if V == 5:  # (props.py only then: profile mqtt311 has none)
    from tinymqtt import props as P
    props = {P.WILL_DELAY_INTERVAL: 0, P.CONTENT_TYPE: "text/plain", P.USER_PROPERTY: [("board", "sim")]}
will = Packet(PUBLISH, topic=STATUS, payload=b"offline", qos=1, retain=True, props=props)
c = Client(config.BROKER_HOST, config.BROKER_PORT, client_id=config.CLIENT_ID, version=V, will=will,
           reconnect=False)
ctl = []
c.on_message = ctl.append
present = c.connect()
c.subscribe(config.PREFIX + "ctl", 1)
code = 0 if c.wait_for(c.publish(STATUS, b"online", qos=1, retain=True), 10) else -1  # 0: acknowledged
print("RESULT", json.dumps({"connected": c.is_connected(), "present": present, "code": code}))
for i in range(300):
    if ctl:
        break
    c.loop(0.1)
if config.END == "graceful":
    c.wait_for(c.publish(STATUS, b"offline", qos=1, retain=True), 10)
    c.disconnect()
else:
    c.reconnect = False
    c.transport.close()  # no DISCONNECT: to the broker this is a crash
