# How `tinymqtt sub` prints a message, byte for byte as mosquitto_sub 2.0.11 does (client/sub_client_output.c):
# the payload alone, `-v` (topic and payload; an empty payload is `topic (null)`, and without -v nothing at all), or
# a `-F` format: %t %p %q %r %m %l %x %X %I %U %j %J %A %C %D %E %F %P %R %S %%, @strftime, \escapes, the `-`
# and `0` flags, widths and precisions, with mosquitto's quirks kept (a width truncates %p; %q and %r take none).
# check_format() refuses what mosquitto refuses, with its words. %j and %J are cJSON's output: keys in mosquitto's
# order, strings escaped as cJSON escapes them (bytes above 127 as they are), a payload's JSON reprinted compactly.
# CPython only.
import json
import math
import os
import sys
import time

from tinymqtt import props as P

_ESCAPES = {ord("\\"): b"\\", ord("0"): b"\0", ord("a"): b"\a", ord("e"): b"\x1b", ord("n"): b"\n", ord("r"): b"\r",
            ord("t"): b"\t", ord("v"): b"\v"}
_SPECIFIERS = b"%ACDEFIlmPpqRSrtjJUxX"
# the MQTT 5 properties %j and %J print, by mosquitto's names (mosquitto_property_identifier_to_string)
_JSON_PROPS = {P.PAYLOAD_FORMAT_INDICATOR: "payload-format-indicator", P.MESSAGE_EXPIRY_INTERVAL:
               "message-expiry-interval", P.CONTENT_TYPE: "content-type", P.RESPONSE_TOPIC: "response-topic",
               P.CORRELATION_DATA: "correlation-data", P.SUBSCRIPTION_IDENTIFIER: "subscription-identifier",
               P.TOPIC_ALIAS: "topic-alias"}


def check_format(fmt):
    """None if mosquitto_sub accepts -F fmt, else its error text (client_shared.c check_format)."""
    s = _cstr(fmt)
    n, i = len(s), 0
    while i < n:
        c = s[i]
        if c == 0x25:  # %
            if i == n - 1:
                return "Incomplete format specifier."
            if s[i + 1] in b"0-":
                i += 1
                if i == n - 1:
                    return "Incomplete format specifier."
            while s[i + 1:i + 2].isdigit():
                i += 1
                if i == n - 1:
                    return "Incomplete format specifier."
            if s[i + 1] == 0x2E:  # .
                i += 1
                if i == n - 1:
                    return "Incomplete format specifier."
                while s[i + 1:i + 2].isdigit():
                    i += 1
                    if i == n - 1:
                        return "Incomplete format specifier."
            if s[i + 1] not in _SPECIFIERS:
                return "Invalid format specifier '%s'." % chr(s[i + 1])
            i += 1
        elif c == 0x40:  # @
            if i == n - 1:
                return "Incomplete format specifier."
            i += 1
        elif c == 0x5C:  # backslash
            if i == n - 1:
                return "Incomplete escape specifier."
            if s[i + 1] not in _ESCAPES:
                return "Invalid escape specifier '%s'." % chr(s[i + 1])
            i += 1
        i += 1
    return None


def _cstr(b):
    # What C sees of a string or bytes: bytes, up to the first NUL.
    if isinstance(b, str):
        b = os.fsencode(b)
    b = bytes(b)
    k = b.find(b"\0")
    return b if k < 0 else b[:k]


def _int(v, align, pad, width):  # formatted_print_int
    s = b"%d" % v
    if not width:
        return s
    if align:
        return s.ljust(width)
    return s.rjust(width, b"0" if pad == b"0" else b" ")


def _str(v, align, width, precision):  # formatted_print_str: printf's %-*.*s
    if precision >= 0:
        v = v[:precision]
    return v.ljust(width) if align else v.rjust(width)


def _payload(pl, hexa, align, pad, width):  # write_payload, its quirks kept
    n = len(pl)
    if width > 0:
        n = min(n, width)
        if hexa:
            n //= 2
            padlen = width - n * 2
        else:
            padlen = width - n
    else:
        padlen = width - n
    body = pl[:n]
    if hexa:
        body = body.hex().encode()
        if hexa == 2:
            body = body.upper()
    out = b""
    if not align and padlen > 0:
        out += pad * padlen
    out += body
    if align:
        out += b" " * abs(padlen)  # printf("%*s", padlen, ""): a negative width pads as much, to the left
    return out


