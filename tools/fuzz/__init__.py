# Coverage-guided fuzz targets (atheris, libFuzzer) for the two places a hostile server's bytes land:
#   decoder: frame() + decode() at MQTT level 3, 4 or 5 (the first byte picks it), then re-encode what decoded and
#            decode it again: it must be the same packet. Only an MQTTError may escape; anything else is a bug.
#   session: a Session with messages and a subscription in flight is fed the bytes as a server's stream, in chunks
#            of random sizes (byte 1 seeds them), with the clock moving and reconnects after every error that ends
#            a connection. Only the errors that end a connection (RemoteProtocolError, ConnectError,
#            ConnectionLost) may escape received()/tick(): the blocking client turns exactly those into a reconnect,
#            anything else (a LocalProtocolError too) would reach the application. After every chunk the session's
#            invariants are checked, and every packet it wrote must decode as a well-formed client packet.
# Run: python -m tools.fuzz decoder|session [-runs=N] [libFuzzer flags] [corpus dirs]  (see __main__.py).
# The seed corpus lives in tools/fuzz/corpus/<target>/ and is (re)made by `python -m tools.fuzz seeds`.
import os

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
CORPUS = os.path.join(HERE, "corpus")
TARGETS = ("decoder", "session")


def _paths():
    import sys
    for d in (os.path.join(REPO, "lib"), os.path.join(REPO, "ports", "linux"), os.path.join(REPO, "host")):
        if d not in sys.path:
            sys.path.insert(0, d)


# ---------------------------------------------------------------------------------------- decoder

_BUF = bytearray(1 << 17)


def decoder(data):
    from tinymqtt.errors import MQTTError, LocalProtocolError
    from tinymqtt.packets import frame
    from tinymqtt_cli.server_codec import decode, encode  # the codec's server half: any packet, both ways
    if not data:
        return
    v = (3, 4, 5)[data[0] % 3]
    buf = data[1:]
    try:
        decode(buf, v)  # the whole input as one packet: Remaining Length checks
    except MQTTError:
        pass
    try:
        n = frame(buf, len(buf), 1 << 16)
        if not n or n > len(buf):
            return
        p = decode(memoryview(buf)[:n], v)
    except MQTTError:
        return
    if p.type == 1:
        v = p.version  # a CONNECT carries its own protocol level
    try:
        m = encode(_BUF, p, v)
    except LocalProtocolError:
        return  # accepted from a peer, refused to a caller (e.g. a will with QoS but no flag on 3.1)
    q = decode(bytes(_BUF[:m]), v)
    if q != p:
        raise AssertionError("re-encoded packet decodes differently:\n %r\n %r" % (p, q))


# ---------------------------------------------------------------------------------------- session

class _Rng:
    def __init__(self, seed):
        self.x = seed * 2654435761 + 1 & 0xFFFFFFFF

    def next(self, n):
        self.x = (self.x * 1103515245 + 12345) & 0x7FFFFFFF
        return self.x % n


def _check_out(s, decode, frame):
    # Every packet the session wrote is a well-formed client packet.
    out, n, pos = s.out, s.outlen, 0
    while pos < n:
        total = frame(out, n - pos, len(out), pos)
        if not total or pos + total > n:
            raise AssertionError("a partial packet in out: %r" % bytes(out[pos:n]))
        decode(bytes(out[pos:pos + total]), s.version)
        pos += total
    s.outlen = 0


def _invariants(s):
    from tinymqtt.inflight import _FIRST_ON_WIRE, _LAST_ON_WIRE  # (const() names: CPython keeps them)
    f = s.flights
    used = sum(1 for i in range(f.size) if f.state[i])
    wire = sum(1 for i in range(f.size) if _FIRST_ON_WIRE <= f.state[i] <= _LAST_ON_WIRE)
    assert used == f.count and 0 <= f.count <= f.size, (used, f.count)
    assert wire == f.unacked, (wire, f.unacked)
    assert 0 <= s.inlen <= len(s.inbuf) and 0 <= s.outlen <= len(s.out)
    assert 0 not in s._rx_pid  # (packet ids are 1-65535)


