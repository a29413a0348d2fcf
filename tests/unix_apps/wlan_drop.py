# Unix-port app for the esp32 / picow layers (ports/common on real sockets, the fake `network`): the WLAN
# drops under a connected client and the TCP link dies with it; network_up() fails while the access point is
# gone, then joins again when it is back, and the client (config.API "blocking" or "aio") reconnects and
# completes a second round trip. Prints RESULT {got, connects, lost, joins, error}.
import json
import time

import config
import network
import tinymqtt_port as port

TOPIC = config.PREFIX + "echo"
OPTS = dict(client_id=config.CLIENT_ID, version=5, backoff_min_ms=50, backoff_max_ms=100)
got, connects, downs = [], [], []


def on_message(m):
    got.append(bytes(m.payload).decode())


def drop(close):
    network.drop()
    network.world.air = {}
    close()  # the TCP link dies with the WLAN


def report(c):
    print("RESULT", json.dumps({"got": got, "connects": len(connects), "lost": len(downs),
                                "joins": port.station.joins, "error": str(c.last_error)}))


def blocking():
    from tinymqtt.client import Client
    c = Client(config.BROKER_HOST, config.BROKER_PORT, **OPTS)
    c.on_connect, c.on_message, c.on_disconnect = connects.append, on_message, downs.append

    def until(done, ms):
        start = time.ticks_ms()
        while not done() and time.ticks_diff(time.ticks_ms(), start) < ms:
            c.loop(0.02)

    c.connect()
    c.subscribe(TOPIC, 1)
    c.publish(TOPIC, b"one", 1)
    until(lambda: got, 5000)
    drop(c.transport.close)
    until(lambda: downs and port.station.joins >= 2, 5000)  # lost, and a join tried while the AP is gone
    network.world.air = {config.WIFI_SSID: config.WIFI_PASSWORD}
    until(lambda: len(connects) == 2 and c.is_connected(), 10000)
    c.publish(TOPIC, b"two", 1)
    until(lambda: len(got) == 2, 5000)
    report(c)
    c.disconnect()


async def aio():
    import asyncio
    from tinymqtt.aio import AsyncClient
    c = AsyncClient(config.BROKER_HOST, config.BROKER_PORT, **OPTS)
    c.on_connect, c.on_disconnect = connects.append, downs.append

    async def until(done, ms):
        start = time.ticks_ms()
        while not done() and time.ticks_diff(time.ticks_ms(), start) < ms:
            await asyncio.sleep_ms(20)

    await c.connect()
    await c.subscribe(TOPIC, 1, handler=on_message)
    await c.publish(TOPIC, b"one", 1)
    await until(lambda: got, 5000)
    drop(c.stream.close)
    await until(lambda: downs and port.station.joins >= 2, 5000)
    network.world.air = {config.WIFI_SSID: config.WIFI_PASSWORD}
    await until(lambda: len(connects) == 2 and c.is_connected(), 10000)
    await c.publish(TOPIC, b"two", 1)
    await until(lambda: len(got) == 2, 5000)
    report(c)
    await c.disconnect()


if config.API == "aio":
    import asyncio
    asyncio.run(aio())
else:
    blocking()
