# The names of the MQTT 5 reason codes (spec 2.4; a 3.x error carries the v5 code that means the same), for
# messages and logs: errors.py looks a name up only when an error is shown, so this file loads only then. The codes are
# one text, a line per code, looked up by the code's two hex digits.
import sys

if sys.implementation.name == "micropython":  # (as errors.py, which imports this file: no import cycle)
    from micropython import const
else:
    const = int

_MQTT5 = const(1)  # const(0) in a board build without MQTT 5 (tools/deploy/features.py): only the first text

# The codes of the errors any build raises (an MQTT 3.x session's too).
_TEXT = """
80 unspecified error
81 malformed packet
82 protocol error
84 unsupported protocol version
85 client identifier not valid
86 bad user name or password
87 not authorized
88 server unavailable
8D keep alive timeout
8F topic filter invalid
90 topic name invalid
93 receive maximum exceeded
95 packet too large
97 quota exceeded
9B qos not supported
"""
if _MQTT5:  # the codes only MQTT 5 has: a server's reasons, and the refusals its limits need
    _TEXT += """00 success
01 granted qos 1
02 granted qos 2
04 disconnect with will
10 no matching subscribers
11 no subscription existed
18 continue authentication
19 reauthenticate
83 implementation specific error
89 server busy
8A banned
8B server shutting down
8C bad authentication method
8E session taken over
91 packet identifier in use
92 packet identifier not found
94 topic alias invalid
96 message rate too high
98 administrative action
99 payload format invalid
9A retain not supported
9C use another server
9D server moved
9E shared subscriptions not supported
9F connection rate exceeded
A0 maximum connect time
A1 subscription identifiers not supported
A2 wildcard subscriptions not supported
"""


# What an error concerns on a board, whose build (tools/deploy/shorten.py) replaces each message by a number: 0
# nothing the reason code's name does not say, 1-15 the packet of that type, then the arguments and fields
# ("" is the subject a TAGS entry gives when the code's name says it all).
SUBJECTS = ("|CONNECT|CONNACK|PUBLISH|PUBACK|PUBREC|PUBREL|PUBCOMP|SUBSCRIBE|SUBACK|UNSUBSCRIBE|UNSUBACK|PINGREQ|"
            "PINGRESP|DISCONNECT|AUTH|version|version, manual_ack or retry_ms|handler|qos|topic|topic filter|packet id|"
            "in flight|Remaining Length|string|field|password|connection")
if _MQTT5:
    SUBJECTS += ("|topic alias|shared subscription|wildcard subscription|subscription identifier|options|retain|"
                 "property|reason code|Variable Byte Integer")


def name(code):
    """The spec's name of a reason code: "malformed packet" for 0x81."""
    i = _TEXT.find("\n%02X " % code)
    return _TEXT[i + 4:_TEXT.find("\n", i + 1)] if i >= 0 else "unknown reason"


def describe(e):
    """An MQTTError's text: "0x81 malformed packet (PUBLISH with QoS 3, or DUP on QoS 0)", or on a board
    "0x81 malformed packet (PUBLISH)"; without the parentheses when the code's name says it all."""
    m = e.msg if isinstance(e.msg, str) else SUBJECTS.split("|")[e.msg]
    return "0x%02X %s" % (e.reason, name(e.reason)) + (" (%s)" % m if m else "")
