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


def _hex(m):
    return bytes(m.payload).hex().encode()


# -F parameters: the letter -> fn(message, time, client id) -> bytes
_PARAMS = {
    b"t": lambda m, now, cid: m.topic.encode(), b"p": lambda m, now, cid: bytes(m.payload),
    b"q": lambda m, now, cid: b"%d" % m.qos, b"r": lambda m, now, cid: b"%d" % m.retain,
    b"m": lambda m, now, cid: b"%d" % m.pid, b"l": lambda m, now, cid: b"%d" % len(m.payload),
    b"x": lambda m, now, cid: _hex(m), b"X": lambda m, now, cid: _hex(m).upper(),
    b"j": lambda m, now, cid: _json(m, now, False), b"J": lambda m, now, cid: _json(m, now, True),
    b"I": lambda m, now, cid: _iso(now), b"U": lambda m, now, cid: ("%.9f" % now).encode(),
    b"c": lambda m, now, cid: (cid or "").encode(), b"%": lambda m, now, cid: b"%",
}
for _letter, _pid in ((b"A", P.TOPIC_ALIAS), (b"C", P.CONTENT_TYPE), (b"D", P.CORRELATION_DATA),
                      (b"E", P.MESSAGE_EXPIRY_INTERVAL), (b"F", P.PAYLOAD_FORMAT_INDICATOR),
                      (b"P", P.USER_PROPERTY), (b"R", P.RESPONSE_TOPIC), (b"S", P.SUBSCRIPTION_IDENTIFIER)):
    _PARAMS[_letter] = lambda m, now, cid, pid=_pid: _prop(m, pid)


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
        f = _PARAMS.get(c)
        if f is None:
            return mo.group(0)
        v = f(m, now, client_id)
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
