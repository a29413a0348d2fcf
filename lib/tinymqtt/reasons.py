# The names of the MQTT 5 reason codes (spec 2.4; a 3.x error carries the v5 code that means the same), for
# messages and logs: errors.py looks a name up only when a message is shown, and a board build may leave this
# file out. One text with a line per code costs a board far less than a name per code.
_TEXT = """
00 success
01 granted qos 1
02 granted qos 2
04 disconnect with will
10 no matching subscribers
11 no subscription existed
18 continue authentication
19 reauthenticate
80 unspecified error
81 malformed packet
82 protocol error
83 implementation specific error
84 unsupported protocol version
85 client identifier not valid
86 bad user name or password
87 not authorized
88 server unavailable
89 server busy
8A banned
8B server shutting down
8C bad authentication method
8D keep alive timeout
8E session taken over
8F topic filter invalid
90 topic name invalid
91 packet identifier in use
92 packet identifier not found
93 receive maximum exceeded
94 topic alias invalid
95 packet too large
96 message rate too high
97 quota exceeded
98 administrative action
99 payload format invalid
9A retain not supported
9B qos not supported
9C use another server
9D server moved
9E shared subscriptions not supported
9F connection rate exceeded
A0 maximum connect time
A1 subscription identifiers not supported
A2 wildcard subscriptions not supported
"""


def name(code):
    i = _TEXT.find("\n%02X " % code)
    return _TEXT[i + 4:_TEXT.find("\n", i + 1)] if i >= 0 else "unknown reason"


def describe(e):
    """An MQTTError's text with its reason code's name: "message (0x81 malformed packet)"."""
    return "%s (0x%02X %s)" % (e.msg, e.reason, name(e.reason))
