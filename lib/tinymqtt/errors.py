# One exception family for every rule broken, carrying the MQTT reason code.
# RemoteProtocolError: the peer sent something the spec forbids (close that connection).
# LocalProtocolError: our own caller asked for something the spec or the server's limits forbid (nothing was sent).
# The subclasses differ only in their names, which say which side broke the rules: made by type(), they share
# MQTTError's __init__, __str__ and __repr__ (docs/size.md says why not class bodies).
import sys

# The library's modules import const from here: MicroPython's on MicroPython, int on CPython. Asked by name, not by
# trying the import: PyPI's `micropython` package (a stub for editors) would make CPython take a board's fixed buffers.
if sys.implementation.name == "micropython":
    from micropython import const
else:
    const = int


class MQTTError(Exception):
    # NotDelivered: `pid` is the message's packet id (0 for every other error).
    def __init__(self, reason, msg="", pid=0):
        super().__init__(reason, msg)
        self.reason = reason
        self.msg = msg
        self.pid = pid

    def __str__(self):
        # "0x81 malformed packet (PUBLISH with QoS 3, or DUP on QoS 0)": the reason code, its name in the spec, the
        # message. reasons.py holds the names and loads only when an error is shown.
        from tinymqtt.reasons import describe
        return describe(self)

    def __repr__(self):
        # MicroPython prints an uncaught error with its repr where CPython uses str: the same line on both,
        # "ConnectError: 0x87 not authorized (CONNACK)".
        return "%s: %s" % (type(self).__name__, self)


# One bases tuple and one class dict for the five: MicroPython's type() keeps the dict it is given (CPython's
# copies it), and none of them adds anything to it.
_b = (MQTTError,), {}
RemoteProtocolError = type("RemoteProtocolError", *_b)
LocalProtocolError = type("LocalProtocolError", *_b)
# The server refused the connection (CONNACK with a failure code; 3.x codes mapped to v5 ones).
ConnectError = type("ConnectError", *_b)
# The link is gone: keep-alive expired, the server sent DISCONNECT, or the transport closed.
ConnectionLost = type("ConnectionLost", *_b)
# A QoS 1/2 message the server refused (its reason code) or that was lost with a session the server no longer
# has (0x80); `pid` is the message's packet id.
NotDelivered = type("NotDelivered", *_b)


def protocol_error(msg):
    return RemoteProtocolError(0x82, msg)
