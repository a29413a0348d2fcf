# Security: TLS against a real mosquitto with a test PKI the tests make (python `cryptography`): a valid chain
# connects (blocking and asyncio, by IP and by name); a wrong CA, a wrong host name and an expired certificate each
# fail with a clear ssl error and leave no socket open; verification is on by default (tls=True knows no test CA);
# username/password (a mosquitto password_file from mosquitto_passwd) and client certificates (require_certificate)
# work, and a wrong password is a ConnectError. Credentials never show: not in repr(Client), repr(Session),
# repr(Packet), exception messages, log records, the CLI's output (-P secret -d), nor the broker's log.
# MQTT 5 enhanced authentication (AUTH 0x18 exchanges through Client.on_auth / AsyncClient.on_auth) runs against
# the fake broker: mosquitto 2.0 has no built-in enhanced authentication method.
import asyncio
import datetime
import ipaddress
import logging
import os
import ssl
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

cryptography = pytest.importorskip("cryptography", reason="the test PKI needs the `cryptography` package")
from cryptography import x509  # noqa: E402
from cryptography.hazmat.primitives import hashes, serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec  # noqa: E402
from cryptography.x509.oid import NameOID, ExtendedKeyUsageOID  # noqa: E402

import tinymqtt_port  # noqa: E402
from tests.support import report  # noqa: E402
from tests.support.broker import Mosquitto, free_port  # noqa: E402
from tests.support.fakebroker import FakeBroker  # noqa: E402
from tinymqtt import props as P  # noqa: E402
from tinymqtt.aio import AsyncClient  # noqa: E402
from tinymqtt.client import Client  # noqa: E402
from tinymqtt.errors import ConnectError, MQTTError, RemoteProtocolError  # noqa: E402
from tinymqtt.packets import Packet, CONNECT, CONNACK, PUBLISH, PUBACK, DISCONNECT, AUTH  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
USER, SECRET = "device-7", "Tr0ub4dor&3-not-in-logs"
AUTH_SECRET = b"auth-data-s3cret"


# ---------------------------------------------------------------------------------------- the test PKI

def _name(cn):
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _cert(subject_cn, key, issuer_cert, issuer_key, days=(-1, 30), ca=False, san=None, client=False):
    now = datetime.datetime.now(datetime.timezone.utc)
    b = (x509.CertificateBuilder()
         .subject_name(_name(subject_cn))
         .issuer_name(issuer_cert.subject if issuer_cert else _name(subject_cn))
         .public_key(key.public_key())
         .serial_number(x509.random_serial_number())
         .not_valid_before(now + datetime.timedelta(days=days[0]))
         .not_valid_after(now + datetime.timedelta(days=days[1]))
         .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if ca:
        b = b.add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                          content_commitment=False, key_encipherment=False, data_encipherment=False,
                                          key_agreement=False, encipher_only=False, decipher_only=False),
                            critical=True)
        b = b.add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
    else:
        b = b.add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH if client
                                                   else ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        b = b.add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_key.public_key()),
                            critical=False)
    if san:
        b = b.add_extension(x509.SubjectAlternativeName(san), critical=False)
    return b.sign(issuer_key or key, hashes.SHA256())


class PKI:
    """ca.pem (the test CA), other-ca.pem (an unrelated CA) and, signed by the test CA: server (localhost and
    127.0.0.1), wronghost (wrong.example only), expired (localhost, expired yesterday), client (CN device-7)."""

    def __init__(self, d):
        self.dir = d

        def key():
            return ec.generate_private_key(ec.SECP256R1())

        def write(name, cert, k=None):
            (d / (name + ".pem")).write_bytes(cert.public_bytes(serialization.Encoding.PEM))
            if k is not None:
                (d / (name + ".key")).write_bytes(k.private_bytes(serialization.Encoding.PEM,
                                                                  serialization.PrivateFormat.PKCS8,
                                                                  serialization.NoEncryption()))

        ca_key, other_key = key(), key()
        ca = _cert("tinymqtt test CA", ca_key, None, None, days=(-1, 365), ca=True)
        other = _cert("some other CA", other_key, None, None, days=(-1, 365), ca=True)
        write("ca", ca)
        write("other-ca", other)
        here = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
        for name, san, days, client in (("server", here, (-1, 30), False),
                                        ("wronghost", [x509.DNSName("wrong.example")], (-1, 30), False),
                                        ("expired", here, (-30, -1), False),
                                        ("client", None, (-1, 30), True)):
            k = key()
            write(name, _cert(USER if client else name, k, ca, ca_key, days=days, san=san, client=client), k)

    def path(self, name):
        return str(self.dir / name)


