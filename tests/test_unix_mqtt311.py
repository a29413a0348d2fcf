# Profile mqtt311 as tools/deploy builds it for the esp32 (one bundled .mpy and the reason names loaded when an
# error is shown, short errors and names, the MQTT 5, app_acks and 3.x retry hooks compiled out) on MicroPython's
# unix port with real sockets against a real mosquitto: the blocking client's will, status, QoS 0/1/2 both ways and
# reconnect with resend, for MQTT 3.1 and 3.1.1 (the versions the profile has), as tests/test_unix_blocking.py runs
# them on the full library.
import pytest

from tests import test_sim_board as flows
from tests.support import unixport
from tests.test_sim_board import peers, prefix, uid  # noqa: F401 (fixtures)
from tests.test_unix_aio import boards
from tests.test_unix_blocking import APPS

pytestmark = pytest.mark.skipif(not unixport.available(), reason="needs .venv/bin/micropython")
VERSIONS = [pytest.param(3, id="v3.1"), pytest.param(4, id="v3.1.1")]


@pytest.fixture
def board():
    yield from boards(APPS, "esp32-mqtt311")


@pytest.mark.parametrize("version", VERSIONS)
def test_will_published_when_the_board_crashes(broker, board, peers, prefix, version):
    flows.test_will_published_when_the_board_crashes(broker, board, peers, prefix, version)


@pytest.mark.parametrize("version", VERSIONS)
def test_status_offline_published_by_the_board_and_no_will(broker, board, peers, prefix, version):
    flows.test_status_offline_published_by_the_board_and_no_will(broker, board, peers, prefix, version)


@pytest.mark.parametrize("qos", [0, 1, 2])
@pytest.mark.parametrize("version", VERSIONS)
def test_qos_both_directions(broker, board, peers, prefix, version, qos):
    flows.test_qos_both_directions(broker, board, peers, prefix, version, qos)


@pytest.mark.parametrize("version", VERSIONS)
def test_reconnect_resumes_the_session_and_completes_every_flow(make_broker, board, peers, prefix, version):
    flows.test_reconnect_resumes_the_session_and_completes_every_flow(make_broker, board, peers, prefix, version)


def test_the_mqtt311_tree_is_one_bundle_without_mqtt5(tmp_path):
    import os
    unixport.tree(os.path.join(APPS, "qos.py"), str(tmp_path), "esp32-mqtt311", {"VERSION": 4})
    assert sorted(os.listdir(tmp_path / "lib" / "tinymqtt")) == ["__init__.mpy", "reasons.mpy"]
