# The MQTT 3.x retry timer (Session's retry_ms, off by default; MQTT 5 never uses it): flows on the wire for
# retry_ms are sent again, a PUBLISH with DUP set, a PUBREL as it was. 3.1.1 requires resends only on a new
# connection, which the session always does; this timer is for servers that expect more. A build may leave this
# file out (profile mqtt311): its Session refuses retry_ms with 0x84 (tools/deploy/features.py, _RETRY).
from tinymqtt.inflight import const, ticks_diff

_WAIT_PUBACK = const(5)  # tinymqtt.inflight's states and events
_WAIT_PUBCOMP = const(7)
_SEND_AGAIN = const(11)


def resend_late(f, now, ms, wait):
    """Queues again (inflight.py's event SEND_AGAIN) the flows of Inflight f that wait for an ack since ms ago.
    Returns the ms until the next one is due, at most wait."""
    due = False
    for i in range(f.size):
        if _WAIT_PUBACK <= f.state[i] <= _WAIT_PUBCOMP:  # a PUBLISH or a PUBREL on the wire, awaiting its ack
            left = ms - ticks_diff(now, f.sent_at[i])
            if left > 0:
                wait = min(wait, left)
            else:
                f.step(i, _SEND_AGAIN, 0)
                due = True
    if due:  # (only when a flow is resent, not at every tick: rebuilding the queue allocates)
        f._requeue()
    return wait
