# Topic Names, Topic Filters and matching (spec 4.7, 4.8.2): the spec's own examples, the reason codes raised,
# empty levels and shared subscriptions. Plain asserts only: runs under pytest and under MicroPython.
from tinymqtt.topic import validate_name, validate_filter
from tinymqtt.handlers import matches
from tinymqtt.errors import LocalProtocolError


def raises(fn, arg, reason, cls=LocalProtocolError, **kw):
    try:
        fn(arg, **kw)
    except cls as e:
        assert e.reason == reason, "%r: reason 0x%02X, want 0x%02X" % (arg, e.reason, reason)
        return e
    raise AssertionError("%r was accepted" % (arg,))


def yes(filt, *topics):
    for t in topics:
        assert matches(filt, t), "%r should match %r" % (filt, t)


def no(filt, *topics):
    for t in topics:
        assert not matches(filt, t), "%r should not match %r" % (filt, t)


# ------------------------------------------------------------------ matching: the spec's examples (4.7.1)

def test_multi_level_wildcard_spec_example():
    f = "sport/tennis/player1/#"
    validate_filter(f)
    yes(f, "sport/tennis/player1", "sport/tennis/player1/ranking", "sport/tennis/player1/score/wimbledon")
    no(f, "sport/tennis/player2", "sport/tennis", "sport/tennis/player10", "sport/tennis/player1x/ranking")


def test_hash_matches_the_parent_level():
    yes("sport/#", "sport", "sport/", "sport/tennis", "sport/tennis/player1")
    no("sport/#", "sports", "spor", "sportX/tennis")


def test_hash_alone_matches_everything():
    validate_filter("#")
    yes("#", "sport", "sport/tennis/player1", "/", "/finance", "a//b", "a/")
    no("#", "$SYS", "$SYS/broker/load")


def test_single_level_wildcard_spec_examples():
    validate_filter("sport/tennis/+")
    yes("sport/tennis/+", "sport/tennis/player1", "sport/tennis/player2")
    no("sport/tennis/+", "sport/tennis/player1/ranking", "sport/tennis")
    yes("sport/+", "sport/")
    no("sport/+", "sport", "sport/tennis/x")
    yes("+/tennis/#", "sport/tennis", "sport/tennis/player1")
    no("+/tennis/#", "sport/squash")
    yes("sport/+/player1", "sport/tennis/player1", "sport//player1")
    no("sport/+/player1", "sport/tennis/player2", "sport/player1")


def test_leading_slash_levels():
    yes("+/+", "/finance", "a/b", "/", "a/")
    no("+/+", "finance", "a/b/c")
    yes("/+", "/finance", "/")
    no("/+", "finance", "x/finance")
    no("+", "/finance", "a/b")
    yes("+", "finance", "x")


def test_empty_levels():
    yes("a//b", "a//b")
    no("a//b", "a/b", "a///b")
    yes("a/+/b", "a//b")
    yes("a/+/+", "a//")
    yes("a/#", "a//b", "a/")
    yes("+/+/+", "a//b", "//")
    no("+/+", "//")
    yes("/", "/")
    no("/", "", "a")


def test_literal_and_case():
    yes("sport/tennis", "sport/tennis")
    no("sport/tennis", "Sport/tennis", "sport/tennis/", "sport/tenni", "sport/tennisx", "sport")
    yes("ACCOUNTS", "ACCOUNTS")
    no("ACCOUNTS", "Accounts")
    yes("caf\u00e9/\u20ac/+", "caf\u00e9/\u20ac/x")
    no("caf\u00e9/\u20ac/+", "cafe/\u20ac/x")


def test_dollar_topics():
    no("#", "$SYS/monitor/Clients", "$SYS")
    no("+/monitor/Clients", "$SYS/monitor/Clients")
    no("+", "$SYS")
    yes("$SYS/#", "$SYS/monitor/Clients", "$SYS")
    yes("$SYS/monitor/+", "$SYS/monitor/Clients")
    yes("$SYS/+/Clients", "$SYS/monitor/Clients")
    yes("$foo", "$foo")
    # the rule is about the first character of the topic only
    yes("#", "a/$SYS", "x$")
    yes("+/$SYS", "a/$SYS")


def test_shared_filter_matches_like_its_filter():
    yes("$share/consumer1/sport/tennis/+", "sport/tennis/player1")
    no("$share/consumer1/sport/tennis/+", "sport/tennis/player1/x", "$share/consumer1/sport/tennis/player1")
    yes("$share/g/#", "a", "a/b")
    no("$share/g/#", "$SYS/x")
    yes("$share/g/$SYS/#", "$SYS/x")
    yes("$share/g/a//b", "a//b")
    no("$share/g", "g", "$share/g")
    # '$share' without the slash is a plain filter
    yes("$share", "$share")
    yes("$sharex/g/t", "$sharex/g/t")
    no("$sharex/g/t", "t")


