# `tinymqtt pub`: mosquitto_pub's flags on the blocking client, stricter where that protects data: it exits 0
# only when every QoS 1/2 message was acknowledged, and with -c it rides out a lost connection (reconnect,
# resume the session, resend as the protocol says) until everything is. CPython only.
import os
import select
import sys
import time

from tinymqtt_cli import args as cli_args
from tinymqtt.errors import NotDelivered
from tinymqtt.packets import PUBACK, PUBREC, PUBCOMP
from tinymqtt.session import LOST


def _parser():
    ap = cli_args.parser("tinymqtt pub", "Publish like mosquitto_pub; exit 0 only when all was delivered.")
    ap.add_argument("-t", "--topic")
    ap.add_argument("-m", "--message")
    ap.add_argument("-f", "--file")
    ap.add_argument("-s", "--stdin-file", action="store_true")
    ap.add_argument("-l", "--stdin-line", action="store_true", help="one message per line, sent as lines arrive")
    ap.add_argument("-n", "--null-message", action="store_true")
    ap.add_argument("-r", "--retain", action="store_true")
    ap.add_argument("-N", "--repeat", type=int, default=1, help="publish the message this many times")
    ap.add_argument("--repeat-delay", type=float, default=0.0, help="seconds between repeats")
    ap.add_argument("-M", "--max-inflight", "--inflight", dest="max_inflight", type=int, default=20,
                    help="QoS 1/2 messages in flight at most (default 20, as mosquitto_pub)")
    return ap


def _payload(a):
    if a.null_message:
        return b""
    if a.file:
        try:
            with open(a.file, "rb") as f:
                return f.read()
        except OSError:
            raise cli_args.UsageError('Error loading input file "%s".' % a.file) from None
    if a.stdin_file:
        return sys.stdin.buffer.read()
    return a.message.encode()


def _lines(c):
    """Yields stdin's lines as they arrive, keeping the connection served while none is there."""
    fd, buf = sys.stdin.fileno(), b""
    while True:
        while b"\n" not in buf:
            if select.select([fd], [], [], 0.2)[0]:
                data = os.read(fd, 65536)
                if not data:
                    if buf:
                        yield buf
                    return
                buf += data
            else:
                c.loop(0)  # keep-alive, acks, and (with -c) reconnects while the pipe is quiet
        line, buf = buf.split(b"\n", 1)
        yield line


class _Tally:
    """Collects the QoS 1/2 messages the server refused or lost with the session; the first becomes the error."""

    def __init__(self):
        self.failed = []  # NotDelivered

    def on_event(self, ev, value, reason):
        if reason >= 0x80 and (ev == PUBACK or ev == PUBREC or ev == PUBCOMP):
            self.failed.append(NotDelivered(reason, "message with packet id %d refused by the server" % value,
                                            value))
        elif ev == LOST:
            self.failed.append(NotDelivered(0x80, "message with packet id %d lost: the server did not keep the "
                                                  "session" % value.pid, value.pid))


def run(argv):
    a = cli_args.finish(_parser().parse_args(argv))
    modes = (a.message is not None) + bool(a.file) + a.stdin_file + a.stdin_line + a.null_message
    if modes > 1:
        raise cli_args.UsageError("Only one type of message can be sent at once.")
    if not modes:
        raise cli_args.UsageError("Both topic and message must be supplied.")
    payload = None if a.stdin_line else _payload(a)
    c = cli_args.client(a, batch=a.repeat_delay == 0 and not a.stdin_line,
                        max_inflight=a.max_inflight, out_size=1 << 20)
    tally = _Tally()
    c.on_event = tally.on_event
    props = a.props.get("publish")
    cli_args.connect(c)
    start = time.perf_counter()
    sent = 0
    source = _lines(c) if a.stdin_line else (payload for _ in range(a.repeat))
    for m in source:
        c.publish(a.topic, m, a.qos, a.retain, props)
        sent += 1
        if a.repeat_delay:
            c.loop(0)  # out now (a dead link is handled, not raised: -c rides it out)
            time.sleep(a.repeat_delay)
    c.loop(0)
    while c.session.flights.count:  # with -c, loop() reconnects and the session resends
        cli_args.check_link(c, "with %d of %d messages unacknowledged" % (c.session.flights.count, sent))
        c.loop(0.5)
    elapsed = time.perf_counter() - start
    c.disconnect(props=a.props.get("disconnect"))
    if tally.failed:
        e = tally.failed[0]
        e.msg = "%d of %d messages not delivered; the first: %s" % (len(tally.failed), sent, e.msg)
        raise e
    if a.debug or a.repeat > 1:
        print("published %d messages at QoS %d in %.3f s (%.0f msgs/s)" % (sent, a.qos, elapsed,
              sent / elapsed if elapsed else 0), file=sys.stderr)
    return 0
