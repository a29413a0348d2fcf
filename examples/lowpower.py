# A low-power loop: wake, publish one reading at QoS 1, go back to deep sleep. The MQTT session outlives
# the sleep (clean start off, Session Expiry Interval SESSION_EXPIRY s), so the broker keeps our
# subscription and queues the QoS 1 commands sent to PREFIX/lowpower/cmd while we sleep; each wake
# collects them and reports them with the reading. The wake count lives in RTC memory where the board has
# it (ESP32), else in a small file. Where there is no machine.deepsleep (Linux) the loop stays awake.
#   config: BROKER_HOST, BROKER_PORT, CLIENT_ID, PREFIX, SLEEP_MS (60000), LISTEN_MS (500),
#           SESSION_EXPIRY (3600), COUNT (wakes before stopping; 0 = forever)
import asyncio
import json

import config
from tinymqtt.aio import AsyncClient

try:
    import machine
except ImportError:
    machine = None

PREFIX = getattr(config, "PREFIX", "tinymqtt/" + config.CLIENT_ID)
_SEQ_FILE = "lowpower.seq"


def load_seq():
    try:
        mem = machine.RTC().memory()
        if mem:
            return int(mem)
    except (AttributeError, ValueError, TypeError):
        pass
    try:
        with open(_SEQ_FILE) as f:
            return int(f.read())
    except (OSError, ValueError):
        return 0


def save_seq(n):
    try:
        machine.RTC().memory(str(n).encode())
        return
    except AttributeError:  # no machine, or an RTC without memory (Pico W)
        pass
    with open(_SEQ_FILE, "w") as f:
        f.write(str(n))


def _sleep_ms(ms):
    return asyncio.sleep_ms(ms) if hasattr(asyncio, "sleep_ms") else asyncio.sleep(ms / 1000)


async def wake(seq):
    cmds = []
    c = AsyncClient(config.BROKER_HOST, getattr(config, "BROKER_PORT", 1883), client_id=config.CLIENT_ID,
                    version=5, clean=False, session_expiry=getattr(config, "SESSION_EXPIRY", 3600),
                    username=getattr(config, "MQTT_USERNAME", None), password=getattr(config, "MQTT_PASSWORD", None),
                    **getattr(config, "SESSION", {}))
    # Registered before connecting: the broker hands over queued commands right after CONNACK.
    await c.subscribe(PREFIX + "/lowpower/cmd", 1, handler=lambda m: cmds.append(bytes(m.payload).decode()))
    resumed = await c.connect()
    await _sleep_ms(getattr(config, "LISTEN_MS", 500))
    report = {"seq": seq, "resumed": resumed, "cmds": cmds}
    await c.publish(PREFIX + "/lowpower/data", json.dumps(report), qos=1)  # returns once PUBACK is in
    await c.disconnect()  # the session stays on the broker for SESSION_EXPIRY seconds
    print("WOKE", json.dumps(report))


async def main():
    count, sleep_ms = getattr(config, "COUNT", 0), getattr(config, "SLEEP_MS", 60000)
    while True:
        seq = load_seq() + 1
        save_seq(seq)
        await wake(seq)
        if count and seq >= count:
            print("DONE")
            return
        if machine is not None and hasattr(machine, "deepsleep"):
            machine.deepsleep(sleep_ms)  # never returns: the board restarts at main.py
        await _sleep_ms(sleep_ms)


asyncio.run(main())
