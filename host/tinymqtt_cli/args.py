# The options `tinymqtt pub` and `tinymqtt sub` share (mosquitto_pub / mosquitto_sub names) and what they
# become: the -L URL, -D properties, the TLS context and the Client. A command line mosquitto refuses is refused
# here with mosquitto's words (client/client_shared.c, 2.0.11) in one line, exit 1. CPython only.
import argparse
import os
import re
import ssl
from urllib.parse import unquote, urlsplit

from tinymqtt import props as P
from tinymqtt.client import Client
from tinymqtt.errors import ConnectError, ConnectionLost, LocalProtocolError, MQTTError
from tinymqtt.packets import Packet, PUBLISH
from tinymqtt.topic import validate_filter, validate_name
from tinymqtt_cli.formats import check_format

VERSIONS = {"31": 3, "mqttv31": 3, "311": 4, "mqttv311": 4, "5": 5, "mqttv5": 5}
NEVER_EXPIRES = 0xFFFFFFFF

# -D command identifier value: mosquitto's property names, with the commands each may go with.
PROPERTIES = {
    "payload-format-indicator": (P.PAYLOAD_FORMAT_INDICATOR, int, ("publish", "will")),
    "message-expiry-interval": (P.MESSAGE_EXPIRY_INTERVAL, int, ("publish", "will")),
    "content-type": (P.CONTENT_TYPE, str, ("publish", "will")),
    "response-topic": (P.RESPONSE_TOPIC, str, ("publish", "will")),
    "correlation-data": (P.CORRELATION_DATA, str.encode, ("publish", "will")),
    "subscription-identifier": (P.SUBSCRIPTION_IDENTIFIER, int, ("subscribe",)),
    "session-expiry-interval": (P.SESSION_EXPIRY_INTERVAL, int, ("connect", "disconnect")),
    "authentication-method": (P.AUTHENTICATION_METHOD, str, ("connect",)),
    "authentication-data": (P.AUTHENTICATION_DATA, str.encode, ("connect",)),
    "request-problem-information": (P.REQUEST_PROBLEM_INFORMATION, int, ("connect",)),
    "request-response-information": (P.REQUEST_RESPONSE_INFORMATION, int, ("connect",)),
    "will-delay-interval": (P.WILL_DELAY_INTERVAL, int, ("will",)),
    "receive-maximum": (P.RECEIVE_MAXIMUM, int, ("connect",)),
    "topic-alias-maximum": (P.TOPIC_ALIAS_MAXIMUM, int, ("connect",)),
    "maximum-packet-size": (P.MAXIMUM_PACKET_SIZE, int, ("connect",)),
    "user-property": (P.USER_PROPERTY, None, ("connect", "publish", "subscribe", "unsubscribe", "disconnect", "will")),
}
_V3_CODES = {0x84: 1, 0x85: 2, 0x88: 3, 0x86: 4, 0x87: 5}  # a 3.x CONNACK return code, from our v5 reason code
TLS_VERSIONS = {"tlsv1.3": "TLSv1_3", "tlsv1.2": "TLSv1_2", "tlsv1.1": "TLSv1_1"}


class UsageError(Exception):
    """A command line that cannot work: main() prints "Error: " and the text (a text that starts with "Error", as
    mosquitto's 'Error loading input file', alone) and exits 1, as mosquitto does."""


def atoi(v):
    """C's atoi(), as mosquitto reads a number: the leading digits (0 without any)."""
    m = re.match(r"\s*([+-]?\d+)", v)
    return int(m.group(1)) if m else 0


def checked(test, text):
    # an argparse type: the value through test(), or UsageError(text % the value as atoi() reads it)
    def check(v):
        try:
            out = test(v)
        except ValueError:
            out = None
        if out is None:
            raise UsageError(text % atoi(v) if "%d" in text else text)
        return out
    return check


def in_range(lo, hi):
    return lambda v: atoi(v) if lo <= atoi(v) <= hi else None


