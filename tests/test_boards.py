# boards.toml and tools/boards.py: the real file loads with the boards and flags deploy relies on, and every
# mistake in a board table fails with an error that names the file, the board and the key.
import pytest

from tools import boards
from tools.boards import BoardError


def toml_value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return '"%s"' % v
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    return str(v)


def board_text(name="esp32", drop=(), **changes):
    """A valid board table (esp32's real one), with keys changed or dropped, as TOML text."""
    t = {
        "port": "ports/esp32", "support": ["ports/common/tinymqtt_board.py"], "platform": "esp32",
        "micropython": "1.27.0", "mpy_cross": ["-march=xtensawin"], "lib": ["tinymqtt/session.py"],
        "heap_budget": 81920, "max_packet_size": 4096, "out_size": 2048, "max_inflight": 8, "receive_maximum": 8,
        "topic_alias_maximum": 8, "keepalive": 60, "wlan": True,
    }
    for k in drop:
        del t[k]
    config = changes.pop("config", None)
    t.update(changes)
    text = "[%s]\n" % name + "".join("%s = %s\n" % (k, toml_value(v)) for k, v in t.items())
    if config is not None:
        text += "[%s.config]\n" % name + "".join("%s = %s\n" % (k, toml_value(v)) for k, v in config.items())
    return text


def error(text):
    with pytest.raises(BoardError) as e:
        boards.parse(text, "boards.toml")
    return str(e.value)


def test_the_repository_boards_load_with_their_flags():
    b = boards.load()
    assert {"esp32", "picow", "linux", "sim"} <= set(b)
    assert b["esp32"].mpy_cross == ["-march=xtensawin"] and b["esp32"].arch == "xtensawin"
    assert b["picow"].mpy_cross == ["-march=armv6m"] and b["picow"].arch == "armv6m"
    assert b["linux"].mpy_cross == [] and b["sim"].mpy_cross == []
    assert b["esp32"].port_module == "ports/esp32/tinymqtt_port.py"
    assert "ports/common/tinymqtt_board.py" in b["esp32"].support and b["esp32"].support == b["picow"].support
    for board in b.values():
        assert board.micropython >= (1, 27, 0)
        assert "tinymqtt/session.py" in board.lib
        assert set(board.session_options()) == {"max_packet_size", "out_size", "max_inflight", "receive_maximum",
                                                "topic_alias_maximum", "keepalive"}
    assert b["esp32"].wlan and b["picow"].wlan and not b["sim"].wlan
    assert b["picow"].config["LED_PIN"] == "LED" and b["picow"].config["WIFI_COUNTRY"]


def test_a_valid_table_parses():
    (b,) = boards.parse(board_text(config={"LED_PIN": 2}), "boards.toml").values()
    assert (b.name, b.micropython, b.max_packet_size, b.config) == ("esp32", (1, 27, 0), 4096, {"LED_PIN": 2})
    (b,) = boards.parse(board_text(micropython="1.28"), "boards.toml").values()
    assert b.micropython == (1, 28, 0)