def _prop(m, pid):
    v = (m.props or {}).get(pid)
    if isinstance(v, list):  # (a Subscription Identifier may repeat: mosquitto reads the first)
        v = v[0] if v else None
    return v


def _now(now):
    # (seconds, nanoseconds) of the time now, or of `now` (seconds, for tests)
    ns = time.time_ns() if now is None else int(round(now * 1e9))
    return ns // 1000000000, ns % 1000000000


# ---------------------------------------------------------------- JSON, as cJSON writes it

def _jstr(b):
    """A JSON string as cJSON prints it: b as a C string (to its first NUL), `"` `\\` and control bytes escaped,
    every other byte (UTF-8 or not) as it is."""
    out = bytearray(b'"')
    for c in _cstr(b):
        if c == 0x22:
            out += b'\\"'
        elif c == 0x5C:
            out += b"\\\\"
        elif c < 32:
            out += {8: b"\\b", 12: b"\\f", 10: b"\\n", 13: b"\\r", 9: b"\\t"}.get(c) or b"\\u%04x" % c
        else:
            out.append(c)
    return bytes(out + b'"')


def _jnum(v):
    """A number as cJSON prints it (libcjson1 1.7.15, which mosquitto_sub 2.0.11 uses here; every JSON number is a
    double there): %1.15g, or %1.17g when %1.15g does not read back as the same double (-0 stays -0; 1e400 is
    null)."""
    d = float(v)
    if math.isnan(d) or math.isinf(d):
        return b"null"
    s = b"%1.15g" % d
    return s if float(s) == d else b"%1.17g" % d


class _Pairs(list):
    """A JSON object as cJSON keeps it: its (key, value) pairs in order, repeated keys too."""


def _jvalue(v):
    if v is None:
        return b"null"
    if v is True or v is False:
        return b"true" if v else b"false"
    if isinstance(v, (int, float)):
        return _jnum(v)
    if isinstance(v, str):
        return _jstr(v.encode("utf-8", "surrogateescape"))
    if isinstance(v, _Pairs):
        return b"{" + b",".join(_jstr(k.encode("utf-8", "surrogateescape")) + b":" + _jvalue(x) for k, x in v) + b"}"
    return b"[" + b",".join(_jvalue(x) for x in v) + b"]"


def _reject(name):
    raise ValueError(name)  # NaN, Infinity: Python's json takes them, cJSON does not


def _parse(payload):
    """The payload's JSON value (cJSON_ParseWithOpts, the whole payload), or raises ValueError."""
    if b"\0" in payload:
        raise ValueError("a NUL byte")
    return json.loads(payload.decode("utf-8", "surrogateescape"), object_pairs_hook=_Pairs, parse_int=float,
                      parse_constant=_reject)  # (parse_int: a double, as cJSON's strtod() reads it; -0 keeps its sign)