def seconds(v):  # -W: mosquitto's whole seconds, and fractions of one too
    return float(v) if float(v) > 0 else None


def _version(v):
    if v not in VERSIONS:
        raise UsageError("Invalid protocol version argument given.")
    return v


# what mosquitto names the value of an option given without one ("-p argument given but no port specified.")
_VALUES = {"-h": "host", "-p": "port", "-t": "topic", "-m": "message", "-f": "file", "-C": "count",
           "-W": "timeout", "-k": "keepalive", "-q": "QoS", "-i": "id", "-I": "id prefix", "-u": "username",
           "-F": "format", "-T": "topic filter", "-U": "unsubscribe topic", "-L": "URL", "-P": "password",
           "--will-topic": "will topic", "--will-qos": "will QoS", "--will-payload": "will payload",
           "--cafile": "file", "--capath": "directory", "--cert": "file", "--key": "file", "-V": "version",
           "-x": "session expiry interval", "-D": "property"}


class _Parser(argparse.ArgumentParser):
    """argparse, whose complaints become one mosquitto-worded line (UsageError) instead of its usage and exit 2."""

    def error(self, message):
        m = re.match(r"argument ([^:/ ]+)(?:/\S+)?: expected (?:one|at least one) argument", message)
        if m:
            raise UsageError("%s argument given but no %s specified." % (m.group(1), _VALUES.get(m.group(1), "value")))
        m = re.match(r"unrecognized arguments: (\S+)", message)
        if m:
            raise UsageError("Unknown option '%s'." % m.group(1))
        raise UsageError(message[:1].upper() + message[1:] + ".")


def parser(prog, description):
    ap = _Parser(prog=prog, add_help=False, description=description)
    ap.add_argument("-h", "--host")
    ap.add_argument("-p", "--port", type=checked(in_range(1, 65535), "Invalid port given: %d"))
    ap.add_argument("-L", "--url", help="mqtt(s)://[user[:password]@]host[:port]/topic")
    ap.add_argument("-i", "--id")
    ap.add_argument("-I", "--id-prefix", help="the client id is this prefix and the process id")
    ap.add_argument("-k", "--keepalive", default=60, help="5-65535 seconds, as mosquitto's (default 60)",
                    type=checked(in_range(5, 65535),
                                  "Invalid keepalive given, it must be between 5 and 65535 inclusive."))
    ap.add_argument("-V", "--protocol-version", default="311", type=_version, metavar="{31,311,5}")
    ap.add_argument("-q", "--qos", default=0, type=checked(in_range(0, 2), "Invalid QoS given: %d"))
    ap.add_argument("-c", "--disable-clean-session", action="store_true",
                    help="keep the session; reconnect with backoff after a lost connection and resume it")
    ap.add_argument("-x", "--session-expiry", help="v5 Session Expiry Interval (-1 or 4294967295: never)")
    ap.add_argument("-u", "--username")
    ap.add_argument("-P", "--pw")
    ap.add_argument("-D", "--property", nargs="+", action="append", default=[], metavar="ARG",
                    help="-D command identifier value (v5), e.g. -D publish user-property key value")
    ap.add_argument("--will-topic")
    ap.add_argument("--will-payload", default="")
    ap.add_argument("--will-qos", default=0, type=checked(in_range(0, 2), "Invalid will QoS %d."))
    ap.add_argument("--will-retain", action="store_true")
    ap.add_argument("--cafile")
    ap.add_argument("--capath")
    ap.add_argument("--cert")
    ap.add_argument("--key")
    ap.add_argument("--insecure", action="store_true", help="do not check the server certificate's host name")
    ap.add_argument("--tls-version", choices=sorted(TLS_VERSIONS))
    ap.add_argument("-d", "--debug", action="store_true", help="print each packet sent and received (stderr)")
    ap.add_argument("--help", action="help")
    return ap


