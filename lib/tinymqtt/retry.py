# The MQTT 3.x retry timer (Session's retry_ms, off by default; MQTT 5 never uses it): flows on the wire for
# retry_ms are sent again, a PUBLISH with DUP set, a PUBREL as it was. 3.1.1 requires resends only on a new
# connection, which the session always does; this timer is for servers that expect more. A build may leave this
# file out (profile mqtt311): its Session refuses retry_ms with 0x84 (tools/deploy/features.py, _RETRY).
from tinymqtt.inflight import const, ticks_diff

_RESEND = const(2)  # inflight.py's slot states
_SENT = const(3)
_RELQ = const(5)


def resend_late(f, now, ms, wait):
    """Marks the flows of Inflight f that are on the wire since ms ago for a resend. Returns the ms until the
    next one is due, at most wait."""
    due = False
    for i in range(f.size):
        st = f.state[i]
        if 0x18 >> st & 1:  # (SENT, RELEASED)
            left = ms - ticks_diff(now, f.sent_at[i])
            if left > 0:
                wait = min(wait, left)
            else:
                f.mark(i, _RESEND if st == _SENT else _RELQ, 0)
                due = True
    if due:  # (_requeue() allocates: only when a flow is resent, not at every tick)
        f._requeue()
    return wait
