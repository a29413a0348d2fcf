# How `tinymqtt sub` prints a message: the payload, `-v` (topic and payload), or a mosquitto_sub `-F` format
# (%t %p %q %r %m %l %x %X %j %J %I %U %A %C %D %E %F %P %R %S, @strftime, \escapes, widths). CPython only.
import json
import re
import time

from tinymqtt import props as P

_SPEC = re.compile(rb"%([-0]*)(\d*)(?:\.(\d+))?([A-Za-z%])|@([A-Za-z@])|\\(.)", re.S)
_ESCAPES = {b"\\": b"\\", b"0": b"\0", b"a": b"\a", b"e": b"\x1b", b"n": b"\n", b"r": b"\r", b"t": b"\t",
            b"v": b"\v"}
_NUMERIC = b"AEFlmSxX"  # the parameters a 0 flag pads with zeros


def _iso(now, micro=False):
    t = time.localtime(now)
    frac = ".%06d" % int(now % 1 * 1e6) if micro else ""
    return (time.strftime("%Y-%m-%dT%H:%M:%S", t) + frac + time.strftime("%z", t)).encode()


def _json(m, now, raw):
    payload = bytes(m.payload)
    d = {"tst": _iso(now, True).decode(), "topic": m.topic, "qos": m.qos, "retain": int(m.retain),
         "payloadlen": len(payload)}
    if raw:
        try:
            json.loads(payload)
        except ValueError:
            raise ValueError("Error: Message payload is not valid JSON on topic %s." % m.topic) from None
        body = json.dumps(d, separators=(",", ":"))[:-1].encode()
        return body + b',"payload":' + payload + b"}"
    d["payload"] = payload.decode("utf-8", "replace")
    return json.dumps(d, separators=(",", ":")).encode()


def _prop(m, pid):
    v = (m.props or {}).get(pid)
    if v is None:
        return b""
    if pid == P.USER_PROPERTY:
        return b" ".join(("%s:%s" % kv).encode() for kv in v)
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v)
    if isinstance(v, list):
        v = ",".join(str(x) for x in v)
    return str(v).encode()


def _value(c, m, now, client_id):
    pl = m.payload
    simple = {b"t": lambda: m.topic.encode(), b"p": lambda: bytes(pl), b"q": lambda: b"%d" % m.qos,
              b"r": lambda: b"%d" % m.retain, b"m": lambda: b"%d" % m.pid, b"l": lambda: b"%d" % len(pl),
              b"x": lambda: bytes(pl).hex().encode(), b"X": lambda: bytes(pl).hex().upper().encode(),
              b"j": lambda: _json(m, now, False), b"J": lambda: _json(m, now, True), b"I": lambda: _iso(now),
              b"U": lambda: ("%.9f" % now).encode(), b"c": lambda: (client_id or "").encode(), b"%": lambda: b"%",
              b"A": lambda: _prop(m, P.TOPIC_ALIAS), b"C": lambda: _prop(m, P.CONTENT_TYPE),
              b"D": lambda: _prop(m, P.CORRELATION_DATA), b"E": lambda: _prop(m, P.MESSAGE_EXPIRY_INTERVAL),
              b"F": lambda: _prop(m, P.PAYLOAD_FORMAT_INDICATOR), b"P": lambda: _prop(m, P.USER_PROPERTY),
              b"R": lambda: _prop(m, P.RESPONSE_TOPIC), b"S": lambda: _prop(m, P.SUBSCRIPTION_IDENTIFIER)}
    f = simple.get(c)
    return None if f is None else f()


def format_message(fmt, m, client_id="", now=None):
    """The bytes -F fmt makes of message m (no end of line is added: a format says where lines end)."""
    now = time.time() if now is None else now

    def one(mo):
        flags, width, maxw, c, at, esc = mo.groups()
        if esc is not None:
            return _ESCAPES.get(esc, b"\\" + esc)
        if at is not None:
            if at == b"@":
                return b"@"
            if at == b"N":
                return b"%09d" % int(now % 1 * 1e9)
            return time.strftime("%" + at.decode(), time.localtime(now)).encode()
        v = _value(c, m, now, client_id)
        if v is None:
            return mo.group(0)
        if maxw:
            v = v[:int(maxw)]
        if width:
            w = int(width)
            if b"-" in flags:
                v = v.ljust(w)
            else:
                v = v.rjust(w, b"0" if b"0" in flags and c in _NUMERIC else b" ")
        return v

    return _SPEC.sub(one, fmt.encode() if isinstance(fmt, str) else fmt)


def message_line(a, m, client_id=""):
    """What sub prints for one message: -F, else -v (topic and payload), else the payload; -N: no newline."""
    if a.format is not None:
        return format_message(a.format, m, client_id)
    pl = bytes(m.payload)
    out = m.topic.encode() + b" " + pl if a.verbose else pl
    return out if a.no_eol else out + b"\n"
