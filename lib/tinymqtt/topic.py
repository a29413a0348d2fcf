# Topic Names and Topic Filters (MQTT 3.1.1 / 5.0 section 4.7): validate what the application asks for (a shared
# subscription's $share/{ShareName}/ rules, MQTT 5 section 4.8.2, are checks.py's; matching a received topic
# against a filter is handlers.py's). Pure string work on str, no I/O.
from tinymqtt.errors import LocalProtocolError


def validate_name(topic, filt=False, arg="topic"):
    """A Topic Name to publish to: str, 1..65535 UTF-8 bytes, no wildcard, no U+0000. Else LocalProtocolError(0x90)
    naming the argument (arg) and the one fault found. filt True: a Topic Filter to subscribe to
    (validate_filter), whose wildcards each fill a level, '#' the last. Else LocalProtocolError(0x8F)."""
    code = 0x8F if filt else 0x90
    if not isinstance(topic, str):
        raise LocalProtocolError(code, "%s must be a str, not %s" % (arg, type(topic).__name__))
    if not topic:
        raise LocalProtocolError(code, "%s is empty" % arg)
    if "\x00" in topic:
        raise LocalProtocolError(code, "%s %s has U+0000" % (arg, repr(topic)[:24]))
    try:  # UTF-8 takes at most 4 bytes per character: encode only when that may exceed 65535
        big = len(topic) >> 14 and len(topic.encode()) >> 16
    except ValueError:  # CPython: a lone surrogate (UnicodeError)
        big = None
    if big is None:
        raise LocalProtocolError(code, "%s %s has a lone surrogate: it is not UTF-8" % (arg, repr(topic)[:24]))
    if big:
        raise LocalProtocolError(code, "%s is over 65535 bytes of UTF-8" % arg)
    if filt:
        levels = topic.split("/")
        if topic.count("+") != levels.count("+") or topic.count("#") != (levels[-1] == "#"):
            raise LocalProtocolError(code, "%s %s has a misplaced wildcard: '+' must fill a whole level, '#' the "
                                           "whole last level" % (arg, repr(topic)[:24]))
    elif "+" in topic or "#" in topic:
        raise LocalProtocolError(code, "%s %s has a wildcard ('+' or '#'), which only a subscription's filter may "
                                       "have" % (arg, repr(topic)[:24]))


def validate_filter(filt, arg="filter"):
    """A Topic Filter to subscribe to. Else LocalProtocolError(0x8F). (MQTT 5's shared subscriptions add rules for
    a $share/{ShareName}/ prefix: checks.py checks them.)"""
    validate_name(filt, True, arg)
