# Checks the mosquitto test fixture itself (tests/support/broker.py) with raw MQTT 3.1.1 bytes, so it does
# not depend on the tinymqtt codec: the broker accepts a CONNECT, logs, and restarts on the same port.
import socket

CONNECT = bytes.fromhex("100c00044d5154540402003c0000")  # MQTT 3.1.1, clean session, empty client id
CONNACK_OK = bytes.fromhex("20020000")


def connack(host, port):
    with socket.create_connection((host, port), timeout=5) as s:
        s.sendall(CONNECT)
        return s.recv(4)


def test_session_broker_accepts_a_connect(broker):
    assert connack(broker.host, broker.port) == CONNACK_OK


def test_make_broker_restart_and_log(make_broker):
    b = make_broker(extra_conf="log_type all\n", persistence=True)
    port = b.port
    assert connack(b.host, port) == CONNACK_OK
    b.restart()
    assert b.port == port and connack(b.host, port) == CONNACK_OK
    assert "New client connected" in b.log_text()
    assert "Saving in-memory database" in b.log_text() or "persistence" in b.log_text().lower()
