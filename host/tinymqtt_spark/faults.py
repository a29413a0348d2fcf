# Fault injection for the crash tests: TINYMQTT_CRASH="point:n" makes the process that holds the MQTT link
# die (os._exit, no cleanup, as under SIGKILL) the n-th time it passes the named point. Points, in the order a
# message meets them: received (before the spool write), spooled (sealed and exposed, before the consumer's
# commit), landed (ingest: file renamed, before the commit marker), committed (marker written, before the
# acks), acked (ack state saved, before PUBACK/PUBREC go out), released (PUBRELs saved, before PUBCOMP).
import os

_spec = os.environ.get("TINYMQTT_CRASH", "")
_point, _, _n = _spec.partition(":")
_left = int(_n or 1) if _point else 0


def crashpoint(name):
    global _left
    if _left and name == _point:
        _left -= 1
        if not _left:
            os._exit(99)
