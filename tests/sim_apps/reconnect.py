# Board app: a link that dies with messages in flight both ways, and a session that resumes. The device client
# goes through the test's proxy (BROKER_HOST/PORT) with a Will and a persistent session (v5: session expiry,
# 3.x: clean=False) and reconnects by itself; a control client, straight to the broker (CTRL_PORT), takes the
# test's orders on PREFIX/ctl:
#   "pub": publish N messages at QoS 1 and N at QoS 2 on PREFIX/data, each awaited in its own task; prints
#          SENT once every PUBLISH is written (the test has silenced the broker -> board direction, so the
#          acks are lost), later DONE {codes} when every flow has completed, after the reconnect.
#   "end": prints RESULT {connects: session present of each CONNACK, got: [[payload, qos, dup], ...]}.
# Messages on PREFIX/cmd (QoS 2 subscription) are printed as they arrive: GOT payload.
import asyncio
import json

import config
from tinymqtt import props as P
from tinymqtt.aio import AsyncClient
from tinymqtt.packets import Packet, PUBLISH

V, N, PREFIX = config.VERSION, config.N, config.PREFIX
connects, got, tasks = [], [], []


def on_cmd(msg):
    got.append([bytes(msg.payload).decode(), msg.qos, msg.dup])
    print("GOT", got[-1][0])


async def publish_all(dev):
    for i in range(N):
        tasks.append(asyncio.create_task(dev.publish(PREFIX + "data", b"q1-%d" % i, qos=1)))
        tasks.append(asyncio.create_task(dev.publish(PREFIX + "data", b"q2-%d" % i, qos=2)))
    f = dev.session.flights
    # (5, 6: inflight.py's WAIT_PUBACK, WAIT_PUBREC; a board build has the numbers, not the names)
    while f.count < 2 * N or dev.session.outlen or any(f.state[i] and f.state[i] not in (5, 6) for i in range(f.size)):
        await asyncio.sleep(0.005)  # until every PUBLISH is on the wire
    print("SENT")
    codes = await asyncio.gather(*tasks)
    print("DONE", json.dumps(codes))


async def main():
    will = Packet(PUBLISH, topic=PREFIX + "will", payload=b"lost", qos=1,
                  props={P.WILL_DELAY_INTERVAL: 0} if V == 5 else None)
    persist = {"session_expiry": 300} if V == 5 else {"clean": False}
    dev = AsyncClient(config.BROKER_HOST, config.BROKER_PORT, client_id=config.CLIENT_ID, version=V, will=will,
                      backoff_min_ms=100, backoff_max_ms=400, max_inflight=2 * N + 2, **persist)
    dev.on_connect = lambda connack: connects.append(dev.session.session_present)  # 3.1 has no flag
    ctl = AsyncClient(config.BROKER_HOST, config.CTRL_PORT, client_id=config.CLIENT_ID + "c", version=V,
                      reconnect=False)
    await dev.connect()
    await dev.subscribe(PREFIX + "cmd", 2, handler=on_cmd)
    await ctl.connect()
    await ctl.subscribe(PREFIX + "ctl", 1)
    print("READY")
    async for m in ctl.messages():
        if m.payload == b"pub":
            asyncio.create_task(publish_all(dev))
        elif m.payload == b"end":
            break
    print("RESULT", json.dumps({"connects": connects, "got": got}))
    if V == 5:  # the broker may forget this session now
        await dev.disconnect(props={P.SESSION_EXPIRY_INTERVAL: 0})
    else:
        await dev.disconnect()
    await ctl.disconnect()


asyncio.run(main())
