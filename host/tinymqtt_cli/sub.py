# `tinymqtt sub`: mosquitto_sub's flags on the blocking client. A refused subscription or a lost connection
# is an error (with -c a lost connection is followed by a reconnect that resumes the session); v5 accepts
# inbound topic aliases. CPython only.
import sys
import time

from tinymqtt_cli import args as cli_args
from tinymqtt_cli.formats import message_line
from tinymqtt.errors import MQTTError
from tinymqtt.packets import SUBACK, sub_options
from tinymqtt.handlers import matches

TOPIC_ALIASES = 16  # inbound topic aliases a v5 sub accepts


class TimedOut(Exception):
    """-W ran out (mosquitto_sub: "Timed out", exit 27)."""


def _parser():
    ap = cli_args.parser("tinymqtt sub", "Subscribe like mosquitto_sub; a refused subscription is an error.")
    ap.add_argument("-t", "--topic", action="append", default=[])
    ap.add_argument("-T", "--filter-out", action="append", default=[], help="do not print topics matching this")
    ap.add_argument("-U", "--unsubscribe", action="append", default=[], help="unsubscribe from this filter first")
    ap.add_argument("-C", "--count", default=0, help="exit after this many messages",
                    type=cli_args.checked(cli_args.in_range(1, 2 ** 31 - 1), 'Invalid message count "%d".'))
    ap.add_argument("-W", "--timeout", default=0, help="exit 27 after this many seconds (fractions too)",
                    type=cli_args.checked(cli_args.seconds, 'Invalid timeout "%d".'))
    ap.add_argument("-E", "--exit-after-sub", action="store_true", help="exit once subscribed")
    ap.add_argument("-v", "--verbose", action="store_true", help="print the topic before each payload")
    ap.add_argument("-F", "--format", help="output format, as mosquitto_sub -F (%%t %%p %%q %%r %%j ...)")
    ap.add_argument("-N", "--no-eol", action="store_true", help="no end of line after each payload")
    ap.add_argument("-R", "--no-retained", action="store_true", help="do not print retained (stale) messages")
    ap.add_argument("--retained-only", action="store_true", help="exit at the first non-retained message")
    ap.add_argument("--remove-retained", action="store_true", help="clear each retained message received")
    ap.add_argument("--quiet-count", action="store_true", help="print only the number of messages at the end")
    return ap


class _Printer:
    """Handles each message: filters, prints, counts; says when the command is done."""

    def __init__(self, a, c):
        self.a, self.c = a, c
        self.count = 0
        self.done = False
        self.refused = None  # MQTTError for a subscription the server refused (also on a resubscribe)
        self.out = sys.stdout.buffer

    def on_message(self, m):
        a = self.a
        if self.done or any(matches(f, m.topic) for f in a.filter_out):
            return
        if a.retained_only and not m.retain:
            self.done = True
            return
        if a.remove_retained and m.retain and len(m.payload):
            self.c.publish(m.topic, b"", 0, True)
        if a.no_retained and m.retain:
            return
        self.count += 1
        if not a.quiet_count:
            self.out.write(message_line(a, m, self.c.session.client_id))
            self.out.flush()
        if a.count and self.count >= a.count:
            self.done = True

    def on_event(self, ev, value, reason):
        if ev == SUBACK and not self.refused:
            for code in value.codes:
                if code >= 0x80:
                    self.refused = MQTTError(code, "subscription refused by the server")


def run(argv):
    a = cli_args.finish(_parser().parse_args(argv))
    if a.no_retained and a.retained_only:
        raise cli_args.UsageError("Combining '-R' and '--retained-only' makes no sense.")
    extra = dict(topic_alias_maximum=TOPIC_ALIASES) if a.version == 5 else {}
    c = cli_args.client(a, receive_maximum=1024, max_inflight=16, **extra)
    pr = _Printer(a, c)
    c.on_message, c.on_event = pr.on_message, pr.on_event
    start = time.monotonic()
    try:
        cli_args.connect(c)
        if a.unsubscribe:
            c.unsubscribe(a.unsubscribe, a.props.get("unsubscribe"))
        codes = c.subscribe([(t, sub_options(a.qos)) for t in a.topic], props=a.props.get("subscribe"))
        for t, code in zip(a.topic, codes):
            if code >= 0x80:
                raise MQTTError(code, "subscription to %r refused by the server" % t)
        while not pr.done and not a.exit_after_sub:
            if pr.refused:
                raise pr.refused
            if a.timeout and time.monotonic() - start > a.timeout:
                raise TimedOut()
            cli_args.check_link(c, "after %d messages" % pr.count)
            c.loop(0.2 if not a.timeout else max(min(0.2, start + a.timeout - time.monotonic()), 0.01))
    except KeyboardInterrupt:
        pass  # ^C ends a subscription normally, as mosquitto_sub
    except (TimedOut, MQTTError):
        if c.transport:
            c.disconnect()  # a clean end, as mosquitto_sub: the error is ours to report, not the will's
        raise
    c.disconnect(props=a.props.get("disconnect"))
    if a.quiet_count:
        print(pr.count)
    return 0
