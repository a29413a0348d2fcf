# What a receiver has told the broker about the QoS 1/2 messages it spooled: the receiver's half of the MQTT
# session state (spec 4.1), persisted *before* the broker is told, so that a process starting on the same
# session knows which packet ids are still held by messages it has and which are free for the broker to reuse.
#   acked   every QoS 1/2 record below this offset had its PUBACK / PUBREC written, except those in `held`
#   held    {offset: (pid, qos)} below `acked` whose ack is still owed (an earlier process spooled them; their
#           redelivery has not come yet)
#   rel     QoS 2 packet ids whose PUBREC went out and whose PUBREL has not been answered (no PUBCOMP yet)
# A redelivery is recognised by packet id among the unacknowledged messages and `rel` alone: an acknowledged
# message is never consulted, so content plays no part (identical payloads are independent messages).
import json
import os


class AckState:
    def __init__(self, directory, fsync=True):
        self.path = os.path.join(directory, "acks.json")
        self.fsync = fsync
        self.acked, self.held, self.rel = 0, {}, set()
        try:
            with open(self.path) as f:
                d = json.load(f)
            self.acked = int(d["acked"])
            self.held = {int(o): (int(p), int(q)) for o, p, q in d["held"]}
            self.rel = set(int(p) for p in d["rel"])
        except FileNotFoundError:
            pass

    def save(self):
        """Atomically, and durably when fsync is on (a rename the disk has not seen is not a promise)."""
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"acked": self.acked, "held": [[o, p, q] for o, (p, q) in sorted(self.held.items())],
                       "rel": sorted(self.rel)}, f, separators=(",", ":"))
            f.flush()
            if self.fsync:
                os.fsync(f.fileno())
        os.replace(tmp, self.path)
        if self.fsync:
            fsync_dir(os.path.dirname(self.path))


def fsync_dir(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
