# The mosquitto_pub / mosquitto_sub flags of issue 13, through the real CLI against real mosquitto (-L -I -D
# -F -N -T -R --retained-only --remove-retained -d, -V 3.x QoS 2 with the default -M 20), and the option
# parsing that needs no broker (-L mqtts://, TLS options, -D errors, -F widths) in-process.
import json
import ssl
import types
import uuid

import pytest

from tests.test_cli import client, run_cli, set_retained  # noqa: F401 (client is a fixture)
from tinymqtt_cli import args as cli_args
from tinymqtt_cli.formats import format_message
from tinymqtt_cli.pub import _parser as pub_parser
from tinymqtt_cli.sub import _parser as sub_parser


@pytest.fixture
def topic():
    return "flags/%s" % uuid.uuid4().hex[:10]


@pytest.fixture
def retained(client):
    """retained(topic, payload): a retained message, cleared after the test."""
    made = []

    def put(t, payload):
        made.append(t)
        set_retained(client, t, payload)

    yield put
    for t in made:
        set_retained(client, t, b"")


def test_url_filter_out_and_format(broker, retained, topic):
    retained(topic + "/a", b"one")
    retained(topic + "/b", b"two")
    r = run_cli("sub", "-L", "mqtt://127.0.0.1:%d/%s/%%23" % (broker.port, topic), "-T", topic + "/b", "-C", 1,
                "-F", r"%t|%p|%q|%r|%l|%x|%5.2t|%-4l|\t%%")
    assert r.returncode == 0, r
    assert r.stdout == ("%s/a|one|0|1|3|6f6e65|%s|3   |\t%%\n" % (topic, topic[:2].rjust(5))).encode()
    r = run_cli("sub", "-p", broker.port, "-t", topic + "/a", "-C", 1, "-F", "%j")
    j = json.loads(r.stdout)
    assert (j["topic"], j["qos"], j["retain"], j["payloadlen"], j["payload"]) == (topic + "/a", 0, 1, 3, "one")
    r = run_cli("sub", "-p", broker.port, "-t", topic + "/a", "-C", 1, "-N", "-v")
    assert r.returncode == 0 and r.stdout == (topic + "/a one").encode()  # -N: no end of line


def test_v5_properties_with_d_and_client_id_prefix_with_i(broker, topic):
    r = run_cli("pub", "-p", broker.port, "-V", 5, "-q", 1, "-r", "-t", topic, "-m", "hi", "-I", "pfx-", "-d",
                "-D", "publish", "user-property", "k", "v", "-D", "publish", "content-type", "text/x")
    assert r.returncode == 0, r  # PUBACK 0x10 (no matching subscribers) is a success
    lines = r.stderr.decode().splitlines()
    cid = lines[0].split()[1]
    assert cid.startswith("pfx-") and cid[4:].isdigit()
    assert lines[:5] == ["Client %s sending CONNECT" % cid, "Client %s received CONNACK (0)" % cid,
                         "Client %s sending PUBLISH (d0, q1, r1, m1, '%s', ... (2 bytes))" % (cid, topic),
                         "Client %s received PUBACK (Mid: 1, RC:16)" % cid, "Client %s sending DISCONNECT" % cid]
    r = run_cli("sub", "-p", broker.port, "-V", 5, "-t", topic, "-C", 1, "-F", "%C %P %p")
    run_cli("pub", "-p", broker.port, "-t", topic, "-r", "-n")  # clear it
    assert r.returncode == 0 and r.stdout == b"text/x k:v hi\n", r


def test_no_retained_retained_only_and_remove_retained(broker, retained, topic):
    retained(topic + "/a", b"one")
    retained(topic + "/b", b"two")
    r = run_cli("sub", "-p", broker.port, "-t", topic + "/#", "--remove-retained", "-C", 2, "-v")
    assert r.returncode == 0 and sorted(r.stdout.splitlines()) == [(topic + "/a one").encode(),
                                                                    (topic + "/b two").encode()], r
    r = run_cli("sub", "-p", broker.port, "-t", topic + "/#", "--retained-only", "-W", 0.5)
    assert r.returncode == 27 and r.stdout == b"" and r.stderr == b"Timed out\n", r  # nothing retained left
    retained(topic + "/c", b"three")
    r = run_cli("sub", "-p", broker.port, "-t", topic + "/#", "-R", "-W", 0.5)
    assert r.returncode == 27 and r.stdout == b"", r  # -R: retained (stale) messages are not printed


