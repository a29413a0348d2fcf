# Streamed messages (docs/streaming.md): a subscription made with subscribe(..., chunks=True) gets each message
# in pieces as its bytes arrive, so a board with a small receive buffer can take a firmware image, a certificate
# or a model far larger than the buffer: handler(message, total, offset, chunk), where message has the topic,
# QoS, retain flag and MQTT 5 properties (its payload is not used), total the payload's length, and chunk a
# memoryview of payload[offset:offset + len(chunk)] in the receive buffer, valid during the call only. offset 0
# is the first chunk of a message (a message cut off by a lost link comes again from offset 0); the last chunk
# ends at total. A message that fits the buffer comes in one chunk, first and last at once.
#
# What stays MQTT's: a QoS 1/2 message is acknowledged (PUBACK, PUBREC) only after its last chunk was handled,
# by the inbound flows' table (session._INBOUND) as any message; a handler that raises ends the connection
# instead, so the message stays unacknowledged and the server sends it again when the session resumes (clean
# False). A QoS 2 message whose PUBREC went out is never delivered twice; one cut before its end may be, from
# offset 0: what a handler wrote of a cut message, it starts over.
# A profile without this file (mqtt311) refuses chunks=True with 0x84, and skips every message larger than its
# buffer (Session._oversize), as before.
from tinymqtt.errors import ConnectionLost, LocalProtocolError, RemoteProtocolError, const
from tinymqtt.packets import read_publish

_V5 = const(5)
_IN_RESEND = const(1)  # session._INBOUND's action for a resend of a QoS 2 message already acknowledged
_IN_RECEIVED = const(1)
_IN_HOLD = const(2)  # the action of app_acks.py's sessions: the application acknowledges
_PUBREC = const(5)


def _payload_start(buf, pos, end, q, version):
    # Where the payload of the PUBLISH at buf[pos] starts (past the topic, the packet id and MQTT 5's
    # properties), or 0 while those have not all arrived.
    i = pos + 2
    while buf[i - 1] & 0x80:  # past the Remaining Length, which frame() checked
        i += 1
    if end - i < 2:
        return 0
    i += 2 + (buf[i] << 8 | buf[i + 1]) + (2 if q else 0)
    if version == _V5:  # the Property Length, a variable byte integer
        n = k = 0
        while True:
            if i + k >= end:
                return 0
            d = buf[i + k]
            n |= (d & 0x7F) << (7 * k)
            k += 1
            if not d & 0x80 or k == 4:
                break
        i += k + n
    return i if i <= end else 0


def start(s, buf, pos, end, total):
    """A PUBLISH larger than the receive buffer begins at buf[pos]: when a chunks=True subscription matches its
    topic, reads its header in place, opens the stream (s._stream, s._skip: its payload's bytes still to come)
    and returns where its payload starts; 0 while the header is still arriving; -1 when it is not streamed (no
    such subscription, a payload over max_stream_size, a header larger than the buffer, a Topic Alias): the
    session then skips it as too large."""
    q = buf[pos] >> 1 & 3
    i = _payload_start(buf, pos, end, q, s.version)
    if not i:
        return -1 if end - pos >= len(buf) else 0  # a header that can never fit the buffer: not streamed
    if i - pos > total:  # its topic or properties claim more than the Remaining Length holds
        raise RemoteProtocolError(0x81, "PUBLISH ends inside its topic name, packet id or properties")
    p = read_publish(s._inmv, pos, i, s._msg, s.version)  # (validates the topic, the packet id, the properties)
    if p.alias >= 0:  # (a server sends aliases only when topic_alias_maximum allows them)
        return -1
    h = _handler(s, p.topic)
    n = total - (i - pos)  # the payload's length
    if h is None or (s.max_stream_size and n > s.max_stream_size):
        return -1
    st = s._in_state(p.pid)
    row = s._inbound[st << 4 | q]
    s._skip = n  # (a resend is passed unread, as an oversize message is)
    if row & 15 == _IN_RESEND:  # a QoS 2 message acknowledged before: its PUBREC again, never delivered twice
        if st == _IN_RECEIVED:
            s._send(_PUBREC, p.pid, 0)
        return i
    s._stream = h
    s._move = row  # the table's move, made once the last chunk was handled (chunk())
    s._at = 0
    s._total = n
    if not n:  # (an empty payload: one empty chunk, first and last)
        chunk(s, i, 0)
    return i


