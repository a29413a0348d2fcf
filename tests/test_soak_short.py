# A ~10 s version of `python -m tools.soak` (tools/soak.py): steady publishing both ways through the fault proxy
# with a cut every half second, against a real mosquitto (as many messages, cuts and samples as 20 s at half
# this rate). Asserted: no message lost either way, no QoS 2 duplicate on the way out, no LOST event, the in-flight
# and inbound tables drained, no fd left open or growing, the process's RSS and Python heap without a growth
# trend beyond generous bounds, and the Session's heap flat under MicroPython (the simulated board, when node
# and the npm MicroPython are there). Longer: python -m tools.soak --minutes 10 --board
import os

from tests.support import report
from tools.soak import soak, summary

SECONDS = float(os.environ.get("TINYMQTT_SOAK_SECONDS", "10"))


def test_soak_short():
    r = soak(SECONDS, rate=300, cut_every=0.5, sample_every=0.5, log=lambda *a: None)
    text = summary(r)
    assert not r["failures"], text
    assert r["in_flight_max"] <= 32 and r["inbound_table_max"] <= 64 * 32
    report.record("soak (%d s)" % SECONDS, "%d msgs out, %d in, %d cuts, 0 lost, RSS drift %.0f kB, fds %d -> %d%s" % (
        r["published"], r["received_from_feeder"], r["cuts"], r["rss_kb_drift"], r["fds_start"], r["fds_end"],
        ", MicroPython session heap %d -> %d B" % (r["mp_heap_first"], r["mp_heap_last"]) if "mp_heap_first" in r
        else ""))
