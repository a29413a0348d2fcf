# Topic Names and Topic Filters (MQTT 3.1.1 / 5.0 section 4.7): validate what the application asks for (a shared
# subscription's $share/{ShareName}/ rules, MQTT 5 section 4.8.2, are session5.py's; matching a received topic
# against a filter is handlers.py's). Pure string work on str, no I/O.
from tinymqtt.errors import LocalProtocolError


def validate_name(topic, filt=False):
    """A Topic Name to publish to: str, 1..65535 UTF-8 bytes, no wildcard, no U+0000. Else LocalProtocolError(0x90).
    filt True: a Topic Filter to subscribe to (validate_filter), whose wildcards each fill a level, '#' the last.
    Else LocalProtocolError(0x8F)."""
    try:  # UTF-8 takes at most 4 bytes per character: encode only when that may exceed 65535
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