@pytest.mark.parametrize("text, key, why", [
    (board_text(max_pakcet_size=4096), "max_pakcet_size", "unknown key (did you mean max_packet_size?)"),
    (board_text(drop=["port"]), "port", "missing"),
    (board_text(drop=["keepalive"]), "keepalive", "missing"),
    (board_text(port="ports/esp8266"), "port", "ports/esp8266/tinymqtt_port.py does not exist"),
    (board_text(micropython="1.27.x"), "micropython", "must be a version like"),
    (board_text(micropython=1.27), "micropython", "must be a version like"),
    (board_text(mpy_cross=["-march=xtensa-lx7"]), "mpy_cross", "unknown architecture 'xtensa-lx7'"),
    (board_text(mpy_cross=["--fast"]), "mpy_cross", "flag '--fast'"),
    (board_text(mpy_cross="-march=armv6m"), "mpy_cross", "must be a list of strings"),
    (board_text(keepalive="60"), "keepalive", "must be an integer, got '60'"),
    (board_text(keepalive=70000), "keepalive", "must be between 0 and 65535, got 70000"),
    (board_text(max_inflight=0), "max_inflight", "must be between 1 and 65535"),
    (board_text(receive_maximum=True), "receive_maximum", "must be an integer"),
    (board_text(max_packet_size=64), "max_packet_size", "must be between 128"),
    (board_text(out_size=8192), "out_size", "larger than max_packet_size 4096"),
    (board_text(heap_budget=9000), "heap_budget", "the buffers alone (max_packet_size + out_size = 6144)"),
    (board_text(wlan="yes"), "wlan", "must be true or false"),
    (board_text(lib=["tinymqtt/nothing.py"]), "lib", "lib/tinymqtt/nothing.py does not exist"),
    (board_text(support=["ports/common/missing.py"]), "support", "ports/common/missing.py does not exist"),
    (board_text(platform=""), "platform", "must be a non-empty string"),
    (board_text(config={"led_pin": 2}), "config", "'led_pin' is not an UPPER_CASE name"),
])
def test_errors_name_the_board_and_the_key(text, key, why):
    msg = error(text)
    assert msg.startswith("boards.toml: [esp32] %s: " % key), msg
    assert why in msg, msg


def test_errors_for_the_whole_file():
    assert "not valid TOML" in error("[esp32\nport = 1\n")
    assert "no boards" in error("")
    assert error("picow = 3\n") == "boards.toml: [picow] must be a table of settings, got 3"
    assert "a board name is lower-case" in error(board_text(name="ESP32"))
    msg = error(board_text() + board_text(name="picow", keepalive=-1))
    assert msg.startswith("boards.toml: [picow] keepalive:"), "the failing board is named, not the first one"


def test_get_names_the_known_boards(tmp_path):
    with pytest.raises(BoardError) as e:
        boards.get("esp8266")
    assert "no board 'esp8266'" in str(e.value) and "esp32, linux, picow, sim" in str(e.value)
    with pytest.raises(BoardError) as e:
        boards.load(str(tmp_path / "missing.toml"))
    assert "cannot read it" in str(e.value)


def profile_text(name="small", **t):
    t.setdefault("lib", ["tinymqtt/session.py"])
    return "[profile.%s]\n" % name + "".join("%s = %s\n" % (k, toml_value(v)) for k, v in t.items())


@pytest.mark.parametrize("text, where, why", [
    (profile_text(lib=["tinymqtt/nothing.py"]), "profile.small] lib", "does not exist"),
    (profile_text(leaves="x"), "profile.small] leaves", "unknown key"),
    (profile_text(out_size="1k"), "profile.small] out_size", "must be an integer"),
    (profile_text(leaves_out="aio"), "profile.small] leaves_out", "must be a list of strings"),
])
def test_profile_errors_name_the_profile_and_the_key(text, where, why):
    msg = error(profile_text("full", lib=["tinymqtt/session.py"]) + text + board_text(drop=["lib"]))
    assert msg.startswith("boards.toml: [%s: " % where) and why in msg, msg


def test_a_board_without_lib_takes_the_full_profile_and_a_profile_its_options():
    text = profile_text("full", lib=["tinymqtt/session.py"]) + profile_text(
        "small", lib=["tinymqtt/client.py"], out_size=1024) + board_text(drop=["lib"])
    (b,) = boards.parse(text).values()
    assert b.lib == ["tinymqtt/session.py"] and b.profile == "full"
    p = boards.parse_profiles(text)["small"]
    assert p.lib == ["tinymqtt/client.py"] and p.session == {"out_size": 1024}
    assert "missing (and no [profile.full]" in error(board_text(drop=["lib"]))
    assert "no [profile.full]" in error(profile_text("small") + board_text())
