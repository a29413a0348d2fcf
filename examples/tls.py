# TLS to a broker, verified against a CA file: the server's certificate must chain to config.CA_FILE and
# name the broker (TLS_SERVER_NAME, else BROKER_HOST). deploy --ca FILE copies the CA to the board and sets
# CA_FILE. Publishes one QoS 1 message to itself over the encrypted link and reads it back.
# The simulated board has no TLS: there it stops with the port's "no TLS" error.
#   config: BROKER_HOST, TLS_PORT (8883), CA_FILE, TLS_SERVER_NAME, CLIENT_ID, PREFIX
import asyncio

import config
from tinymqtt.aio import AsyncClient

PREFIX = getattr(config, "PREFIX", "tinymqtt/" + config.CLIENT_ID)


async def main():
    tls = {"cafile": getattr(config, "CA_FILE", "ca.pem"),
           "server_hostname": getattr(config, "TLS_SERVER_NAME", config.BROKER_HOST)}
    c = AsyncClient(config.BROKER_HOST, getattr(config, "TLS_PORT", 8883), tls=tls, client_id=config.CLIENT_ID,
                    version=5, reconnect=False, username=getattr(config, "MQTT_USERNAME", None),
                    password=getattr(config, "MQTT_PASSWORD", None), **getattr(config, "SESSION", {}))
    try:
        await c.connect()
    except OSError as e:
        print("TLS connect failed:", e)
        raise
    print("CONNECTED over TLS to", tls["server_hostname"])
    await c.subscribe(PREFIX + "/tls/echo", 1)
    await c.publish(PREFIX + "/tls/echo", b"hello over TLS", qos=1)
    async for msg in c.messages():
        print("ECHO", bytes(msg.payload).decode())
        break
    await c.disconnect()
    print("DONE")


asyncio.run(main())
