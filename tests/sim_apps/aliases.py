# Board app: MQTT 5 topic aliases. Publishes at QoS 1 to the topics PREFIX + "t<i>" for i in config.SEQ (the test
# uses more topics than the server's Topic Alias Maximum, so aliases get reassigned), and records each PUBLISH
# it writes. Prints RESULT {alias_max, topic_lengths: the topic length of each PUBLISH on the wire (0: the
# alias alone), codes}.
import asyncio
import json

import config
import tinymqtt_port as port
from tinymqtt.aio import AsyncClient

topic_lengths = []
_open_stream = port.open_stream


async def open_stream(host, p, tls=None):
    # The port's stream, with write() tapped: every packet written is split out and each PUBLISH noted.
    st = await _open_stream(host, p, tls)
    write = st.write

    def tapped(buf, n):
        i = 0
        while i < n:
            first, j, rl, shift = buf[i], i + 1, 0, 0
            while True:
                rl |= (buf[j] & 0x7F) << shift
                shift += 7
                j += 1
                if not buf[j - 1] & 0x80:
                    break
            if first >> 4 == 3:
                topic_lengths.append(buf[j] << 8 | buf[j + 1])
            i = j + rl
        write(buf, n)

    st.write = tapped
    return st


port.open_stream = open_stream


async def main():
    c = AsyncClient(config.BROKER_HOST, config.BROKER_PORT, client_id=config.CLIENT_ID, version=5,
                    reconnect=False)
    await c.connect()
    codes = []
    for i in config.SEQ:
        codes.append(await c.publish(config.PREFIX + "t%d" % i, b"t%d" % i, qos=1))
    print("RESULT", json.dumps({"alias_max": c.session.aliases.max, "topic_lengths": topic_lengths,
                                "codes": codes}))
    await c.disconnect()


asyncio.run(main())
