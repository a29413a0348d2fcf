# Board app, blocking client: tests/sim_apps/aliases.py's MQTT 5 topic aliases. Publishes at QoS 1 to PREFIX +
# "t<i>" for i in config.SEQ, noting the topic length of each PUBLISH it writes (0: the alias alone).
# Prints RESULT {alias_max, topic_lengths, codes}.
import json

import config
import tinymqtt_port as port
from tinymqtt.client import Client

topic_lengths = []
_open = port.open


def open_tapped(host, p, tls=None):
    t = _open(host, p, tls)
    write = t.write

    def tapped(buf, n):  # every packet written is split out and each PUBLISH noted
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

    t.write = tapped
    return t


port.open = open_tapped
c = Client(config.BROKER_HOST, config.BROKER_PORT, client_id=config.CLIENT_ID, version=5, reconnect=False)
c.connect()
codes = []
for i in config.SEQ:
    codes.append(0 if c.wait_for(c.publish(config.PREFIX + "t%d" % i, b"t%d" % i, qos=1), 10) else -1)
print("RESULT", json.dumps({"alias_max": c.session.aliases.max, "topic_lengths": topic_lengths, "codes": codes}))
c.disconnect()