def _valid(check, topic, text):
    # None, or UsageError(text) naming the topic when check (topic.py's) refuses it
    try:
        check(topic)
    except (LocalProtocolError, TypeError, ValueError):
        raise UsageError(text % topic) from None


def finish(a, topic_required=True):
    """Applies -L, checks what argparse cannot (as mosquitto checks it), and returns the options with version,
    props and tls set."""
    if a.id and a.id_prefix:
        raise UsageError("-i and -I argument cannot be used together.")
    for t in getattr(a, "filter_out", ()):
        _valid(validate_filter, t, "Invalid filter topic '%s', are all '+' and '#' wildcards correct?")
    for t in getattr(a, "unsubscribe", ()):
        _valid(validate_filter, t, "Invalid unsubscribe topic '%s', are all '+' and '#' wildcards correct?")
    if a.will_topic is not None:
        _valid(validate_name, a.will_topic, "Invalid will topic '%s', does it contain '+' or '#'?")
    elif a.will_payload or a.will_retain:
        raise UsageError("Will %s given, but no will topic given." % ("payload" if a.will_payload else "retain"))
    if getattr(a, "format", None) is not None and check_format(a.format):
        raise UsageError(check_format(a.format))
    a.tls = bool(a.cafile or a.capath or a.cert or a.insecure or a.tls_version)
    if a.url:
        u = urlsplit(a.url)
        if u.scheme not in ("mqtt", "mqtts") or not u.hostname:
            raise UsageError("-L needs mqtt(s)://[user[:password]@]host[:port]/topic, got a %r URL" % u.scheme)
        a.tls = a.tls or u.scheme == "mqtts"
        a.host = u.hostname
        a.port = u.port or a.port
        a.username = unquote(u.username) if u.username is not None else a.username
        a.pw = unquote(u.password) if u.password is not None else a.pw
        t = unquote(u.path[1:])
        if t:
            if isinstance(a.topic, list):
                a.topic.append(t)
            else:
                a.topic = t
    a.host = a.host or "localhost"
    a.tls = a.tls or a.port == 8883
    a.port = a.port or (8883 if a.tls else 1883)
    sub = isinstance(a.topic, list)
    for t in a.topic if sub else [a.topic] if a.topic is not None else []:
        if sub:
            _valid(validate_filter, t, "Invalid subscription topic '%s', are all '+' and '#' wildcards correct?")
        else:
            _valid(validate_name, t, "Invalid publish topic '%s', does it contain '+' or '#'?")
    if topic_required and not a.topic:
        raise UsageError("You must specify a topic to subscribe to." if sub else
                         "Both topic and message must be supplied.")
    a.version = VERSIONS[a.protocol_version]
    a.props = properties(a.property, a.version)
    if a.session_expiry is not None:
        x = a.session_expiry
        if x in ("-1", "\u221e"):
            x = str(NEVER_EXPIRES)
        if not x.isdigit() or int(x) > NEVER_EXPIRES:
            raise UsageError("-x takes 0..4294967295 seconds, or -1 for a session that never expires; got %r" % x)
        a.session_expiry = int(x)
    elif a.disable_clean_session:
        a.session_expiry = NEVER_EXPIRES  # -c asks for the session to be kept: v5 must say for how long
    if a.id_prefix and not a.id:
        a.id = "%s%d" % (a.id_prefix, os.getpid())
    if a.disable_clean_session and not a.id:
        raise UsageError("You must provide a client id if you are using the -c option.")
    return a