def session(data):
    from tinymqtt.errors import RemoteProtocolError, ConnectError, ConnectionLost, LocalProtocolError
    from tinymqtt.packets import frame
    from tinymqtt_cli.server_codec import decode  # (_check_out decodes what we send: the codec's server half)
    from tinymqtt.session import Session
    from tinymqtt.session5 import Session5
    from tinymqtt.app_acks import extended
    if len(data) < 2:
        return
    cfg, rng, stream = data[0], _Rng(data[1]), data[2:]
    v = (3, 4, 5, 5)[cfg & 3]
    opts = dict(client_id="fz", version=v, keepalive=(0, 2)[cfg >> 2 & 1], max_packet_size=512, max_inflight=8,
                receive_maximum=(2, 80)[cfg >> 3 & 1], manual_ack=bool(cfg & 16),
                retry_ms=(0, 50)[cfg >> 6 & 1])
    if v == 5:  # (a 3.x session takes no MQTT 5 option)
        opts["topic_alias_maximum"] = (0, 4)[cfg >> 5 & 1]
    if cfg & 128:
        opts.update(session_expiry=60) if v == 5 else opts.update(clean=False)
    if v == 5 and cfg & 64:
        opts["props"] = {0x15: "M"}  # an Authentication Method: AUTH packets are then allowed
    held = []

    def on_event(ev, value, reason):
        if ev == 3 and opts["manual_ack"] and value.qos:
            held.append(value)  # acked a little later, as an application would

    cls = Session5 if v == 5 else Session
    s = (extended(cls) if opts["manual_ack"] else cls)(on_event=on_event, **opts)  # (as driver.new_session builds)
    s.subscribe([("a/#", 1), ("b", 2)])
    s.publish("a/b", b"one", 1)
    s.publish("a/c", b"two", 2)
    s.publish("q", b"", 0)
    now = 1000
    s.connect(now)
    _check_out(s, decode, frame)
    link_errors = (RemoteProtocolError, ConnectError, ConnectionLost)
    pos = 0
    while pos < len(stream):
        room = len(s.inbuf) - s.inlen
        if not room:
            raise AssertionError("the input buffer is full and nothing moves: wedged")
        k = min(1 + rng.next(48), room)
        piece = stream[pos:pos + k]
        pos += len(piece)
        s.inbuf[s.inlen:s.inlen + len(piece)] = piece
        try:
            more, spins = s.received(len(piece), now), 0
            while more:
                _check_out(s, decode, frame)
                s.pump()
                more = s.received(0, now)
                spins += 1
                if spins > 10000:
                    raise AssertionError("received() keeps asking for room")
            while held and rng.next(2):
                if not s.ack(held.pop(0)):
                    break
            _check_out(s, decode, frame)
            s.pump()
            now += rng.next(700)
            s.tick(now)
            _check_out(s, decode, frame)
            if rng.next(8) == 0:
                try:
                    s.publish("a/d", b"more", rng.next(3))
                except LocalProtocolError:  # the application's own request broke a server limit: its error
                    pass
                _check_out(s, decode, frame)
        except link_errors:
            _check_out(s, decode, frame)  # a DISCONNECT with the reason may be there: the driver writes it
            s.connection_lost()
            del held[:]
            s.connect(now)
            _check_out(s, decode, frame)
        _invariants(s)


# ---------------------------------------------------------------------------------------- seed corpus

