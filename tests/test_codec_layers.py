# The codec's layers, checked in a fresh interpreter each: a 3.1.1 client's every packet (encoded, and read in
# place as its session reads it) never loads props.py, the MQTT 5 half; the client half refuses what only a server
# sends and has no general decoder, and the server half (host/tinymqtt_cli/server_codec.py) has both without
# changing anything in the client half.
import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIB = os.path.join(ROOT, "lib")
HOST = os.path.join(ROOT, "host")


def run(code):
    p = subprocess.run([sys.executable, "-I", "-c", "import sys; sys.path[:0] = [%r, %r]\n" % (LIB, HOST) + code],
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


def test_the_client_half_refuses_the_server_half_which_changes_nothing_in_it():
    # packets.encode() refuses what only a server sends, before and after the server half is imported: that import
    # adds nothing to tinymqtt.packets (no decode) and changes none of its names nor Packet's; the server half writes
    # and reads those packets with its own functions.
    out = run(
        "import tinymqtt.packets as K\n"
        "from tinymqtt.packets import Packet, encode, CONNECT, CONNACK, SUBACK\n"
        "from tinymqtt.errors import MQTTError\n"
        "connect = b'\\x10\\x0d\\x00\\x04MQTT\\x04\\x02\\x00\\x3c\\x00\\x01c'\n"
        "def both(encode):\n"
        "    for f in (lambda: encode(bytearray(8), Packet(CONNACK), 4),\n"
        "              lambda: encode(bytearray(8), Packet(SUBACK, pid=1, codes=[0]), 4)):\n"
        "        try:\n"
        "            print(f())\n"
        "        except MQTTError as e:\n"
        "            print(type(e).__name__, hex(e.reason))\n"
        "before = (dict(vars(K)), dict(vars(Packet)))\n"
        "both(K.encode)\n"
        "import tinymqtt_cli.server_codec as S\n"
        "print((dict(vars(K)), dict(vars(Packet))) == before, hasattr(K, 'decode'))\n"
        "both(K.encode)\n"
        "both(S.encode)\n"
        "print(S.decode(connect, 4) == S.Packet(CONNECT, client_id='c', keepalive=60))\n")
    assert out.split("\n") == ["LocalProtocolError 0x82", "LocalProtocolError 0x82", "True False",
                               "LocalProtocolError 0x82", "LocalProtocolError 0x82", "4", "5", "True", ""]


def test_the_server_halfs_packet_equals_a_core_packet_with_the_same_fields():
    out = run("from tinymqtt.packets import Packet, PUBLISH, CONNACK\n"
              "from tinymqtt_cli.server_codec import Packet as P, decode\n"
              "p = decode(b'\\x20\\x02\\x01\\x00', 4)\n"
              "print(p.session_present, p == Packet(CONNACK, session_present=True), p != Packet(CONNACK))\n"
              "print(P(PUBLISH, topic='t', payload=b'x') == Packet(PUBLISH, topic='t', payload=memoryview(b'x')))\n"
              "print(repr(P(CONNACK, session_present=True, props={0x16: b'token'}, password=b'pw')))\n")
    assert out.split("\n") == ["True True True", "True", "<CONNACK props={22: '***'} session_present=True "
                                                           "password='***'>", ""]


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
