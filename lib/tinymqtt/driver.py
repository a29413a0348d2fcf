# What the blocking and asyncio clients share besides the session: which errors end a connection, the
# board's port, and the reconnect backoff. Kept apart so a board running one client loads only that one.
from tinymqtt.errors import ConnectionLost, ConnectError, RemoteProtocolError

try:
    from random import getrandbits
except ImportError:  # some MicroPython builds
    from os import urandom

    def getrandbits(n):
        return urandom(1)[0] & ((1 << n) - 1)

LINK_ERRORS = (OSError, ConnectionLost, RemoteProtocolError, ConnectError)  # these end a connection


def default_port():
    import tinymqtt_port  # the board's (or Linux's) port module, deployed next to the library
    return tinymqtt_port


class Backoff:
    """Exponential reconnect delays with +-25% jitter, so a fleet that lost its broker does not return
    in lockstep."""

    def __init__(self):
        self.delay = 0

    def reset(self):
        self.delay = 0

    def next(self, min_ms, max_ms):
        """The next delay in ms; the bounds are passed in so a client's settings may change at any time."""
        d = self.delay or min_ms
        self.delay = min(d * 2, max_ms)
        j = d // 4
        return d - j + (getrandbits(16) % (2 * j + 1) if j else 0)
