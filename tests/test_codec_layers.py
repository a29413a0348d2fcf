# The codec's layers, checked in a fresh interpreter each: a 3.1.1 client's every packet (encoded, and read in
# place as its session reads it) never loads props.py, the MQTT 5 half, nor cli_codec.py; without cli_codec.py
# the client half refuses what only a server sends and has no general decoder; importing it plugs both in.
import os
import shutil
import subprocess
import sys

LIB = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib")


def run(code):
    p = subprocess.run([sys.executable, "-I", "-c", "import sys; sys.path.insert(0, %r)\n" % LIB + code],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    return p.stdout


def test_a_311_client_codec_never_loads_mqtt5():
    out = run(
        "from tinymqtt.packets import Packet, encode, encode_publish, read_packet, read_publish, PUBLISH, CONNECT, \\\n"
        "    PUBACK, PUBREC, PUBREL, PUBCOMP, PINGREQ, SUBSCRIBE, UNSUBSCRIBE, DISCONNECT\n"
        "b = bytearray(256)\n"
        "w = Packet(PUBLISH, topic='w', payload=b'x', qos=1)\n"
        "for p in (Packet(CONNECT, client_id='c', clean=True, keepalive=0, username='u', password=b'p', will=w),\n"
        "          Packet(PUBACK, pid=1),\n"
        "          Packet(PUBREC, pid=1), Packet(PUBREL, pid=1), Packet(PUBCOMP, pid=1), Packet(PINGREQ),\n"
        "          Packet(SUBSCRIBE, pid=1, topics=[('a/+', 1)]), Packet(UNSUBSCRIBE, pid=1, topics=['a/+']),\n"
        "          Packet(DISCONNECT)):\n"
        "    encode(b, p, 4)\n"
        "encode_publish(b, 4, b't', b'x', 2, True, True, 9)\n"
        "for raw in (b'\\x20\\x02\\x01\\x00', b'\\x34\\x06\\x00\\x01t\\x00\\x09x', b'\\x40\\x02\\x00\\x01',\n"
        "            b'\\x50\\x02\\x00\\x01', b'\\x62\\x02\\x00\\x01', b'\\x70\\x02\\x00\\x01', b'\\x90\\x04\\x00\\x01\\x01\\x80',\n"
        "            b'\\xb0\\x02\\x00\\x01', b'\\xd0\\x00'):\n"
        "    p = Packet(raw[0] >> 4)\n"
        "    (read_publish if p.type == PUBLISH else read_packet)(memoryview(raw), 0, len(raw), p, 4)\n"
        "print(sorted(m for m in sys.modules if m.startswith('tinymqtt')))\n")
    assert eval(out) == ["tinymqtt", "tinymqtt.errors", "tinymqtt.packets", "tinymqtt.wire"]


def test_the_server_half_is_refused_until_cli_codec_plugs_it_in():
    out = run(
        "from tinymqtt.packets import Packet, encode, CONNECT, CONNACK, SUBACK\n"
        "from tinymqtt.errors import MQTTError\n"
        "connect = b'\\x10\\x0d\\x00\\x04MQTT\\x04\\x02\\x00\\x3c\\x00\\x01c'\n"
        "def both():\n"
        "    for f in (lambda: encode(bytearray(8), Packet(CONNACK), 4),\n"
        "              lambda: encode(bytearray(8), Packet(SUBACK, pid=1, codes=[0]), 4)):\n"
        "        try:\n"
        "            print(type(f()).__name__)\n"
        "        except MQTTError as e:\n"
        "            print(type(e).__name__, hex(e.reason))\n"
        "both()\n"
        "print('tinymqtt.cli_codec' in sys.modules)\n"
        "import tinymqtt.cli_codec\n"
        "from tinymqtt.packets import encode, decode  # both halves' now (a name bound before keeps the client's)\n"
        "print('tinymqtt.cli_codec' in sys.modules)\n"
        "both()\n"
        "print(decode(connect, 4) == Packet(CONNECT, client_id='c', keepalive=60))\n")
    assert out.split("\n") == ["LocalProtocolError 0x82", "LocalProtocolError 0x82", "False", "True", "int", "int",
                               "True", ""]


def test_decode_is_importable_from_packets_on_the_host():
    # A host tool's `from tinymqtt.packets import decode` loads the server half on first use (a board has none).
    out = run("from tinymqtt.packets import decode, CONNACK\n"
              "p = decode(b'\\x20\\x02\\x01\\x00', 4)\n"
              "print(p.type == CONNACK, p.session_present, 'tinymqtt.cli_codec' in sys.modules)\n")
    assert out.split() == ["True", "True", "True"]


def test_mqtt5_subscription_options_are_props_and_refused_without_them(tmp_path):
    # sub_options() builds MQTT 5's options byte (a 3.x subscription takes the QoS alone): props.py has it,
    # packets.sub_options loads it; a build without props.py (profile mqtt311) refuses it with 0x84.
    code = ("from tinymqtt import packets\n"
            "try:\n    print(packets.sub_options(1, no_local=True, retain_handling=2))\n"
            "except Exception as e:\n    print(type(e).__name__, hex(e.reason))\n")
    assert run(code) == "37\n"
    lib = tmp_path / "lib"
    shutil.copytree(LIB, lib, ignore=shutil.ignore_patterns("props.py", "__pycache__"))
    p = subprocess.run([sys.executable, "-I", "-c", "import sys; sys.path.insert(0, %r)\n" % str(lib) + code],
                       capture_output=True, text=True, timeout=30)
    assert p.stdout == "LocalProtocolError 0x84\n", p.stderr
