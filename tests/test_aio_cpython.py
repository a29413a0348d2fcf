# The asyncio client under CPython's asyncio (ports/linux): the same board apps (tests/sim_apps/) and the same
# tests as tests/test_sim_board.py, with tools.sim's "linux" board running main.py under this Python.
import pytest

from tests.test_sim_board import (board, peers, prefix, keepalive_run,  # noqa: F401 (fixtures)
                                  test_will_published_when_the_board_crashes,
                                  test_status_offline_published_by_the_board_and_no_will,
                                  test_qos_both_directions,
                                  test_keepalive_pings_while_idle,
                                  test_v5_topic_aliases,
                                  test_reconnect_resumes_the_session_and_completes_every_flow)


@pytest.fixture(scope="module")
def board_kind():
    return "linux"
