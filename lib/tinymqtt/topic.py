# Topic Names and Topic Filters (MQTT 3.1.1 / 5.0 section 4.7, shared subscriptions 4.8.2): validate what the
# application asks for, and match a received topic against a filter. Pure string work on str, no I/O; matches()
# walks both strings by index and allocates nothing, so it may run for every received message.
from tinymqtt.errors import LocalProtocolError

SHARE = "$share/"


def _show(s):
    return repr(s) if len(s) <= 60 else repr(s[:60]) + "..."


def _too_long(s):
    # UTF-8 takes at most 4 bytes per character: encode (allocate) only when that bound can exceed 65535.
    if len(s) <= 16383:
        return False
    try:
        return len(s.encode()) > 65535
    except UnicodeError:  # CPython: a lone surrogate
        return True


def validate_name(topic, err=LocalProtocolError):
    """A Topic Name to publish to: str, 1..65535 UTF-8 bytes, no wildcard, no U+0000. Else err(0x90, msg)."""
    if not isinstance(topic, str):
        raise err(0x90, "topic name must be str: %r" % (topic,))
    if not topic:
        raise err(0x90, "topic name is empty")
    if "+" in topic or "#" in topic:
        raise err(0x90, "wildcard in topic name %s" % _show(topic))
    if "\x00" in topic:
        raise err(0x90, "U+0000 in topic name %s" % _show(topic))
    if _too_long(topic):
        raise err(0x90, "topic name longer than 65535 UTF-8 bytes: %s" % _show(topic))


def _filter_problem(f, i):
    # What is wrong with the plain filter f[i:], or None: non-empty, '+' alone in its level, '#' alone in the last.
    n = len(f)
    if i >= n:
        return "no filter after the share name" if i else "empty"
    p = f.find("+", i)
    while p >= 0:
        if (p > i and not f.startswith("/", p - 1)) or (p + 1 < n and not f.startswith("/", p + 1)):
            return "'+' not alone in its level"
        p = f.find("+", p + 1)
    p = f.find("#", i)
    if p >= 0:
        if p + 1 < n:
            return "'#' not the last character"
        if p > i and not f.startswith("/", p - 1):
            return "'#' not alone in its level"
    return None


def validate_filter(filt, err=LocalProtocolError):
    """A Topic Filter to subscribe to, plain or $share/{ShareName}/{filter}. Else err(0x8F, msg)."""
    if not isinstance(filt, str):
        raise err(0x8F, "topic filter must be str: %r" % (filt,))
    if "\x00" in filt:
        raise err(0x8F, "U+0000 in topic filter %s" % _show(filt))
    if _too_long(filt):
        raise err(0x8F, "topic filter longer than 65535 UTF-8 bytes: %s" % _show(filt))
    i = 0
    if filt.startswith(SHARE):
        i = filt.find("/", 7)
        if i < 0:
            raise err(0x8F, "shared subscription without a filter after the share name: %s" % _show(filt))
        if i == 7:
            raise err(0x8F, "empty share name in %s" % _show(filt))
        if filt.find("+", 7, i) >= 0 or filt.find("#", 7, i) >= 0:
            raise err(0x8F, "wildcard in share name of %s" % _show(filt))
        i += 1
    why = _filter_problem(filt, i)
    if why:
        raise err(0x8F, "invalid topic filter %s: %s" % (_show(filt), why))


def share_parts(filt):
    """'$share/g/a/+' -> ('g', 'a/+'); a plain filter f -> (None, f). A share name with no '/' after it gives
    (name, '')."""
    if not filt.startswith(SHARE):
        return None, filt
    i = filt.find("/", 7)
    if i < 0:
        return filt[7:], ""
    return filt[7:i], filt[i + 1:]


def matches(filt, topic):
    """True when Topic Name topic matches Topic Filter filt (spec 4.7): '+' is one level, possibly empty; '#' is
    that level and all below it, and the parent ('a/#' matches 'a'); a filter starting with a wildcard never
    matches a topic starting with '$'; the $share/{ShareName}/ prefix is ignored. filt is assumed valid."""
    i = 0
    if filt.startswith(SHARE):
        i = filt.find("/", 7) + 1
        if i == 0:
            return False
    elif "+" not in filt and "#" not in filt:
        return filt == topic
    if topic.startswith("$") and (filt.startswith("+", i) or filt.startswith("#", i)):
        return False
    nf, nt, j = len(filt), len(topic), 0
    while True:  # i and j are at the start of a level
        if filt.startswith("#", i):
            return True
        if filt.startswith("+", i):
            i += 1
            j = topic.find("/", j)
            if j < 0:
                j = nt
        else:
            while i < nf:
                c = filt[i]
                if c == "/":
                    break
                if j >= nt or topic[j] != c:
                    return False
                i += 1
                j += 1
        # filt is at '/' or its end: topic must be too
        if i >= nf:
            return j >= nt
        if j >= nt:  # topic ended, filter goes on: only '/#' may follow
            return i + 2 == nf and filt.startswith("#", i + 1)
        if topic[j] != "/":
            return False
        i += 1
        j += 1