def seeds():
    """{target: {name: bytes}}: small valid conversations and packets of every kind to start from."""
    _paths()
    from tinymqtt import props as P
    from tinymqtt_cli.server_codec import Packet, encode  # (every field defaulted; CONNACK, SUBACK... encoded)
    from tinymqtt.packets import (CONNACK, PUBLISH, PUBACK, PUBREC, PUBREL, PUBCOMP, SUBACK,
                                  UNSUBACK, PINGRESP, DISCONNECT, AUTH, CONNECT, SUBSCRIBE, UNSUBSCRIBE, PINGREQ)
    buf = bytearray(4096)

    def enc(v, *ps):
        out = b""
        for p in ps:
            out += bytes(buf[:encode(buf, p, v)])
        return out

    up = [("k", "v")]
    dec, ses = {}, {}
    for v in (3, 4, 5):
        five = v == 5
        pr = (lambda d: d) if five else (lambda d: None)
        packets = {
            "connect": Packet(CONNECT, client_id="c", keepalive=5, username="u", password=b"p",
                              will=Packet(PUBLISH, topic="w", payload=b"x", qos=1, props=pr({0x18: 1})),
                              props=pr({0x11: 9, 0x21: 4, 0x15: "M"})),
            "connack": Packet(CONNACK, session_present=True,
                              props=pr({0x21: 3, 0x22: 2, 0x24: 1, 0x27: 300, 0x13: 2, 0x12: "id", 0x26: up})),
            "publish": Packet(PUBLISH, topic="a/b", payload=b"hi", qos=2, pid=7, props=pr({0x23: 1, 0x0B: [3]})),
            "puback": Packet(PUBACK, pid=1, reason=0x10 if five else 0, props=pr({0x1F: "r"})),
            "pubrec": Packet(PUBREC, pid=2),
            "pubrel": Packet(PUBREL, pid=7),
            "pubcomp": Packet(PUBCOMP, pid=2),
            "subscribe": Packet(SUBSCRIBE, pid=3, topics=[("a/+", 1)]),
            "suback": Packet(SUBACK, pid=3, codes=[1, 2] if v > 3 else [0, 1]),
            "unsubscribe": Packet(UNSUBSCRIBE, pid=4, topics=["a"]),
            "unsuback": Packet(UNSUBACK, pid=4, codes=[0] if five else None),
            "pingreq": Packet(PINGREQ),
            "pingresp": Packet(PINGRESP),
            "disconnect": Packet(DISCONNECT, reason=0x8B if five else 0, props=pr({0x1F: "bye"})),
        }
        if five:
            packets["auth"] = Packet(AUTH, reason=0x18, props={0x15: "M", 0x16: b"d"})
        for name, p in packets.items():
            dec["v%d-%s" % (v, name)] = bytes([v - 3]) + enc(v, p)
        # Sessions: cfg byte picks the level (low 2 bits); 0xC0 adds a kept session and an auth method.
        cfg = (v - 3) | 0xC0 | 0x20 | 0x08
        connack = Packet(CONNACK, props=pr({0x22: 2, 0x21: 5}))
        ses["v%d-flows" % v] = bytes([cfg, 1]) + enc(
            v, connack, Packet(SUBACK, pid=3, codes=[1, 2] if v > 3 else [0, 1]),
            Packet(PUBACK, pid=1), Packet(PUBREC, pid=2), Packet(PUBCOMP, pid=2),
            Packet(PUBLISH, topic="a/x", payload=b"1", qos=1, pid=5),
            Packet(PUBLISH, topic="b", payload=b"2", qos=2, pid=6), Packet(PUBREL, pid=6), Packet(PINGRESP))
        ses["v%d-resume" % v] = bytes([cfg, 2]) + enc(
            v, Packet(CONNACK, session_present=v > 3), Packet(PUBREC, pid=2), Packet(PUBLISH, topic="b", payload=b"x",
                                                                                     qos=2, pid=9, dup=True))
        if five:
            ses["v5-aliases"] = bytes([cfg, 3]) + enc(
                v, connack, Packet(PUBLISH, topic="a/y", payload=b"1", props={0x23: 1}),
                Packet(PUBLISH, topic="", payload=b"2", props={0x23: 1}), Packet(DISCONNECT, reason=0x8B))
            ses["v5-auth"] = bytes([cfg | 0x40, 4]) + enc(
                v, Packet(AUTH, reason=0x18, props={0x15: "M", 0x16: b"c"}), connack,
                Packet(AUTH, reason=0x00, props={0x15: "M"}))
            ses["v5-refused"] = bytes([cfg, 5]) + enc(v, Packet(CONNACK, reason=0x87, props={0x1F: "no"}))
    return {"decoder": dec, "session": ses}


def write_seeds():
    for target, items in seeds().items():
        d = os.path.join(CORPUS, target)
        os.makedirs(d, exist_ok=True)
        for name, data in items.items():
            with open(os.path.join(d, name), "wb") as f:
                f.write(data)
    return CORPUS
