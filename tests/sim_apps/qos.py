# Board app: QoS 0/1/2 both ways. Subscribes to PREFIX/in (QoS 2: messages keep the QoS they were published
# with), says READY, publishes N messages at QoS config.QOS on PREFIX/out (half awaited one by one, half
# queued with publish_nowait and flushed), then waits for the N messages the test publishes to PREFIX/in.
# Prints RESULT {codes: reason codes of the awaited publishes, inflight, got: [[payload, qos, dup], ...]}.
import asyncio
import json

import config
from tinymqtt.aio import AsyncClient

V, Q, N = config.VERSION, config.QOS, config.N


async def main():
    # It reads messages() only once its own publishes are done: room for all N (messages() holds no more).
    c = AsyncClient(config.BROKER_HOST, config.BROKER_PORT, client_id=config.CLIENT_ID, version=V,
                    reconnect=False, receive_maximum=max(N, 16))
    await c.connect()
    await c.subscribe(config.PREFIX + "in", 2)
    print("READY")
    out = config.PREFIX + "out"
    codes = []
    for i in range(N // 2):
        code = await c.publish(out, b"m%d" % i, qos=Q)
        codes.append(0 if not Q and code is None else code)  # (QoS 0: None, there is no ack to wait for)
    for i in range(N // 2, N):
        while c.publish_nowait(out, b"m%d" % i, qos=Q) < 0:  # every in-flight slot taken: let acks in
            await c.flush()
            await asyncio.sleep(0.001)
        await c.flush()
    for _ in range(500):  # until every flow is complete
        if not c.session.flights.count:
            break
        await asyncio.sleep(0.01)
    got = []
    msgs = c.messages()
    try:
        while len(got) < N:
            m = await asyncio.wait_for(msgs.__anext__(), 5)
            got.append([m.payload.decode(), m.qos, m.dup])
    except asyncio.TimeoutError:
        pass
    print("RESULT", json.dumps({"codes": codes, "inflight": c.session.flights.count, "got": got}))
    await c.disconnect()


asyncio.run(main())