# ------------------------------------------------------------------ Topic Names

def test_valid_names():
    for t in ("sport", "sport/tennis/player1", "/", "/finance", "a//b", "a/", "$SYS/broker", " ", "caf\u00e9",
              "\U0001F600", "x" * 16383, "x" * 65535):
        validate_name(t)


def test_invalid_names_reason_0x90():
    for t in ("", "sport/+", "+", "#", "sport/#", "sport+", "a#b", "a\x00b", "x" * 65536, "\u00e9" * 32768):
        raises(validate_name, t, 0x90)
    raises(validate_name, b"sport", 0x90)
    raises(validate_name, None, 0x90)


def test_name_length_counts_utf8_bytes():
    validate_name("\u00e9" * 32767)  # 65534 bytes
    raises(validate_name, "\u00e9" * 32767 + "ab", 0x90)  # 65536 bytes
    validate_name("\u20ac" * 21845)  # 65535 bytes
    raises(validate_name, "\u20ac" * 21845 + "a", 0x90)


def test_name_error_message_names_problem_and_topic():
    e = raises(validate_name, "sport/+/x", 0x90)
    assert "wildcard" in e.msg and "sport/+/x" in e.msg, e.msg
    e = raises(validate_name, "a\x00b", 0x90)
    assert "U+0000" in e.msg, e.msg
    e = raises(validate_name, "", 0x90)
    assert "empty" in e.msg, e.msg


# ------------------------------------------------------------------ Topic Filters

def test_valid_filters():
    for f in ("#", "+", "/", "+/+", "/+", "+/", "sport/#", "sport/tennis/+", "+/tennis/#", "sport/+/player1",
              "a//b", "a/+/+/#", "$SYS/#", "$share", "$share/g/#", "$share/consumer1/sport/tennis/+",
              "$share/g/+", "$share/g//", "$share/g/$SYS/#", "$share/\u00e9/x", "x" * 65535):
        validate_filter(f)
        if len(f) < 100:
            subscribe5(f)


def subscribe5(filt):
    # MQTT 5's rules for a filter: 4.7's (validate_filter), and 4.8.2's for a shared subscription, which are
    # Session5's (a 3.x session takes $share as a level like any other)
    from tinymqtt.session5 import Session5
    Session5(client_id="t", max_packet_size=128).subscribe([(filt, 0)])


def test_invalid_filters_reason_0x8F():
    for f in ("", "sport+", "sport/#/ranking", "sport/tennis#", "#/a", "a/#/", "##", "a/++", "+a", "a+/b",
              "a/b+", "+#", "a/#b", "a\x00b", "x" * 65536, "$share/g/sport+", "$share/g/#/x"):
        raises(validate_filter, f, 0x8F)
        raises(subscribe5, f, 0x8F)
    for f in ("$share/", "$share//t", "$share/g", "$share/g/", "$share/a+b/t", "$share/+/t", "$share/#/t",
              "$share/g#/t"):
        raises(subscribe5, f, 0x8F)
    for f in ("$share//t", "$share/g/", "$share/g"):  # a level like any other in 3.x
        validate_filter(f)
    for f in (b"a/#", None):
        raises(validate_filter, f, 0x8F)
        raises(subscribe5, f, 0x8F)


def test_filter_error_messages():
    e = raises(validate_filter, "sport/#/ranking", 0x8F)
    assert "#" in e.msg and "sport/#/ranking" in e.msg, e.msg
    e = raises(validate_filter, "sport+", 0x8F)
    assert "+" in e.msg and "sport+" in e.msg, e.msg
    for f in ("$share//t", "$share/g", "$share/g/"):
        e = raises(subscribe5, f, 0x8F)
        assert "share name" in e.msg, e.msg
    e = raises(validate_filter, "y" * 100 + "+", 0x8F)
    assert len(e.msg) < 120, e.msg  # a long filter is shortened in the message


def test_v5_server_without_shared_or_wildcard_subscriptions():
    # CONNACK says Shared Subscription Available 0 (0x2A) or Wildcard Subscription Available 0 (0x28): Session5
    # refuses such a filter before sending anything (0x9E, 0xA2); a malformed share name is still 0x8F.
    from tinymqtt.session5 import Session5
    for prop, refused, code in ((0x2A, "$share/g/a", 0x9E), (0x28, "a/+", 0xA2)):
        s = Session5(client_id="t", max_packet_size=128)
        s.connect(0)
        s.outlen = 0
        s.inbuf[0:7] = bytes([0x20, 5, 0, 0, 2, prop, 0])
        s.received(7, 0)
        raises(lambda f: s.subscribe([(f, 0)]), refused, code)
        raises(lambda f: s.subscribe([(f, 0)]), "$share//a", 0x8F)
        assert s.outlen == 0
        assert s.subscribe([("a/b", 0)]) > 0 and s.outlen > 0
