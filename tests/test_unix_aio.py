# The asyncio client on MicroPython's unix port with real sockets against a real mosquitto: the board apps of
# tests/sim_apps/ and the tests of tests/test_sim_board.py (will, status, QoS 0/1/2 both ways with exact
# counts, keep-alive at 2 s, topic aliases, reconnect with resend through a proxy that drops acks), run with
# ports/linux (board "unix") and, but for the keep-alive module fixture, with ports/common under the esp32
# layer (only `network` faked). The 64-bit PyPI port runs every layer; the 32-bit port (tools/mp32.py: the
# boards' 31-bit small ints, board "unix32") runs ports/linux and the esp32 layer from source (the library
# as deploy builds it runs there frozen instead: tests/test_frozen.py), keep-alive included.
import os

import pytest

from tests.support import unixport
from tests.test_sim_board import (APPS, peers, prefix, keepalive_run, uid,  # noqa: F401 (fixtures)
                                  test_will_published_when_the_board_crashes,
                                  test_status_offline_published_by_the_board_and_no_will,
                                  test_qos_both_directions,
                                  test_keepalive_pings_while_idle,
                                  test_v5_topic_aliases,
                                  test_reconnect_resumes_the_session_and_completes_every_flow)

pytestmark = pytest.mark.skipif(not unixport.available(), reason="needs .venv/bin/micropython")


@pytest.fixture(scope="module", params=["unix", "unix32"])
def board_kind(request):
    if request.param == "unix32":
        unixport.need32()
    return request.param


# picow shares esp32's socket layer (ports/common): see test_unix_transport.py for its own WLAN code on real sockets
LAYERS = ["linux", "esp32", "esp32-mpy",
          pytest.param(("linux", 32), id="linux-32bit"), pytest.param(("esp32", 32), id="esp32-32bit")]


@pytest.fixture(params=LAYERS)
def layer(request):
    return request.param


def boards(apps, layer):
    """The body of a `board` fixture: board(app, host, port, **config) -> the running unixport.Board, an app
    from `apps` on `layer` (a name, or (name, 32) on the 32-bit port); every board is ended after the test."""
    started = []
    name, bits = unixport.split(layer)

    def start(app, host, port, **config):
        env = dict(config, BROKER_HOST=host, BROKER_PORT=port, CLIENT_ID="u%d%s" % (config.get("VERSION", 0), uid()))
        b = unixport.Board(os.path.join(apps, app), name, env, bits=bits)
        b.config = env
        started.append(b)
        return b

    yield start
    for b in started:
        b.close()


@pytest.fixture
def board(layer):
    yield from boards(APPS, layer)
