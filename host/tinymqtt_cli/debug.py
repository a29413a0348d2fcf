# `-d` for the CLI: a port wrapper that prints each packet sent and received as mosquitto_pub/sub -d do
# ("Client ID sending PUBLISH (d0, q1, r0, m1, 'a/b', ... (5 bytes))"), on stderr so stdout stays the
# messages. CPython only. Credentials are never printed: a CONNECT line names no field of the packet.
import sys

from tinymqtt.errors import MQTTError
from tinymqtt.packets import (frame, NAMES, CONNECT, CONNACK, PUBLISH, PUBACK, PUBCOMP, SUBSCRIBE, SUBACK, UNSUBSCRIBE,
                              UNSUBACK, DISCONNECT)
from tinymqtt_cli.server_codec import decode  # decoding what we send (SUBSCRIBE, UNSUBSCRIBE) is the server half


def describe(p):
    """The text after the packet's name, as mosquitto prints it."""
    t = p.type
    if t == PUBLISH:
        return " (d%d, q%d, r%d, m%d, '%s', ... (%d bytes))" % (p.dup, p.qos, p.retain, p.pid, p.topic or "",
                                                               len(p.payload))
    if t == CONNACK:
        return " (%d)" % p.reason
    if PUBACK <= t <= PUBCOMP:
        return " (Mid: %d, RC:%d)" % (p.pid, p.reason)
    if t == SUBSCRIBE:
        return "".join(" (Mid: %d, Topic: %s, QoS: %d, Options: 0x%02x)" % (p.pid, f, o & 3, o & ~3)
                       for f, o in p.topics)
    if t == UNSUBSCRIBE:
        return " (Mid: %d, Topics: %s)" % (p.pid, ", ".join(p.topics))
    if t in (SUBACK, UNSUBACK):
        return " (Mid: %d, Codes: %s)" % (p.pid, ", ".join("0x%02x" % c for c in p.codes or ()))
    if t == DISCONNECT and p.reason:
        return " (%d)" % p.reason
    return ""


class DebugPort:
    """Wraps a port: its transports log every whole packet each way. client_id() gives the current id."""

    def __init__(self, port, version, client_id, out=sys.stderr):
        self.port, self.version, self.client_id, self.out = port, version, client_id, out

    def network_up(self, *args):
        return self.port.network_up(*args)

    def ticks_ms(self):
        return self.port.ticks_ms()

    def open(self, host, port, tls=None):
        return _Transport(self.port.open(host, port, tls), self)

    def log(self, verb, data):
        # data: the bytes not yet logged; returns how many of them formed whole packets.
        pos = 0
        while pos < len(data):
            try:
                n = frame(data, len(data) - pos, 1 << 28, pos)
            except MQTTError:
                return len(data)
            if not n or pos + n > len(data):
                break
            try:
                p = decode(memoryview(data)[pos:pos + n], self.version)
                text = NAMES.split()[p.type] + ("" if p.type == CONNECT else describe(p))
            except MQTTError as e:
                text = "a malformed packet (%s)" % e
            print("Client %s %s %s" % (self.client_id() or "(null)", verb, text), file=self.out, flush=True)
            pos += n
        return pos


class _Transport:
    def __init__(self, inner, port):
        self.inner, self.port = inner, port
        self.rx = bytearray()

    def write(self, buf, n):
        self.inner.write(buf, n)
        self.port.log("sending", bytes(memoryview(buf)[:n]))  # the client writes whole packets

    def readinto(self, buf, off, timeout_ms):
        n = self.inner.readinto(buf, off, timeout_ms)
        if n:
            self.rx += memoryview(buf)[off:off + n]
            del self.rx[:self.port.log("received", self.rx)]
        return n

    def close(self):
        self.inner.close()
