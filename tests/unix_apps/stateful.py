# Unix-port app: replays a sequence of public-API calls that tests/test_stateful_unix.py generated with hypothesis
# (config.STEPS), on the blocking client (config.API "blocking") or the asyncio one ("aio"), against mosquitto, with
# the invariants of tests/test_stateful_api.py: an invalid call raises LocalProtocolError with its reason code at
# the call and leaves the session as it was; the next valid call works; a broker restart (the test restarts it
# when this prints RESTART, then writes the file restarted<n>) is survived by reconnecting. Prints RESULT {expected: [payload, qos] of each
# accepted QoS 1/2 message, drops: links lost, failures: what broke an invariant, inflight}.
import json
import os
import time

import config
from tinymqtt.errors import ConnectionLost, LocalProtocolError

PREFIX, V = config.PREFIX, config.VERSION
OPTS = dict(client_id=config.CLIENT_ID, version=V, backoff_min_ms=20, backoff_max_ms=200)
# Clean Start 0 from the first CONNECT on both versions: mosquitto 2.0 persists only such sessions, and the steps
# restart it (tests/test_mosquitto_restart_sessions.py shows what a v5 Clean Start 1 session loses there)
OPTS["clean"] = False
if V == 5:
    OPTS["session_expiry"] = 600
expected, drops, failures, quiet = [], [], [], [0]
n = [0]


def state(s):
    f = s.flights
    return repr((s.state, s.outlen, bytes(s.out[:s.outlen]), s.inlen, f.count, f.queued, f.head, bytes(f.state),
                 list(f.pid), list(f.topic), sorted(s.subs), list(s._resub_todo), sorted(s._rx_pid)))


restarts = [0]


def exists(name):
    try:
        os.stat(name)
        return True
    except OSError:
        return False


def restarted(wait):
    # The test restarts the broker when it reads RESTART, then writes the file restarted<n>: until then, wait()
    print("RESTART", restarts[0])
    restarts[0] += 1
    while not exists("restarted%d" % (restarts[0] - 1)):
        wait()


def payload(size):
    n[0] += 1
    p = b"%s-%d-" % (PREFIX.encode(), n[0])
    return p + b"." * (size - len(p)) if size > len(p) else p


def check_refused(c, step, call):
    before = state(c.session)
    try:
        call()
    except LocalProtocolError as e:
        if e.reason != step[-1]:
            failures.append("%r: reason 0x%02X" % (step, e.reason))
    except Exception as e:  # noqa: BLE001 (anything else breaks the invariant)
        failures.append("%r: %s %s" % (step, type(e).__name__, e))
    else:
        failures.append("%r: accepted" % (step,))
    if state(c.session) != before:
        failures.append("%r: the session changed" % (step,))


def bad_publish(step):
    args = dict(topic=PREFIX + "/m/x", payload=b"x", qos=1, retain=False)
    args[step[1]] = step[2]
    return args


# ---------------------------------------------------------------- the blocking client

