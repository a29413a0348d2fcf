# Topic Names and Topic Filters (MQTT 3.1.1 / 5.0 section 4.7): validate what the application asks for, and match
# a received topic against a filter (a shared subscription's $share/{ShareName}/ prefix skipped; its rules, MQTT 5
# section 4.8.2, are session5.py's). Pure string work on str, no I/O; matches() walks both strings by index and
# allocates nothing, so it may run for every received message.
from tinymqtt.errors import LocalProtocolError


def _bad(s):
    # Not a str of at most 65535 UTF-8 bytes without U+0000. UTF-8 takes at most 4 bytes per character, so
    # encode (which allocates) only when that bound can exceed 65535.
    if not isinstance(s, str) or "\x00" in s:
        return True
    try:
        return len(s) > 16383 and len(s.encode()) > 65535
    except UnicodeError:  # CPython: a lone surrogate
        return True


def validate_name(topic):
    """A Topic Name to publish to: str, 1..65535 UTF-8 bytes, no wildcard, no U+0000. Else LocalProtocolError(0x90)."""
    if _bad(topic) or not topic or "+" in topic or "#" in topic:
        raise LocalProtocolError(0x90, "topic name %s is not str, is empty, holds a wildcard or U+0000, or "
                                       "exceeds 65535 UTF-8 bytes" % repr(topic)[:60])


def validate_filter(filt):
    """A Topic Filter to subscribe to. Else LocalProtocolError(0x8F). (MQTT 5's shared subscriptions add rules for
    a $share/{ShareName}/ prefix: Session5.subscribe checks them.)"""
    if _bad(filt):
        raise LocalProtocolError(0x8F, "topic filter %s is not str, holds U+0000 or exceeds 65535 UTF-8 bytes"
                                 % repr(filt)[:24])
    levels = filt.split("/")
    last = levels.pop()
    bad = not filt or (len(last) > 1 and ("+" in last or "#" in last))
    for lv in levels:
        bad = bad or "#" in lv or (lv != "+" and "+" in lv)
    if bad:
        raise LocalProtocolError(0x8F, "invalid topic filter %s: wildcards fill a level ('#' the last)"
                                 % repr(filt)[:24])


def matches(filt, topic):
    """True when Topic Name topic matches Topic Filter filt (spec 4.7): '+' is one level, possibly empty; '#' is
    that level and all below it, and the parent ('a/#' matches 'a'); a filter starting with a wildcard never
    matches a topic starting with '$'; the $share/{ShareName}/ prefix is ignored. filt is assumed valid."""
    i = 0
    if filt.startswith("$share/"):
        i = filt.find("/", 7) + 1
        if not i:
            return False
    elif "+" not in filt and "#" not in filt:
        return filt == topic
    if topic.startswith("$") and (filt.startswith("+", i) or filt.startswith("#", i)):
        return False
    nf, nt, j = len(filt), len(topic), 0
    while i < nf:  # one character of the filter at a time; '+' takes the topic up to its next '/'
        c = filt[i]
        if c == "#":
            return True
        if c == "+":
            j = topic.find("/", j)
            if j < 0:
                j = nt
        elif j < nt and topic[j] == c:
            j += 1
        else:  # they differ, or the topic ended: only 'x/#' may match 'x'
            return j >= nt and c == "/" and i + 2 == nf and filt[i + 1] == "#"
        i += 1
    return j >= nt
