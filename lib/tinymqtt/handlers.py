# Per-subscription handlers, subscribe(..., handler=f): Session keeps the table, [(filter, handler)], and gives a
# received message to every handler whose Topic Filter matches its topic, to on_event (the blocking client's
# on_message, the asyncio client's messages()) when none does; this file is the matching (MQTT 3.1.1 / 5.0 section
# 4.7), which a session takes on the first subscribe that names a handler. A board's profile may leave the file out
# (mqtt311): every message then goes to on_event, and a handler is refused with 0x84. matches() walks both strings
# by index and allocates nothing, so it may run for every received message.


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
