# Steady-state cycles the bench times and weighs on both CPython and MicroPython (tools/bench/mp.py copies
# this file to the board's /lib as benchcycles.py): a session driven with no transport, bytes fed into its
# buffers in place, so whatever allocates is the library, never the harness (alloc.harness checks that).
from tinymqtt.session import Session
from tinymqtt.session5 import Session5
from tinymqtt.packets import Packet, encode_publish, CONNACK, PUBACK
from tinymqtt_cli.server_codec import encode, decode  # CONNACK is the codec's server half (host/, never on a board)
from tinymqtt import props as P

TOPIC = "fleet/site-042/device-00017/telemetry/temperature"
PAYLOAD = b"x" * 64


def nothing(ev, value, reason):  # an application callback that keeps nothing (no *args: that is a tuple)
    pass


def connected(version, alias_max=0, **kw):
    """A session that has sent CONNECT and read a CONNACK (with Topic Alias Maximum alias_max in v5)."""
    s = (Session5 if version == 5 else Session)(client_id="bench", version=version, on_event=nothing, **kw)
    s.connect(0)
    s.outlen = 0
    pr = {P.TOPIC_ALIAS_MAXIMUM: alias_max} if alias_max else None
    n = encode(s.inbuf, Packet(CONNACK, reason=0, props=pr), version)
    s.received(n, 0)
    s.outlen = 0
    return s


class PubCycle:
    """One publish and its whole flow: PUBLISH written (out emptied as a driver would), then the server's
    PUBACK, or PUBREC -> our PUBREL -> PUBCOMP, fed into inbuf as the transport would."""

    def __init__(self, s, qos):
        self.s, self.qos = s, qos

    def ack(self, first, pid):
        b = self.s.inbuf
        b[0] = first
        b[1] = 2
        b[2] = pid >> 8
        b[3] = pid & 255
        self.s.received(4, 0)
        self.s.outlen = 0

    def run(self, _):
        s = self.s
        pid = s.publish(TOPIC, PAYLOAD, self.qos)
        s.outlen = 0
        if self.qos == 1:
            self.ack(0x40, pid)
        elif self.qos == 2:
            self.ack(0x50, pid)
            self.ack(0x70, pid)


class RxCycle:
    """One inbound PUBLISH (bytes as the server sends them) and, for QoS 2, the server's PUBREL."""

    def __init__(self, s, qos, alias):
        self.s, self.qos = s, qos
        self.mv = memoryview(s.inbuf)
        buf = bytearray(256)
        self.pid = 1
        v = s.version
        if alias:  # the first one sets the alias, every later one carries the alias alone
            n = encode_publish(buf, v, TOPIC.encode(), PAYLOAD, qos, False, False, 1 if qos else 0, None, 1)
            self.mv[0:n] = buf[:n]
            s.received(n, 0)
            s.outlen = 0
            if qos == 2:
                self.rel(1)
            n = encode_publish(buf, v, b"", PAYLOAD, qos, False, False, 1 if qos else 0, None, 1)
        else:
            n = encode_publish(buf, v, TOPIC.encode(), PAYLOAD, qos, False, False, 1 if qos else 0)
        self.pkt = bytes(buf[:n])
        self.n = n
        self.pidat = 3 + 2 + (len(TOPIC) if not alias else 0)  # header (1 + 1-byte length) + topic length field

    def rel(self, pid):
        b = self.s.inbuf
        b[0] = 0x62
        b[1] = 2
        b[2] = pid >> 8
        b[3] = pid & 255
        self.s.received(4, 0)
        self.s.outlen = 0

    def run(self, _):
        s, q = self.s, self.qos
        self.mv[0:self.n] = self.pkt
        if q:
            pid = self.pid % 60000 + 1
            self.pid = pid
            s.inbuf[self.pidat - 1] = pid >> 8
            s.inbuf[self.pidat] = pid & 255
        s.received(self.n, 0)
        s.outlen = 0
        if q == 2:
            self.rel(self.pid)


class Feed:
    """The harness alone: RxCycle's copy into inbuf and packet id writes, without the session (must be 0 B)."""

    def __init__(self, rx):
        self.rx = rx

    def run(self, _):
        rx = self.rx
        rx.mv[0:rx.n] = rx.pkt
        pid = rx.pid % 60000 + 1
        rx.pid = pid
        rx.s.inbuf[rx.pidat - 1] = pid >> 8
        rx.s.inbuf[rx.pidat] = pid & 255


def codec_cases():
    """[(name, fn)] for the codec and session figures: 3.1.1, QoS 1 PUBLISH of 64 bytes on TOPIC."""
    buf = bytearray(256)
    tb = TOPIC.encode()

    def enc_pub(_):
        encode_publish(buf, 4, tb, PAYLOAD, 1, False, False, 7)

    ack = Packet(PUBACK, pid=7)

    def enc_ack(_):
        encode(buf, ack, 4)

    k = encode_publish(buf, 4, tb, PAYLOAD, 1, False, False, 7)
    pub_mv = memoryview(bytes(buf[:k]))
    ack_mv = memoryview(b"\x40\x02\x00\x07")

    def dec_pub(_):
        decode(pub_mv, 4)

    def dec_ack(_):
        decode(ack_mv, 4)

    return [("codec.encode.publish", enc_pub), ("codec.encode.puback", enc_ack),
            ("codec.decode.publish", dec_pub), ("codec.decode.puback", dec_ack),
            ("session.publish.q0", PubCycle(connected(4, 0, max_inflight=8), 0).run),
            ("session.publish.q1", PubCycle(connected(4, 0, max_inflight=8), 1).run),
            ("session.publish.q2", PubCycle(connected(4, 0, max_inflight=8), 2).run),
            ("session.receive.q0", RxCycle(connected(4, 0, receive_maximum=8), 0, 0).run),
            ("session.receive.q1", RxCycle(connected(4, 0, receive_maximum=8), 1, 0).run)]