@pytest.mark.parametrize("version", ["31", "311"])
def test_v3_qos2_burst_finishes_with_mosquittos_default_inflight(make_broker, version):
    # Issue 13 point 1: with the old window of 256 mosquitto (default limits) dropped the connection and the
    # CLI hung. -M 20 (mosquitto_pub's default) is accepted; exit 0 means all 500 got PUBCOMP.
    b = make_broker(extra_conf="max_inflight_messages 20\nmax_queued_messages 1000")
    r = run_cli("pub", "-p", b.port, "-V", version, "-q", 2, "-t", "t/a", "-m", "hello", "-N", 500)
    assert r.returncode == 0 and r.stderr.startswith(b"published 500 messages at QoS 2"), r


def _opts(parser, *argv):
    return cli_args.finish(parser().parse_args([str(a) for a in argv]))


def test_url_and_port_ask_for_tls():
    a = _opts(pub_parser, "-L", "mqtts://us%40er:pa:ss@example.org/a/b", "-m", "x")
    assert (a.tls, a.host, a.port, a.username, a.pw, a.topic) == (True, "example.org", 8883, "us@er", "pa:ss", "a/b")
    a = _opts(sub_parser, "-L", "mqtt://h:1999/x", "-t", "y")
    assert (a.tls, a.port, a.topic) == (False, 1999, ["y", "x"])
    assert _opts(sub_parser, "-p", 8883, "-t", "x").tls is True
    assert _opts(sub_parser, "-t", "x").port == 1883


def test_tls_options_make_the_context():
    a = _opts(sub_parser, "-t", "x", "--insecure", "--tls-version", "tlsv1.2")
    ctx = cli_args.tls_context(a)
    assert a.port == 8883 and ctx.check_hostname is False and ctx.verify_mode == ssl.CERT_REQUIRED
    assert ctx.minimum_version == ctx.maximum_version == ssl.TLSVersion.TLSv1_2
    assert cli_args.tls_context(_opts(sub_parser, "-t", "x")) is None


def test_session_expiry_and_property_errors():
    assert _opts(sub_parser, "-t", "x", "-c", "-i", "k", "-V", 5).session_expiry == 0xFFFFFFFF
    assert _opts(sub_parser, "-t", "x", "-c", "-i", "k", "-x", 30).session_expiry == 30
    assert _opts(sub_parser, "-t", "x", "-x", -1).session_expiry == 0xFFFFFFFF
    for bad in ("soon", "4294967296", "-2"):
        with pytest.raises(cli_args.UsageError):
            _opts(sub_parser, "-t", "x", "-x", bad)
    for bad in (["-D", "publish", "no-such", "1"], ["-D", "connect", "content-type", "x"],
                ["-D", "publish", "user-property", "k"], ["-D", "publish", "message-expiry-interval", "soon"]):
        with pytest.raises(cli_args.UsageError):
            _opts(pub_parser, "-t", "x", "-m", "y", "-V", 5, *bad)
    with pytest.raises(cli_args.UsageError):  # properties need MQTT 5
        _opts(pub_parser, "-t", "x", "-m", "y", "-D", "publish", "content-type", "x")


def test_format_widths_escapes_and_properties():
    m = types.SimpleNamespace(topic="a/b", payload=memoryview(b"\x01z"), qos=1, retain=True, pid=7,
                              props={0x02: 60, 0x26: [("k", "v"), ("k", "w")]})
    out = format_message(r"%05m|%-3q|%X|%E|%P|@@|\e\\", m, now=0)
    assert out == b"00007|1|017A|60|k:v k:w|@|\x1b\\"  # (%q takes no width in mosquitto_sub: test_cli_mosquitto)
