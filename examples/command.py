# A command subscriber that drives a pin: PREFIX/cmd/led takes "on", "off", "toggle" (or 1/0) and the LED
# follows; every command is acknowledged on PREFIX/cmd/led/reply (or the request's MQTT 5 Response Topic)
# with the pin's new level, QoS 1 both ways. Without `machine` (Linux, the simulated board) a stand-in pin
# remembers the level. "quit" (or COUNT commands) ends it.
#   config: BROKER_HOST, BROKER_PORT, CLIENT_ID, PREFIX, LED_PIN ("LED" on a Pico W, 2 on most ESP32s), COUNT
import asyncio
import json

import config
from tinymqtt import props as P
from tinymqtt.aio import AsyncClient

try:
    from machine import Pin
except ImportError:
    class Pin:
        """Stands in for machine.Pin where there is no GPIO."""
        OUT = 1

        def __init__(self, id, mode=None, value=0):
            self.id, self._v = id, value

        def value(self, v=None):
            if v is None:
                return self._v
            self._v = 1 if v else 0

PREFIX = getattr(config, "PREFIX", "tinymqtt/" + config.CLIENT_ID)
CMD = PREFIX + "/cmd/led"


def apply(led, cmd):
    if cmd in ("on", "1"):
        led.value(1)
    elif cmd in ("off", "0"):
        led.value(0)
    elif cmd == "toggle":
        led.value(1 - led.value())
    else:
        return False
    return True


async def main():
    led = Pin(getattr(config, "LED_PIN", "LED"), Pin.OUT, value=0)
    c = AsyncClient(config.BROKER_HOST, getattr(config, "BROKER_PORT", 1883), client_id=config.CLIENT_ID,
                    version=5, username=getattr(config, "MQTT_USERNAME", None),
                    password=getattr(config, "MQTT_PASSWORD", None), **getattr(config, "SESSION", {}))
    await c.connect()
    await c.subscribe(CMD, 1)
    print("READY", CMD)
    count, n = getattr(config, "COUNT", 0), 0
    async for msg in c.messages():
        cmd = bytes(msg.payload).decode().strip().lower()
        if cmd == "quit":
            break
        ok = apply(led, cmd)
        reply = (msg.props or {}).get(P.RESPONSE_TOPIC) or CMD + "/reply"
        props = {P.CORRELATION_DATA: msg.props[P.CORRELATION_DATA]} if msg.props and P.CORRELATION_DATA in msg.props else None
        await c.publish(reply, json.dumps({"cmd": cmd, "ok": ok, "led": led.value()}), qos=1, props=props)
        print("LED", led.value())
        n += 1
        if count and n >= count:
            break
    await c.disconnect()
    print("DONE")


asyncio.run(main())
