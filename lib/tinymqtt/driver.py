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
    """The board's port module, tinymqtt_port (ports/NAME/tinymqtt_port.py; a client takes any object with the
    same functions as port_impl). The port contract, the only one there is:
      network_up(timeout_ms=0) -> True once the board is on the network (WLAN joined), else raises.
      ticks_ms() -> milliseconds that wrap at 2**30, like MicroPython's time.ticks_ms().
      open(host, port, tls) -> a blocking transport: write(buf, n) writes buf[:n] whole or raises;
        readinto(buf, off, timeout_ms) -> bytes read into buf[off:] (0: none within timeout_ms), raises
        ConnectionLost when the peer closed; close().          (the blocking client)
      open_stream(host, port, tls) -> awaitable of a stream: write(buf, n) queues buf[:n], drain() awaits it,
        readinto(buf, off) awaits and returns bytes read (0: nothing whole yet), raises ConnectionLost when
        the peer closed; close().                             (the asyncio client)
    tls: None for plain TCP, else True, a dict of options (cafile, server_hostname...) or an SSLContext.
    Failures raise OSError or ConnectionLost (LINK_ERRORS below), which end the connection."""
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