def _json(m, sec, ns, raw):
    """json_print(): the message as one JSON object; raw (%J): the payload's own JSON, else a string. Raises
    ValueError when raw and the payload is not JSON."""
    pl = bytes(m.payload)
    tst = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(sec)) + ".%06dZ" % (ns // 1000)
    tst += time.strftime("%z", time.localtime(sec))
    out = [b'"tst":' + _jstr(tst.encode()), b'"topic":' + _jstr(m.topic.encode()), b'"qos":%d' % m.qos,
           b'"retain":%d' % bool(m.retain), b'"payloadlen":%d' % len(pl)]
    if m.qos:
        out.append(b'"mid":%d' % m.pid)
    if m.props:
        props = []
        for pid, v in m.props.items():
            if pid == P.USER_PROPERTY:
                users = b",".join(_jstr(k.encode()) + b":" + _jstr(x.encode()) for k, x in v)
                props.append(b'"user-properties":{' + users + b"}")
            elif pid in _JSON_PROPS:
                for x in (v if isinstance(v, list) else [v]):  # (a Subscription Identifier may repeat)
                    if isinstance(x, int):
                        x = _jnum(x)
                    else:  # a string, or Correlation Data (binary, printed as a string)
                        x = _jstr(x.encode() if isinstance(x, str) else bytes(x))
                    props.append(_jstr(_JSON_PROPS[pid].encode()) + b":" + x)
        out.append(b'"properties":{' + b",".join(props) + b"}")
    if not pl:
        body = b"null"  # (libmosquitto hands an empty payload over as NULL)
    elif raw:
        body = _jvalue(_parse(pl))
    else:
        body = _jstr(pl)
    out.append(b'"payload":' + body)
    return b"{" + b",".join(out) + b"}"


# ---------------------------------------------------------------- -F and the plain forms

def format_message(fmt, m, client_id="", now=None, err=None):
    """The bytes -F fmt makes of message m, without the end of line mosquitto adds after it (formatted_print). err
    gets an error line (a %J payload that is not JSON: that parameter prints nothing, as mosquitto's)."""
    s = _cstr(fmt)
    n = len(s)
    out = bytearray()
    sec, ns = _now(now)
    i = 0
    while i < n:
        c = s[i]
        if c == 0x25 and i < n - 1:  # %
            align, pad, width, precision = False, b" ", 0, -1
            i += 1
            if s[i] == 0x2D:  # -
                align = True
                if i < n - 1:
                    i += 1
            if s[i] == 0x30:  # 0
                pad = b"0"
                if i < n - 1:
                    i += 1
            while i < n - 1 and 0x30 <= s[i] <= 0x39:
                width = width * 10 + s[i] - 0x30
                i += 1
            if s[i] == 0x2E and i < n - 1:  # .
                i += 1
                precision = 0
                while i < n - 1 and 0x30 <= s[i] <= 0x39:
                    precision = precision * 10 + s[i] - 0x30
                    i += 1
            out += _percent(chr(s[i]), m, align, pad, width, precision, sec, ns, err)
        elif c == 0x40 and i < n - 1:  # @
            i += 1
            if s[i] == 0x40:
                out += b"@"
            elif s[i] == 0x4E:  # N
                out += b"%09d" % ns
            else:
                out += time.strftime("%" + chr(s[i]), time.localtime(sec)).encode()
        elif c == 0x5C and i < n - 1:  # backslash
            i += 1
            out += _ESCAPES.get(s[i], b"")
        elif c not in (0x25, 0x40, 0x5C):
            out.append(c)
        i += 1
    return bytes(out)


def _percent(c, m, align, pad, width, precision, sec, ns, err):  # formatted_print_percent
    pl = bytes(m.payload)
    if c == "%":
        return b"%"
    if c in "AEFS":
        v = _prop(m, {"A": P.TOPIC_ALIAS, "E": P.MESSAGE_EXPIRY_INTERVAL, "F": P.PAYLOAD_FORMAT_INDICATOR,
                      "S": P.SUBSCRIPTION_IDENTIFIER}[c])
        return pad * width if v is None else _int(v, align, pad, width)
    if c in "CR":
        v = _prop(m, P.CONTENT_TYPE if c == "C" else P.RESPONSE_TOPIC)
        if v is None:
            return b" " * width if c == "C" else b""
        return _str(v.encode(), align, width, precision)
    if c == "D":
        v = _prop(m, P.CORRELATION_DATA)
        return b"" if v is None else bytes(v)
    if c == "I":
        t = time.localtime(sec)
        return _str(time.strftime("%Y-%m-%dT%H:%M:%S%z", t).encode(), align, width, precision)
    if c in "jJ":
        try:
            return _json(m, sec, ns, c == "J")
        except ValueError:
            if err:
                err("Error: Message payload is not valid JSON on topic %s." % m.topic)
            return b""
    if c == "l":
        return _int(len(pl), align, pad, width)
    if c == "m":
        return _int(m.pid, align, pad, width)
    if c == "P":
        return b" ".join(("%s:%s" % kv).encode() for kv in ((m.props or {}).get(P.USER_PROPERTY) or ()))
    if c == "p":
        return _payload(pl, 0, align, pad, width)
    if c == "q":
        return b"%d" % m.qos
    if c == "r":
        return b"1" if m.retain else b"0"
    if c == "t":
        return _str(m.topic.encode(), align, width, precision)
    if c == "U":
        return b"%d.%09d" % (sec, ns)
    if c in "xX":
        return _payload(pl, 1 if c == "x" else 2, align, pad, width)
    return b""


def message_line(a, m, client_id=""):
    """What sub prints for one message (print_message): -F, else -v (topic and payload; an empty payload is
    `topic (null)`), else the payload (an empty one prints nothing); an end of line unless -N."""
    eol = b"" if a.no_eol else b"\n"
    if a.format is not None:
        return format_message(a.format, m, client_id, err=_stderr) + eol
    pl = bytes(m.payload)
    if a.verbose:
        if pl:
            return m.topic.encode() + b" " + pl + eol
        return m.topic.encode() + b" (null)\n" if eol else b""
    return pl + eol if pl else b""


def _stderr(line):
    print(line, file=sys.stderr, flush=True)
