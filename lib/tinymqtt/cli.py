# `python -m tinymqtt pub|sub ...`: mosquitto_pub / mosquitto_sub with the same flag names, on the
# blocking client (CPython). Credentials are never printed: not in errors, not in debug output.
import argparse
import sys
import time

from tinymqtt.client import Client
from tinymqtt.errors import MQTTError
from tinymqtt.packets import Packet, PUBLISH

_VERSIONS = {"31": 3, "mqttv31": 3, "311": 4, "mqttv311": 4, "5": 5, "mqttv5": 5}


def _common(ap):
    ap.add_argument("-h", "--host", default="localhost")
    ap.add_argument("-p", "--port", type=int, default=0)
    ap.add_argument("-i", "--id", default="")
    ap.add_argument("-k", "--keepalive", type=int, default=60)
    ap.add_argument("-V", "--protocol-version", default="311", choices=sorted(_VERSIONS))
    ap.add_argument("-q", "--qos", type=int, default=0, choices=(0, 1, 2))
    ap.add_argument("-c", "--disable-clean-session", action="store_true")
    ap.add_argument("-x", "--session-expiry", type=int, default=0)
    ap.add_argument("-u", "--username")
    ap.add_argument("-P", "--pw")
    ap.add_argument("--will-topic")
    ap.add_argument("--will-payload", default="")
    ap.add_argument("--will-qos", type=int, default=0, choices=(0, 1, 2))
    ap.add_argument("--will-retain", action="store_true")
    ap.add_argument("--cafile")
    ap.add_argument("--cert")
    ap.add_argument("--key")
    ap.add_argument("-d", "--debug", action="store_true")
    ap.add_argument("--help", action="help")


def _client(a, **extra):
    v = _VERSIONS[a.protocol_version]
    will = None
    if a.will_topic:
        will = Packet(PUBLISH, topic=a.will_topic, payload=a.will_payload.encode(), qos=a.will_qos,
                      retain=a.will_retain)
    tls = {"cafile": a.cafile, "certfile": a.cert, "keyfile": a.key} if a.cafile or a.cert else None
    port = a.port or (8883 if tls else 1883)
    cid = a.id or ("" if v == 5 else "tinymqtt-%d" % (time.time_ns() % 10 ** 9))
    return Client(a.host, port, tls=tls, reconnect=False, client_id=cid, version=v, keepalive=a.keepalive,
                  clean=not a.disable_clean_session, session_expiry=a.session_expiry, will=will,
                  username=a.username, password=a.pw.encode() if a.pw is not None else None,
                  max_packet_size=1 << 20, **extra)


def _payloads(a):
    if a.null_message:
        return [b""]
    if a.file:
        with open(a.file, "rb") as f:
            return [f.read()]
    if a.stdin_file:
        return [sys.stdin.buffer.read()]
    if a.stdin_line:
        return [line.rstrip(b"\n") for line in sys.stdin.buffer]
    if a.message is None:
        raise SystemExit("Error: give a message with -m, -f, -s, -l or -n")
    return [a.message.encode()]


def pub(argv):
    ap = argparse.ArgumentParser(prog="tinymqtt pub", add_help=False, description="Publish like mosquitto_pub.")
    _common(ap)
    ap.add_argument("-t", "--topic", required=True)
    ap.add_argument("-m", "--message")
    ap.add_argument("-f", "--file")
    ap.add_argument("-s", "--stdin-file", action="store_true")
    ap.add_argument("-l", "--stdin-line", action="store_true")
    ap.add_argument("-n", "--null-message", action="store_true")
    ap.add_argument("-r", "--retain", action="store_true")
    ap.add_argument("-N", "--repeat", type=int, default=1, help="publish the message this many times")
    ap.add_argument("--repeat-delay", type=float, default=0.0, help="seconds between repeats")
    ap.add_argument("--inflight", type=int, default=256, help="QoS 1/2 messages in flight at most")
    a = ap.parse_args(argv)
    messages = _payloads(a)
    c = _client(a, batch=a.repeat_delay == 0, max_inflight=a.inflight, out_size=1 << 20)
    c.connect()
    start = time.perf_counter()
    sent = 0
    for _ in range(a.repeat):
        for m in messages:
            c.publish(a.topic, m, a.qos, a.retain)
            sent += 1
        if a.repeat_delay:
            time.sleep(a.repeat_delay)
    c.flush()
    while c.session.flights.count and c.is_connected():
        c.loop(0.5)
    elapsed = time.perf_counter() - start
    c.disconnect()
    if a.debug or a.repeat > 1:
        print("published %d messages at QoS %d in %.3f s (%.0f msgs/s)" % (sent, a.qos, elapsed,
              sent / elapsed if elapsed else 0), file=sys.stderr)
    return 0


def sub(argv):
    ap = argparse.ArgumentParser(prog="tinymqtt sub", add_help=False, description="Subscribe like mosquitto_sub.")
    _common(ap)
    ap.add_argument("-t", "--topic", action="append", required=True)
    ap.add_argument("-C", "--count", type=int, default=0, help="exit after this many messages")
    ap.add_argument("-W", "--timeout", type=float, default=0, help="exit after this many seconds")
    ap.add_argument("-v", "--verbose", action="store_true", help="print the topic before each payload")
    ap.add_argument("-R", "--no-retained", action="store_true", help="do not print retained messages")
    ap.add_argument("--retained-only", action="store_true")
    ap.add_argument("--quiet-count", action="store_true", help="print only the number of messages at the end")
    a = ap.parse_args(argv)
    c = _client(a, receive_maximum=1024, max_inflight=4)
    got = [0]

    def on_message(m):
        if (a.no_retained and m.retain) or (a.retained_only and not m.retain):
            return
        got[0] += 1
        if not a.quiet_count:
            line = bytes(m.payload)
            out = sys.stdout.buffer
            out.write((m.topic + " ").encode() + line + b"\n" if a.verbose else line + b"\n")
            out.flush()

    c.on_message = on_message
    c.connect()
    c.subscribe([(t, a.qos) for t in a.topic])
    start = time.monotonic()
    while not a.count or got[0] < a.count:
        if a.timeout and time.monotonic() - start > a.timeout:
            break
        if a.retained_only and got[0] and time.monotonic() - start > 0.5:
            break
        c.loop(0.2)
        if not c.transport:
            raise MQTTError(0x80, "connection lost: %s" % c.last_error)
    c.disconnect()
    if a.quiet_count:
        print(got[0])
    return 0


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] not in ("pub", "sub"):
        print("usage: python -m tinymqtt pub|sub [options]  (flags as mosquitto_pub / mosquitto_sub)")
        return 2
    try:
        return (pub if argv[0] == "pub" else sub)(argv[1:])
    except MQTTError as e:
        print("Error: %s" % e, file=sys.stderr)
        return 1
    except OSError as e:
        print("Error: %s" % e, file=sys.stderr)
        return 1