class TLSMosquitto(Mosquitto):
    """mosquitto with four TLS listeners (per_listener_settings): `port` wants a user name and password,
    `cert_port` a client certificate, `expired_port` and `wronghost_port` present a bad server certificate."""

    def __init__(self, pki):
        super().__init__()
        self.pki = pki
        self.cert_port, self.expired_port, self.wronghost_port = free_port(), free_port(), free_port()
        self.passwd = os.path.join(self.dir, "passwd")
        subprocess.run(["mosquitto_passwd", "-b", "-c", self.passwd, USER, SECRET], check=True,
                       capture_output=True)

    def _write_conf(self):
        p = self.pki.path
        tls = ["cafile %s" % p("ca.pem"), "certfile %s" % p("server.pem"), "keyfile %s" % p("server.key")]
        lines = ["per_listener_settings true", "log_dest file %s" % self.log_path, "log_type all",
                 "persistence false"]
        if os.geteuid() == 0:
            lines.append("user root")
        lines += ["listener %d %s" % (self.port, self.host)] + tls + [
            "allow_anonymous false", "password_file %s" % self.passwd]
        lines += ["listener %d %s" % (self.cert_port, self.host)] + tls + [
            "require_certificate true", "use_identity_as_username true", "allow_anonymous false"]
        lines += ["listener %d %s" % (self.expired_port, self.host), "cafile %s" % p("ca.pem"),
                  "certfile %s" % p("expired.pem"), "keyfile %s" % p("expired.key"), "allow_anonymous true"]
        lines += ["listener %d %s" % (self.wronghost_port, self.host), "cafile %s" % p("ca.pem"),
                  "certfile %s" % p("wronghost.pem"), "keyfile %s" % p("wronghost.key"), "allow_anonymous true"]
        with open(self.conf_path, "w") as f:
            f.write("\n".join(lines) + "\n")


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return PKI(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def tls_broker(pki):
    b = TLSMosquitto(pki)
    try:
        yield b.start()
    finally:
        b.close()


def uid():
    return uuid.uuid4().hex[:10]


def fds():
    return len(os.listdir("/proc/self/fd"))


def ca(pki, **more):
    return dict({"cafile": pki.path("ca.pem")}, **more)


def creds(**kw):
    return dict(username=USER, password=SECRET.encode(), **kw)


def no_secret(*texts):
    for t in texts:
        assert SECRET not in t and SECRET.encode().hex() not in t, "the password shows up in %r" % t[:300]


# ---------------------------------------------------------------------------------------- TLS

@pytest.mark.parametrize("version", [5, 4], ids=["v5", "v3.1.1"])
@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_valid_chain_and_password(tls_broker, pki, version, host):
    c = Client(host, tls_broker.port, tls=ca(pki), client_id="t" + uid(), version=version, reconnect=False,
               **creds())
    c.connect()
    assert c.transport.sock.version().startswith("TLS")
    assert c.wait_for(c.publish("tls/" + uid(), b"x", 1), 5)
    c.disconnect()


async def test_asyncio_valid_chain_and_password(tls_broker, pki):
    c = AsyncClient("localhost", tls_broker.port, tls=ca(pki), client_id="t" + uid(), version=5, reconnect=False,
                    **creds())
    await c.connect()
    assert await c.publish("tls/" + uid(), b"x", 1) in (0, 0x10)
    await c.disconnect()


def test_an_ssl_context_of_our_own(tls_broker, pki):
    ctx = ssl.create_default_context(cafile=pki.path("ca.pem"))
    c = Client("127.0.0.1", tls_broker.port, tls=ctx, client_id="t" + uid(), version=5, reconnect=False, **creds())
    c.connect()
    c.disconnect()


BAD = [  # (name, broker port attribute, tls options, words the error must contain)
    ("wrong CA", "port", lambda pki: {"cafile": pki.path("other-ca.pem")}, "certificate verify failed"),
    ("wrong host name", "wronghost_port", lambda pki: ca(pki), "mismatch"),
    ("expired certificate", "expired_port", lambda pki: ca(pki), "certificate has expired"),
    ("verification on by default (tls=True)", "port", lambda pki: True, "certificate verify failed"),
    ("verification on by default (no cafile)", "port", lambda pki: {}, "certificate verify failed"),
]


@pytest.mark.parametrize("name,port,tls,words", BAD, ids=[b[0] for b in BAD])
def test_bad_server_certificate_fails_clearly(tls_broker, pki, name, port, tls, words):
    before = fds()
    c = Client("127.0.0.1", getattr(tls_broker, port), tls=tls(pki), client_id="t" + uid(), version=5,
               reconnect=False, **creds())
    with pytest.raises(ssl.SSLCertVerificationError) as e:
        c.connect()
    assert words in str(e.value), str(e.value)
    no_secret(str(e.value), repr(e.value))
    assert c.transport is None and fds() == before, "a socket was left open"


@pytest.mark.parametrize("name,port,tls,words", BAD[:3], ids=[b[0] for b in BAD[:3]])
async def test_asyncio_bad_server_certificate_fails_clearly(tls_broker, pki, name, port, tls, words):
    c = AsyncClient("127.0.0.1", getattr(tls_broker, port), tls=tls(pki), client_id="t" + uid(), version=5,
                    reconnect=False, **creds())
    with pytest.raises(ssl.SSLCertVerificationError) as e:
        await c.connect()
    assert words in str(e.value), str(e.value)
    await c.close()


def test_verification_settings_of_the_port():
    for tls in (True, {}, {"cafile": None}):
        ctx = tinymqtt_port._tls_context(tls)
        assert ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname


def test_server_hostname_option_names_the_certificate_to_expect(tls_broker, pki):
    c = Client("127.0.0.1", tls_broker.wronghost_port, tls=ca(pki, server_hostname="wrong.example"),
               client_id="t" + uid(), version=5, reconnect=False)
    c.connect()
    c.disconnect()


@pytest.mark.parametrize("version,codes", [(5, (0x86, 0x87)), (4, (0x86, 0x87))], ids=["v5", "v3.1.1"])
def test_wrong_password_is_refused_without_showing_it(tls_broker, pki, version, codes, caplog):
    caplog.set_level(logging.DEBUG)
    c = Client("127.0.0.1", tls_broker.port, tls=ca(pki), client_id="t" + uid(), version=version, reconnect=False,
               username=USER, password=b"wrong-" + SECRET.encode())
    with pytest.raises(ConnectError) as e:
        c.connect()
    assert e.value.reason in codes
    for text in (str(e.value), repr(e.value), caplog.text):
        assert "wrong-" not in text


def test_client_certificate(tls_broker, pki):
    c = Client("localhost", tls_broker.cert_port, client_id="t" + uid(), version=5, reconnect=False,
               tls=ca(pki, certfile=pki.path("client.pem"), keyfile=pki.path("client.key")))
    c.connect()
    assert c.wait_for(c.publish("tls/" + uid(), b"x", 1), 5)
    c.disconnect()
    before = fds()
    c = Client("localhost", tls_broker.cert_port, tls=ca(pki), client_id="t" + uid(), version=5, reconnect=False)
    with pytest.raises((OSError, MQTTError)):  # the broker ends the handshake: no certificate
        c.connect()
    assert c.transport is None and fds() == before


async def test_asyncio_client_certificate(tls_broker, pki):
    c = AsyncClient("localhost", tls_broker.cert_port, client_id="t" + uid(), version=5, reconnect=False,
                    tls=ca(pki, certfile=pki.path("client.pem"), keyfile=pki.path("client.key")))
    await c.connect()
    await c.disconnect()
    await asyncio.sleep(0.05)
    before = fds()
    c = AsyncClient("localhost", tls_broker.cert_port, tls=ca(pki), client_id="t" + uid(), version=5,
                    reconnect=False)
    with pytest.raises((OSError, MQTTError)):
        await c.connect(timeout=3)
    await asyncio.sleep(0.05)  # the transport closes on the loop's next turn
    assert c.stream is None and fds() == before


def test_credentials_never_show(tls_broker, pki, caplog):
    caplog.set_level(logging.DEBUG)
    c = Client("127.0.0.1", tls_broker.port, tls=ca(pki), client_id="t" + uid(), version=5, reconnect=False,
               props={P.AUTHENTICATION_METHOD: "X", P.AUTHENTICATION_DATA: AUTH_SECRET}, **creds())
    s = c.session
    connect = Packet(CONNECT, client_id="x", username=USER, password=SECRET.encode(),
                     props={P.AUTHENTICATION_METHOD: "X", P.AUTHENTICATION_DATA: AUTH_SECRET})
    texts = [repr(c), str(c), repr(s), str(s), repr(connect), str(connect),
             repr(Packet(AUTH, reason=0x18, props={P.AUTHENTICATION_METHOD: "X", P.AUTHENTICATION_DATA: AUTH_SECRET}))]
    no_secret(*texts)
    for t in texts:
        assert AUTH_SECRET.decode() not in t and repr(AUTH_SECRET) not in t
    # mosquitto 2.0 knows no method "X": it refuses, and the error says so without the credentials.
    with pytest.raises(ConnectError) as e:
        c.connect()
    no_secret(str(e.value), repr(e.value), caplog.text)
    good = Client("127.0.0.1", tls_broker.port, tls=ca(pki), client_id="t" + uid(), version=5, reconnect=False,
                  **creds())
    good.connect()
    good.disconnect()
    no_secret(caplog.text, tls_broker.log_text())


def run_cli(*args):
    env = dict(os.environ, PYTHONPATH="%s/lib:%s/ports/linux:%s/host" % (ROOT, ROOT, ROOT))
    return subprocess.run([sys.executable, "-m", "tinymqtt_cli"] + [str(a) for a in args], cwd=ROOT, env=env,
                          capture_output=True, timeout=30, text=True)


def test_cli_over_tls_never_prints_the_password(tls_broker, pki):
    common = ["-h", "localhost", "-p", tls_broker.port, "--cafile", pki.path("ca.pem"), "-u", USER, "-d"]
    ok = run_cli("pub", *common, "-P", SECRET, "-t", "tls/" + uid(), "-m", "hi", "-q", "1", "-V", "5")
    assert ok.returncode == 0, ok.stderr
    bad = run_cli("pub", *common, "-P", "wrong-" + SECRET, "-t", "tls/x", "-m", "hi", "-V", "311")
    assert bad.returncode == 5 and "Error" in bad.stderr  # mosquitto_pub's: the 3.x CONNACK return code
    wrong_ca = run_cli("sub", "-h", "127.0.0.1", "-p", tls_broker.port, "--cafile", pki.path("other-ca.pem"),
                       "-u", USER, "-P", SECRET, "-t", "x", "-d", "-C", "1")
    assert wrong_ca.returncode == 8 and "certificate verify failed" in wrong_ca.stderr  # 8: MOSQ_ERR_TLS
    for r in (ok, bad, wrong_ca):
        no_secret(r.stdout, r.stderr)
    report.record("TLS", "valid chain, wrong CA, wrong host, expired, default verification, password, client cert")


# ---------------------------------------------------------------------------------------- enhanced authentication

METHOD = "SCRAM-TEST"




def test_enhanced_authentication_through_on_auth():
    fb = FakeBroker(5)
    seen = []

    def server(fb):
        fb.wait_connection()
        c = fb.expect(CONNECT)
        assert c.props[P.AUTHENTICATION_METHOD] == METHOD and c.props[P.AUTHENTICATION_DATA] == b"client-first"
        fb.send(Packet(AUTH, reason=0x18, props={P.AUTHENTICATION_METHOD: METHOD, P.AUTHENTICATION_DATA: b"server-first"}))
        a = fb.expect(AUTH, reason=0x18)
        assert a.props == {P.AUTHENTICATION_METHOD: METHOD, P.AUTHENTICATION_DATA: b"client-final"}
        fb.send(Packet(CONNACK, props={P.AUTHENTICATION_METHOD: METHOD, P.AUTHENTICATION_DATA: b"server-final"}))
        # Re-authentication, started by the client.
        a = fb.expect(AUTH, reason=0x19)
        assert a.props[P.AUTHENTICATION_METHOD] == METHOD and a.props[P.AUTHENTICATION_DATA] == b"again"
        fb.send(Packet(AUTH, reason=0x18, props={P.AUTHENTICATION_METHOD: METHOD, P.AUTHENTICATION_DATA: b"challenge"}))
        fb.expect(AUTH, reason=0x18)
        fb.send(Packet(AUTH, reason=0x00, props={P.AUTHENTICATION_METHOD: METHOD}))
        p = fb.expect(PUBLISH, qos=1)
        fb.send(Packet(PUBACK, pid=p.pid))

    def on_auth(p):
        seen.append((p.reason, (p.props or {}).get(P.AUTHENTICATION_DATA)))
        if p.reason == 0x18:
            data = {b"server-first": b"client-final", b"challenge": b"response"}[p.props[P.AUTHENTICATION_DATA]]
            return 0x18, {P.AUTHENTICATION_DATA: data}  # the method is added for us
        return None

    fb.start(server)
    try:
        c = Client("127.0.0.1", fb.port, client_id="a1", version=5, port_impl=tinymqtt_port, reconnect=False,
                   props={P.AUTHENTICATION_METHOD: METHOD, P.AUTHENTICATION_DATA: b"client-first"})
        c.on_auth = on_auth
        c.connect()
        c.session.auth(0x19, {P.AUTHENTICATION_DATA: b"again"})
        c.flush()
        fb.run(c, until=lambda: len(seen) == 3)
        pid = c.publish("a", b"x", 1)
        fb.run(c)
        assert c.wait_for(pid, 2)
        assert seen == [(0x18, b"server-first"), (0x18, b"challenge"), (0x00, None)]
        assert c.is_connected()
    finally:
        fb.stop()
    report.record("enhanced authentication", "AUTH 0x18 exchange before CONNACK and a re-authentication (0x19)")


async def test_asyncio_enhanced_authentication_through_on_auth():
    fb = FakeBroker(5)

    def server(fb):
        fb.wait_connection()
        fb.expect(CONNECT)
        fb.send(Packet(AUTH, reason=0x18, props={P.AUTHENTICATION_METHOD: METHOD, P.AUTHENTICATION_DATA: b"nonce"}))
        a = fb.expect(AUTH, reason=0x18)
        assert a.props[P.AUTHENTICATION_DATA] == b"proof:nonce"
        fb.send(Packet(CONNACK))
        fb.expect(DISCONNECT)

    fb.start(server)
    try:
        c = AsyncClient("127.0.0.1", fb.port, client_id="a2", version=5, port_impl=tinymqtt_port, reconnect=False,
                        props={P.AUTHENTICATION_METHOD: METHOD})
        c.on_auth = lambda p: (0x18, {P.AUTHENTICATION_DATA: b"proof:" + p.props[P.AUTHENTICATION_DATA]})
        await c.connect(timeout=3)
        await c.disconnect()
        await asyncio.get_running_loop().run_in_executor(None, fb.join)
    finally:
        fb.stop()


@pytest.mark.parametrize("bad,reason", [
    ({P.AUTHENTICATION_METHOD: "OTHER"}, 0x82),  # another method than our CONNECT's
    ({}, 0x82),  # no method at all
])
def test_auth_with_the_wrong_method_is_a_protocol_error(bad, reason):
    fb = FakeBroker(5)

    def server(fb):
        fb.wait_connection()
        fb.expect(CONNECT)
        fb.send(Packet(AUTH, reason=0x18, props=bad or None))
        fb.expect_disconnect(reason)

    fb.start(server)
    try:
        c = Client("127.0.0.1", fb.port, client_id="a3", version=5, port_impl=tinymqtt_port, reconnect=False,
                   props={P.AUTHENTICATION_METHOD: METHOD})
        c.on_auth = lambda p: pytest.fail("on_auth called for an AUTH that breaks the rules")
        with pytest.raises(RemoteProtocolError) as e:
            c.connect(timeout=3)
        assert e.value.reason == reason
        fb.join()
    finally:
        fb.stop()


def test_bad_authentication_method_refused_by_connack():
    fb = FakeBroker(5)

    def server(fb):
        fb.wait_connection()
        fb.expect(CONNECT)
        fb.send(Packet(CONNACK, reason=0x8C, props={P.REASON_STRING: "no such method"}))
        fb.expect_closed()

    fb.start(server)
    try:
        c = Client("127.0.0.1", fb.port, client_id="a4", version=5, port_impl=tinymqtt_port, reconnect=False,
                   props={P.AUTHENTICATION_METHOD: METHOD, P.AUTHENTICATION_DATA: AUTH_SECRET})
        with pytest.raises(ConnectError) as e:
            c.connect(timeout=3)
        assert e.value.reason == 0x8C and "no such method" in str(e.value)
        assert AUTH_SECRET.decode() not in str(e.value)
        fb.join()
    finally:
        fb.stop()
