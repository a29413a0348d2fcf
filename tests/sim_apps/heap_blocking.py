# Board app (MicroPython only): the blocking Client's heap cost through its public API over a real socket:
# publish(str topic, bytes payload, qos) + loop(timeout) until the flow completes, and messages received
# through loop() and a handler, for MQTT 3.1.1 and 5 (with and without an outbound topic alias). Each figure
# is gc.mem_alloc()'s delta per message over N messages (automatic collection off), then N more under
# micropython.heap_lock(): any allocation raises MemoryError there. The port's clock is shifted so that
# ticks_ms() wraps around during the run. Prints RESULT {"v5 alias q1 publish": [bytes, locked], ...}.
import gc
import json
import time
import micropython

import config
import tinymqtt_port
from tinymqtt.client import Client

_real_ticks, _shift = tinymqtt_port.ticks_ms, 0


def _shifted():
    return time.ticks_add(_real_ticks(), _shift)


# The clock starts 0.3 s before its wrap-around (2**30 ms on 32-bit builds), and is moved on to 2 ms before
# it once the first QoS 1 window starts (a jump of < 0.3 s: nothing times out), so the wrap falls inside it.
_shift = time.ticks_diff(time.ticks_add(0, -300), _real_ticks())
tinymqtt_port.ticks_ms = _shifted


def approach_wrap():
    global _shift
    left = time.ticks_diff(time.ticks_add(0, -1), _shifted())  # ms to the wrap-around, less one
    if 0 < left < 1000:
        _shift = time.ticks_diff(time.ticks_add(_shift, left - 1), 0)  # (an offset within +-period/2)
W, N, PREFIX = config.WARMUP, config.N, config.PREFIX
PAYLOAD = b"0123456789abcdef"
LIMITS = {"max_packet_size": 1024, "max_inflight": 8, "receive_maximum": 8}
fig = {"start": _shifted()}


def client(v, alias, name):
    opts = dict(LIMITS, send_alias_maximum=alias) if v == 5 else LIMITS  # (a 3.x session takes no MQTT 5 option)
    c = Client(config.BROKER_HOST, config.BROKER_PORT, reconnect=False, client_id=config.CLIENT_ID + name,
               version=v, keepalive=30, **opts)
    c.connect()
    return c


def measure(key, step, lock=True, wrap=False):
    """Bytes per step() at steady state, and whether N steps run under heap_lock() (when lock is set)."""
    for _ in range(W):
        step()
    if wrap:
        approach_wrap()
    gc.collect()
    gc.disable()
    a = gc.mem_alloc()
    for _ in range(N):
        step()
    per = (gc.mem_alloc() - a) / N
    gc.enable()
    gc.collect()
    if not lock:
        fig[key] = per
        return
    micropython.heap_lock()
    try:  # nothing may escape while the heap is locked (the WebAssembly port hangs)
        for _ in range(N):
            step()
        locked = True
    except MemoryError:
        locked = False
    micropython.heap_unlock()
    fig[key] = [per, locked]


def run(v, alias):
    tag = "v%d%s " % (v, " alias" if alias else "")
    c = client(v, alias, "p")
    got = [0]

    def on_message(m):  # valid during the call only: reads the payload in place
        got[0] += m.payload[0] == 48

    c.subscribe(PREFIX + "r", 2, handler=on_message)
    topic, rtopic, flights = PREFIX + "p", PREFIX + "r", c.session.flights
    # loop(t) turns each new t into ms once (a float on the way: 32 B on 64-bit, 16 B on 32-bit) and keeps it.
    # A publish step needs loop(1.0) only when loop(0) has not already seen the ack, which on the fast unix
    # port can first happen inside a heap-locked window: use every timeout once here, as a board's start-up does.
    c.publish(topic, PAYLOAD, 1)
    c.loop(1.0)  # returns with the PUBACK
    for q in (0, 1, 2):
        def publish():
            c.publish(topic, PAYLOAD, q)
            c.loop(0)
            k = 0
            while flights.count and k < 100:  # bounded: under heap_lock a failed flow must not hang
                c.loop(1.0)
                k += 1

        def receive():  # c receives what it publishes: the publish side allocates nothing (measured above)
            n, k = got[0], 0
            c.publish(rtopic, PAYLOAD, q)
            while (got[0] == n or flights.count) and k < 100:
                c.loop(0.2)
                k += 1

        measure(tag + "q%d publish" % q, publish, wrap=q == 1)
        measure(tag + "q%d receive" % q, receive, False)  # the payload view: a memoryview object
    fig[tag + "connected"] = c.is_connected()
    fig[tag + "aliases"] = c.session.aliases.max if c.session.version == 5 else 0  # the server's Topic Alias Maximum, as we use it
    fig[tag + "received"] = got[0]
    c.disconnect()


for v, alias in ((4, 0), (5, 0), (5, 16)):
    run(v, alias)
fig["end"] = _shifted()
fig["ticks_max"] = time.ticks_add(0, -1)  # 2**30 - 1 on 32-bit builds
print("RESULT", json.dumps(fig))
