# matches() against a reference built on str.split, for random topics and filters over a small alphabet that
# includes '/', '+', '#' and '$'; and validate_filter() against a split-based reference of the filter rules.
from hypothesis import given, settings, strategies as st

from tinymqtt.errors import LocalProtocolError
from tinymqtt.handlers import matches
from tinymqtt.topic import validate_filter, validate_name
from tinymqtt.session5 import Session5


def share_parts(filt):
    # '$share/g/a/+' -> ('g', 'a/+'); a plain filter f -> (None, f): the reference split of a shared subscription
    if not filt.startswith("$share/"):
        return None, filt
    i = filt.find("/", 7)
    return (filt[7:], "") if i < 0 else (filt[7:i], filt[i + 1:])


NAME_CHARS = "ab$/"
FILTER_CHARS = "ab$/+#"


def ref_matches(filt, topic):
    if filt.startswith("$share/"):
        parts = filt.split("/", 2)
        if len(parts) < 3:
            return False
        filt = parts[2]
    if topic.startswith("$") and filt[:1] in ("+", "#"):
        return False
    fl, tl = filt.split("/"), topic.split("/")
    for k, f in enumerate(fl):
        if f == "#":
            return True
        if k >= len(tl):
            return False
        if f != "+" and f != tl[k]:
            return False
    return len(fl) == len(tl)


def ref_filter_ok(filt, v5=True):
    if v5 and filt.startswith("$share/"):
        parts = filt.split("/", 2)
        if len(parts) < 3 or not parts[1] or "+" in parts[1] or "#" in parts[1]:
            return False
        filt = parts[2]
    if not filt:
        return False
    levels = filt.split("/")
    for k, lv in enumerate(levels):
        if "+" in lv and lv != "+":
            return False
        if "#" in lv and (lv != "#" or k != len(levels) - 1):
            return False
    return True


def is_valid(fn, s):
    try:
        fn(s)
        return True
    except LocalProtocolError:
        return False


names = st.text(alphabet=NAME_CHARS, min_size=1, max_size=12)
raw_filters = st.text(alphabet=FILTER_CHARS, min_size=0, max_size=12)


@st.composite
def valid_filters(draw):
    levels = draw(st.lists(st.sampled_from(["", "a", "b", "ab", "$", "$a", "+", "a$"]), min_size=1, max_size=5))
    if draw(st.booleans()):
        levels.append("#")
    f = "/".join(levels) or "a"
    if draw(st.integers(0, 3)) == 0:
        f = "$share/" + draw(st.sampled_from(["g", "ab", "$"])) + "/" + f
    return f


@st.composite
def related_pairs(draw):
    # a filter built from a topic, so that a good share of the pairs match
    topic = draw(names)
    levels = topic.split("/")
    out = []
    for k, lv in enumerate(levels):
        r = draw(st.integers(0, 5))
        if r == 0:
            out.append("+")
        elif r == 1:
            out.append("#")
            break
        elif r == 2:
            out.append(lv + "a")
        else:
            out.append(lv)
    if out[-1] != "#" and draw(st.integers(0, 4)) == 0:
        out.append(draw(st.sampled_from(["#", "+", "a"])))
    return "/".join(out), topic


@settings(max_examples=1500, deadline=None)
@given(valid_filters(), names)
def test_matches_agrees_with_split_reference(filt, topic):
    assert validate_filter(filt) is None
    assert matches(filt, topic) == ref_matches(filt, topic), (filt, topic)


@settings(max_examples=1500, deadline=None)
@given(related_pairs())
def test_matches_agrees_on_related_pairs(pair):
    filt, topic = pair
    assert is_valid(validate_filter, filt)
    assert matches(filt, topic) == ref_matches(filt, topic), (filt, topic)


@settings(max_examples=1500, deadline=None)
@given(raw_filters, names)
def test_matches_agrees_on_any_valid_filter(filt, topic):
    if is_valid(validate_filter, filt):
        assert matches(filt, topic) == ref_matches(filt, topic), (filt, topic)


@settings(max_examples=1500, deadline=None)
@given(st.one_of(raw_filters, raw_filters.map(lambda s: "$share/" + s)))
def test_validate_filter_agrees_with_split_reference(filt):
    # topic.validate_filter: the rules of 4.7 alone ($share is a level like any other); Session5.subscribe adds
    # the shared subscriptions' (4.8.2)
    assert is_valid(validate_filter, filt) == ref_filter_ok(filt, False), filt
    assert is_valid(subscribe5, filt) == ref_filter_ok(filt), filt


def subscribe5(filt):
    Session5(client_id="t", max_packet_size=128).subscribe([(filt, 0)])


@settings(max_examples=1000, deadline=None)
@given(st.text(alphabet=FILTER_CHARS + "\x00", min_size=0, max_size=12))
def test_validate_name_rules(topic):
    ok = bool(topic) and "+" not in topic and "#" not in topic and "\x00" not in topic
    assert is_valid(validate_name, topic) == ok, topic


@settings(max_examples=1000, deadline=None)
@given(valid_filters(), names)
def test_share_prefix_is_transparent(filt, topic):
    group, inner = share_parts(filt)
    assert matches(filt, topic) == matches(inner, topic)
    if group is None:
        assert matches("$share/g/" + filt, topic) == matches(filt, topic)


@settings(max_examples=1000, deadline=None)
@given(names)
def test_a_name_matches_itself_and_hash(topic):
    assert matches(topic, topic)
    assert matches("#", topic) == (not topic.startswith("$"))
