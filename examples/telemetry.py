# Sensor telemetry with the retained status + will pattern. The broker holds PREFIX/status: "online" once we
# connect (published on every (re)connect, retained), "offline" when we leave cleanly, and the same
# "offline" as our Last Will when the link dies without a DISCONNECT (power cut, crash, WLAN gone).
# Readings go to PREFIX/telemetry as JSON every PERIOD_MS. Runs unchanged on ESP32, Pico W, Linux and the
# simulated board; config.py (written by tools/deploy) says where the broker is.
#   config: BROKER_HOST, BROKER_PORT, CLIENT_ID, PREFIX, PERIOD_MS (5000), COUNT (0 = forever), SESSION
import asyncio
import json
import time

import config
from tinymqtt.aio import AsyncClient
from tinymqtt.packets import Packet, PUBLISH

PREFIX = getattr(config, "PREFIX", "tinymqtt/" + config.CLIENT_ID)
STATUS = PREFIX + "/status"


def temperature():
    """The chip's own temperature sensor in degrees C, or a made-up value where there is none."""
    try:
        import esp32
        if hasattr(esp32, "mcu_temperature"):  # ESP32-S2/S3/C3
            return esp32.mcu_temperature()
        return (esp32.raw_temperature() - 32) / 1.8  # the original ESP32 reports Fahrenheit
    except ImportError:
        pass
    try:
        from machine import ADC
        volts = ADC(4).read_u16() * 3.3 / 65535  # RP2040: channel 4 is the internal sensor
        return 27 - (volts - 0.706) / 0.001721
    except (ImportError, ValueError, TypeError, OSError):
        pass
    return 20 + (time.ticks_ms() // 1000 % 50) / 10 if hasattr(time, "ticks_ms") else 21.0


def _sleep_ms(ms):
    return asyncio.sleep_ms(ms) if hasattr(asyncio, "sleep_ms") else asyncio.sleep(ms / 1000)


async def main():
    will = Packet(PUBLISH, topic=STATUS, payload=b"offline", qos=1, retain=True)
    c = AsyncClient(config.BROKER_HOST, getattr(config, "BROKER_PORT", 1883), client_id=config.CLIENT_ID,
                    version=5, will=will, username=getattr(config, "MQTT_USERNAME", None),
                    password=getattr(config, "MQTT_PASSWORD", None), **getattr(config, "SESSION", {}))
    # Every (re)connect says "online" again: the will may have replaced it while we were away.
    c.on_connect = lambda connack: c.publish_nowait(STATUS, b"online", qos=1, retain=True)
    await c.connect()
    print("READY", STATUS)
    count, period = getattr(config, "COUNT", 0), getattr(config, "PERIOD_MS", 5000)
    n = 0
    while not count or n < count:
        n += 1
        reading = {"n": n, "t": round(temperature(), 2)}
        await c.publish(PREFIX + "/telemetry", json.dumps(reading), qos=1)
        print("SENT", n)
        await _sleep_ms(period)
    await c.publish(STATUS, b"offline", qos=1, retain=True)  # a clean exit does not fire the will
    await c.disconnect()
    print("DONE")


asyncio.run(main())
