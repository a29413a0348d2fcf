# One source for every name the core's modules share: the packet types are tinymqtt.wire's (NAMES), the outbound
# flows' states, events and actions tinymqtt.inflight's (its table), the connection states tinymqtt.session's.
# A module that uses one keeps a const() copy, which MicroPython inlines (an imported name would be looked up at
# run time): this test holds every copy to its source, and keeps the bit-mask tests and bare state numbers out of
# the session's modules.
import os
import re

from tinymqtt.wire import NAMES

LIB = os.path.join(os.path.dirname(__file__), "..", "lib", "tinymqtt")
CONST = re.compile(r"^(_[A-Z0-9_]+) = const\((-?(?:0x[0-9A-Fa-f]+|\d+))\)", re.M)


def consts(module):
    with open(os.path.join(LIB, module), encoding="utf-8") as f:
        return {k: int(v, 0) for k, v in CONST.findall(f.read())}


def modules():
    return sorted(n for n in os.listdir(LIB) if n.endswith(".py"))


def test_every_packet_type_copy_has_its_number_in_packets_names():
    types = NAMES.split()
    for m in modules():
        for name, v in consts(m).items():
            if name[1:] in types[1:]:
                assert types[v] == name[1:], (m, name, v)


def test_every_state_event_and_action_copy_matches_its_source():
    sources = {}
    for m in ("inflight.py", "session.py"):
        for name, v in consts(m).items():
            sources.setdefault(name, (m, v))
    for m in modules():
        for name, v in consts(m).items():
            if name in sources:
                assert v == sources[name][1], "%s: %s = %d, but %s says %d" % (m, name, v, *sources[name])


def test_one_name_one_meaning_across_the_core():
    seen = {}
    for m in modules():
        for name, v in consts(m).items():
            assert seen.setdefault(name, (m, v))[1] == v, "%s: %s = %d, %s says %d" % (m, name, v, *seen[name])


def test_the_codec_and_session_modules_test_no_bit_masks_and_no_bare_states():
    mask = re.compile(r"0x[0-9A-Fa-f]+ >> \w+ & \d")
    bare = re.compile(r"\b(state|st|ev|t)\s*[=!<>]=\s*\d|\bstate\[[^]]*\]\s*[=!]=\s*\d|_io\(-|wait_for\(-|_result\(-")
    for m in ("packets.py", "inflight.py", "session.py", "session5.py", "retry.py", "app_acks.py", "driver.py",
              "client.py", "aio.py"):
        with open(os.path.join(LIB, m), encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                code = line.split("#")[0]
                assert not mask.search(code) and not bare.search(code), "%s:%d: %s" % (m, n, line.strip())