def blocking():
    from tinymqtt.client import Client
    c = Client(config.BROKER_HOST, config.BROKER_PORT, **OPTS)
    c.on_disconnect = drops.append
    c.connect()
    connected = True

    def publish(qos, retain, size):
        p = payload(size)
        try:
            c.publish(PREFIX + "/m/%d" % (n[0] % 3), p, qos, retain, timeout=10)
        except ConnectionLost:
            if connected:
                failures.append("ConnectionLost while connected")
            return
        if qos:
            expected.append([p.decode(), qos])
        if retain:
            c.publish(PREFIX + "/m/%d" % (n[0] % 3), b"", 0, True)

    for step in config.STEPS:
        kind = step[0]
        if kind == "pub":
            publish(*step[1:])
        elif kind == "pub_bad":
            check_refused(c, step, lambda: c.publish(**bad_publish(step)))
            publish(1, False, 1)
        elif kind == "sub" and connected:
            c.subscribe(PREFIX + "/s/%d" % step[1], step[2], timeout=10)
        elif kind == "sub_bad":
            check_refused(c, step, lambda: c.subscribe(*step[1]))
        elif kind == "unsub" and connected:
            c.unsubscribe(PREFIX + "/s/%d" % step[1], timeout=10)
        elif kind == "unsub_bad":
            check_refused(c, step, lambda: c.unsubscribe(step[1]))
        elif kind == "loop":
            c.loop(step[1]) if c.transport or c.reconnect else time.sleep(step[1])
        elif kind == "disconnect" and connected:
            c.disconnect()
            connected = False
        elif kind == "connect" and not connected:
            c.connect()
            c.reconnect = True
            connected = True
        elif kind == "restart":
            k = len(drops)
            restarted(lambda: c.loop(0.02) if connected else time.sleep(0.02))
            start = time.ticks_ms()
            while time.ticks_diff(time.ticks_ms(), start) < 10000 and connected and \
                    (len(drops) == k or not c.is_connected()):
                c.loop(0.05)
    if not connected:
        c.connect()
        c.reconnect = True
    start = time.ticks_ms()
    while c.session.flights.count and time.ticks_diff(time.ticks_ms(), start) < 15000:
        c.loop(0.05)
    k = len(drops)
    start = time.ticks_ms()
    while time.ticks_diff(time.ticks_ms(), start) < 1000:  # quiet: no reconnect loop
        c.loop(0.05)
    quiet[0] = len(drops) - k
    inflight = c.session.flights.count
    c.disconnect()
    return inflight


# ---------------------------------------------------------------- the asyncio client

async def aio():
    import asyncio
    from tinymqtt.aio import AsyncClient

    def new():
        a = AsyncClient(config.BROKER_HOST, config.BROKER_PORT, **OPTS)
        a.on_disconnect = drops.append
        return a
    c = new()
    await c.connect()
    connected = True

    async def publish(qos, retain, size):
        p = payload(size)
        try:
            await c.publish(PREFIX + "/m/%d" % (n[0] % 3), p, qos, retain)
        except ConnectionLost:
            if connected:
                failures.append("ConnectionLost while connected")
            return
        if qos:
            expected.append([p.decode(), qos])
        if retain:
            await c.publish(PREFIX + "/m/%d" % (n[0] % 3), b"", 0, True)

    def first_step(coro):  # a coroutine's first step: where an invalid argument raises, before any await
        coro.send(None)

    for step in config.STEPS:
        kind = step[0]
        if kind == "pub":
            await publish(*step[1:])
        elif kind == "pub_bad":
            check_refused(c, step, lambda: c.publish(**bad_publish(step)))
            await publish(1, False, 1)
        elif kind == "sub" and connected:
            await c.subscribe(PREFIX + "/s/%d" % step[1], step[2])
        elif kind == "sub_bad":
            check_refused(c, step, lambda: first_step(c.subscribe(*step[1])))
        elif kind == "unsub" and connected:
            await c.unsubscribe(PREFIX + "/s/%d" % step[1])
        elif kind == "unsub_bad":
            check_refused(c, step, lambda: first_step(c.unsubscribe(step[1])))
        elif kind == "loop":
            await asyncio.sleep(step[1])
        elif kind == "disconnect" and connected:
            await c.disconnect()
            connected = False
        elif kind == "connect" and not connected:
            c = new()
            await c.connect()
            connected = True
        elif kind == "restart":
            k = len(drops)
            print("RESTART", restarts[0])
            restarts[0] += 1
            while not exists("restarted%d" % (restarts[0] - 1)):
                await asyncio.sleep(0.02)
            start = time.ticks_ms()
            while time.ticks_diff(time.ticks_ms(), start) < 10000 and connected and \
                    (len(drops) == k or not c.is_connected()):
                await asyncio.sleep(0.05)
    if not connected:
        c = new()
        await c.connect()
    k = len(drops)
    await asyncio.sleep(1)  # quiet: no reconnect loop
    quiet[0] = len(drops) - k
    inflight = c.session.flights.count
    await c.disconnect()
    return inflight


if config.API == "aio":
    import asyncio
    inflight = asyncio.run(aio())
else:
    inflight = blocking()
print("RESULT", json.dumps({"expected": expected, "drops": len([d for d in drops if d is not None]),
                            "quiet_drops": quiet[0],
                            "failures": failures, "inflight": inflight}))
