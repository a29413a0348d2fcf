# The blocking client on MicroPython's unix port with real sockets against a real mosquitto: the tests of
# tests/test_sim_board.py (will, status, QoS 0/1/2 both ways with exact counts, keep-alive at 2 s, topic
# aliases, reconnect with resend through a proxy that drops acks), each with the blocking twin of its board
# app (tests/unix_apps/blocking/), on ports/linux and on ports/common under the esp32 layer, on the 64-bit and
# the 32-bit unix ports (tests/test_unix_aio.py's LAYERS).
import os

import pytest

from tests.support import keepalive_runs, unixport
from tests.test_unix_aio import boards, layer  # noqa: F401 (layer: a fixture)
from tests.test_sim_board import (peers, prefix, uid,  # noqa: F401 (fixtures)
                                  test_will_published_when_the_board_crashes,
                                  test_status_offline_published_by_the_board_and_no_will,
                                  test_qos_both_directions,
                                  test_keepalive_pings_while_idle,
                                  test_v5_topic_aliases,
                                  test_reconnect_resumes_the_session_and_completes_every_flow)

pytestmark = pytest.mark.skipif(not unixport.available(), reason="needs .venv/bin/micropython")
APPS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "unix_apps", "blocking")


@pytest.fixture
def board(layer):
    yield from boards(APPS, layer)


@pytest.fixture(scope="module", params=["unix", "unix32"])
def keepalive_run(request):
    """Three blocking clients (3.1, 3.1.1, 5.0), keepalive 2 s, idle 5 s: (RESULT, client id, broker log)."""
    if request.param == "unix32":
        unixport.need32()
    return keepalive_runs.result(request.param + "-blocking")