def _handler(s, topic):
    # The chunks=True handler whose filter matches topic (the first), or None
    for h in s._handlers:
        if len(h) > 2 and s._matches(h[0], topic):
            return h[1]
    return None


def chunk(s, pos, k):
    """The next k bytes of the streamed payload are at inbuf[pos:]: to the handler; after the last, the ack."""
    at = s._at
    s._at = at + k
    s._skip -= k
    try:
        s._stream(s._msg, s._total, at, s._inmv[pos:pos + k])  # (the view: the one allocation)
    except Exception as e:
        s._stream = None
        s._skip = 0
        raise ConnectionLost(0x80, "a chunks handler raised %r at offset %d of %d: the message stays "
                                   "unacknowledged, and the server sends it again when the session resumes"
                             % (e, at, s._total))
    if not s._skip:  # the last chunk was handled: the message's ack, as the inbound table says
        s._stream = None
        pid = s._msg.pid
        row = s._move
        if row & 15 == _IN_HOLD:  # an app_acks.py session (the asyncio client's): HELD, and at once its ack() row
            s._held[pid] = s._msg.qos
        elif row >> 4 == _IN_RECEIVED and s._in_state(pid) != _IN_RECEIVED:  # QoS 2: NONE -> RECEIVED
            s._rx_add(pid)
        if s._msg.qos:
            s._acknowledge(pid)


# ---------------------------------------------------------------- streamed publish

class Source:
    """A payload published from a source piece by piece: publish(topic, source, qos, length=n) wraps source, any
    object with readinto(buf) (a file opened on the board's flash), so the whole payload is never in RAM. The
    session writes the PUBLISH's header, then feed() fills `out` from the source each time the driver has written
    it, until the payload's length is out; nothing else may come between a packet's bytes, so `out` stays full
    until then. A QoS 1/2 message sent again (a resumed session, MQTT's DUP) reads the source again from its
    start: seek(0)."""

    def __init__(self, src, n):
        self.src = src
        self.n = n
        self.left = 0  # bytes still to write of the packet being sent

    def __len__(self):
        return self.n

    def begin(self, s, q):
        # The header is in `out`: the payload follows from the source's start (again, for a resend)
        if q:
            self.src.seek(0)
        self.left = self.n
        self._mv = memoryview(s.out)
        s._feed = self
        self.feed(s)

    def feed(self, s):
        """Fills `out` with the payload's next bytes; True once the whole payload is written."""
        e = s.out_size
        i = s.outlen
        while self.left and i < e:
            k = self.src.readinto(self._mv[i:i + min(e - i, self.left)])
            if not k:  # the server was promised n bytes: the connection cannot go on
                s._feed = None
                s.outlen = i
                raise ConnectionLost(0x80, "payload: its source ended %d bytes short of its length %d"
                                     % (self.left, self.n))
            i += k
            self.left -= k
        s.outlen = i
        if self.left:
            return False
        s._feed = None
        self._mv = None
        return True


def source(s, src, length, qos):
    """publish()'s length and source, checked at the door: a Source for the session to queue."""
    if not isinstance(length, int) or not 0 <= length < 268435456:
        raise LocalProtocolError(0x82, "length must be the payload's size in bytes, below 268435456 (what MQTT's "
                                       "largest packet holds), not %r" % (length,))
    if not hasattr(src, "readinto"):
        raise LocalProtocolError(0x82, "payload: with length, an object with readinto() (a file opened 'rb'), "
                                       "not %s" % type(src).__name__)
    if qos and not hasattr(src, "seek"):
        raise LocalProtocolError(0x82, "payload: a QoS %d message is sent again from its start on a resumed session: "
                                       "its source needs seek(), which %s lacks" % (qos, type(src).__name__))
    return Source(src, length)
