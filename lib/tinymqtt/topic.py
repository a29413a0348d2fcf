# Topic Names and Topic Filters (MQTT 3.1.1 / 5.0 section 4.7): validate what the application asks for, and match
# a received topic against a filter (a shared subscription's $share/{ShareName}/ prefix skipped; its rules, MQTT 5
# section 4.8.2, are session5.py's). Pure string work on str, no I/O; matches() walks both strings by index and
# allocates nothing, so it may run for every received message.
from tinymqtt.errors import LocalProtocolError


def validate_name(topic, filt=False):
    """A Topic Name to publish to: str, 1..65535 UTF-8 bytes, no wildcard, no U+0000. Else LocalProtocolError(0x90).
    filt True: a Topic Filter to subscribe to (validate_filter), whose wildcards each fill a level, '#' the last.
    Else LocalProtocolError(0x8F)."""
    try:  # UTF-8 takes at most 4 bytes per character: encode (which allocates) only when that may exceed 65535
        bad = not isinstance(topic, str) or not topic or "\x00" in topic or (len(topic) >> 14
                                                                            and len(topic.encode()) >> 16)
    except ValueError:  # CPython: a lone surrogate (UnicodeError)
        bad = True
    if not bad:
        if filt:
            # each '+' a level of its own, and one '#' at most, the last level
            levels = topic.split("/")
            bad = topic.count("+") != levels.count("+") or topic.count("#") != (levels[-1] == "#")
        else:
            bad = "+" in topic or "#" in topic
    if bad:
        raise LocalProtocolError(0x8F if filt else 0x90, "topic %s %s is empty, not str, over 65535 bytes, or has "
                                 "U+0000 or a misplaced wildcard" % ("filter" if filt else "name", repr(topic)[:24]))


def validate_filter(filt):
    """A Topic Filter to subscribe to. Else LocalProtocolError(0x8F). (MQTT 5's shared subscriptions add rules for
    a $share/{ShareName}/ prefix: Session5.subscribe checks them.)"""
    validate_name(filt, True)


def matches(filt, topic):
    """True when Topic Name topic matches Topic Filter filt (spec 4.7): '+' is one level, possibly empty; '#' is
    that level and all below it, and the parent ('a/#' matches 'a'); a filter starting with a wildcard never
    matches a topic starting with '$'; the $share/{ShareName}/ prefix is ignored. filt is assumed valid."""
    i = 0
    if filt.startswith("$share/"):
        i = filt.find("/", 7) + 1
        if not i:
            return False
    elif not ("+" in filt or "#" in filt):
        return filt == topic
    if topic.startswith("$") and (filt.startswith("+", i) or filt.startswith("#", i)):
        return False
    nf = len(filt)
    nt = len(topic)
    j = 0
    while i < nf:  # one character of the filter at a time; '+' takes the topic up to its next '/'
        c = filt[i]
        if c == "#":
            return True
        if c == "+":
            j = topic.find("/", j)
            if j < 0:
                j = nt
        elif topic.startswith(c, j):
            j += 1
        else:  # they differ, or the topic ended: only 'x/#' may match 'x'
            return j >= nt and i + 2 == nf and filt.endswith("/#")
        i += 1
    return j >= nt