def properties(items, version):
    """-D arguments -> {command: {property id: value}}."""
    out = {}
    for item in items:
        if len(item) < 3:
            raise UsageError("-D needs a command, a property and a value: %s" % " ".join(item))
        cmd, name = item[0].lower(), item[1].lower()
        if name not in PROPERTIES:
            raise UsageError("-D: unknown property %r" % name)
        pid, conv, commands = PROPERTIES[name]
        if cmd not in commands:
            raise UsageError("-D: %s is not allowed with %s" % (name, cmd))
        if version != 5:
            raise UsageError("-D: properties need MQTT 5 (-V 5)")
        props = out.setdefault(cmd, {})
        if pid == P.USER_PROPERTY:
            if len(item) != 4:
                raise UsageError("-D %s user-property needs a key and a value" % cmd)
            props.setdefault(pid, []).append((item[2], item[3]))
        else:
            if len(item) != 3:
                raise UsageError("-D %s %s takes one value" % (cmd, name))
            try:
                props[pid] = conv(item[2])
            except ValueError:
                raise UsageError("-D %s %s: %r is not a number" % (cmd, name, item[2])) from None
    return out


def tls_context(a):
    if not a.tls:
        return None
    ctx = ssl.create_default_context(cafile=a.cafile, capath=a.capath)  # verifies the chain and the host name
    if a.cert:
        ctx.load_cert_chain(a.cert, a.key)
    if a.insecure:
        ctx.check_hostname = False  # as mosquitto's --insecure: the chain is still verified
    if a.tls_version:
        v = getattr(ssl.TLSVersion, TLS_VERSIONS[a.tls_version])
        ctx.minimum_version = ctx.maximum_version = v
    return ctx


def client(a, **extra):
    """The blocking Client these options describe. -c: a kept session and reconnects with backoff; -d: every
    packet printed."""
    v = a.version
    made = []
    port_impl = None
    if a.debug:
        from tinymqtt_cli.debug import DebugPort
        import tinymqtt_port  # (the port a Client takes by default; its contract: tinymqtt/driver.py)
        port_impl = DebugPort(tinymqtt_port, v, lambda: made[0].session.client_id if made else a.id)
    will = None
    if a.will_topic:
        will = Packet(PUBLISH, topic=a.will_topic, payload=a.will_payload.encode(), qos=a.will_qos,
                      retain=a.will_retain, props=a.props.get("will"))
    cid = a.id or ("" if v == 5 else "tinymqtt-%d" % os.getpid())
    connect_props = dict(a.props.get("connect", {}))
    if v == 5:  # (a 3.x session takes no MQTT 5 option)
        extra["session_expiry"] = connect_props.pop(P.SESSION_EXPIRY_INTERVAL, a.session_expiry or 0)
        extra["props"] = connect_props or None
    try:
        c = Client(a.host, a.port, tls=tls_context(a), reconnect=a.disable_clean_session, backoff_min_ms=200,
                   backoff_max_ms=5000, port_impl=port_impl, client_id=cid, version=v, keepalive=a.keepalive,
                   clean=not a.disable_clean_session, will=will, username=a.username,
                   password=a.pw.encode() if a.pw is not None else None,
                   max_packet_size=1 << 20, **extra)
    except (TypeError, ValueError) as e:
        raise UsageError(str(e)) from None
    made.append(c)
    return c


def connect(c):
    """c.connect(); a refusal carries mosquitto's exit status: the CONNACK return code (3.x) or reason code."""
    try:
        return c.connect()
    except ConnectError as e:
        raise _refused(c, e) from None


def check_link(c, what):
    """Raises when the connection is gone for good: lost without -c, or refused (also on a -c reconnect)."""
    e = c.last_error
    if c.transport or e is None:
        return
    if isinstance(e, ConnectError):
        raise _refused(c, e)
    if not c.reconnect:
        raise lost(c, what)


def lost(c, what):
    """The error for a connection that ended (without -c) before the command's work was done."""
    e = c.last_error
    why = e.msg if isinstance(e, MQTTError) else str(e)
    return ConnectionLost(e.reason if isinstance(e, MQTTError) else 0x80, "connection lost %s: %s" % (what, why))


def _refused(c, e):
    e.exit_code = e.reason if c.session.version == 5 else _V3_CODES.get(e.reason, 1)
    return e
