# A stand-in for MicroPython's `ssl` module: records what the port asks for (protocol, verify mode, the CA,
# the server name) and wraps the socket without encrypting. Like micropython-lib's ssl.py, a new
# SSLContext starts at CERT_NONE, so a port that wants verification has to ask for it.
# verify_error = -0x2700 makes the handshake fail as mbedtls does when the CA does not match.
PROTOCOL_TLS_CLIENT = 0
PROTOCOL_TLS_SERVER = 1
CERT_NONE = 0
CERT_OPTIONAL = 1
CERT_REQUIRED = 2
verify_error = 0
contexts = []


class SSLContext:
    def __init__(self, protocol):
        self.protocol = protocol
        self.verify_mode = CERT_NONE
        self.cadata = None
        self.cert_chain = None
        self.wrapped = []
        contexts.append(self)

    def load_verify_locations(self, cafile=None, cadata=None):
        if cafile:
            with open(cafile, "rb") as f:
                cadata = f.read()
        self.cadata = cadata

    def load_cert_chain(self, certfile, keyfile):
        self.cert_chain = (certfile, keyfile)

    def wrap_socket(self, sock, server_side=False, do_handshake_on_connect=True, server_hostname=None):
        self.wrapped.append((server_hostname, do_handshake_on_connect))
        if verify_error and do_handshake_on_connect:
            raise OSError(verify_error)
        return _SSLSocket(sock)


class _SSLSocket:
    def __init__(self, sock):
        self.sock = sock

    def write(self, buf, *args):
        return self.sock.write(buf, *args)

    def readinto(self, buf, *args):
        return self.sock.readinto(buf, *args)

    def setblocking(self, flag):
        self.sock.setblocking(flag)

    def close(self):
        self.sock.close()
