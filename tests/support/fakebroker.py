# A scripted fake MQTT server, for tests that need exact bytes or a server that misbehaves.
#
#     def server(fb):                              # runs in a thread: one conversation, in order
#         c = fb.handshake(props={RECEIVE_MAXIMUM: 2})   # accept, expect CONNECT, answer CONNACK
#         p = fb.expect(PUBLISH, qos=1)            # the next packet must be a QoS 1 PUBLISH
#         fb.send(Packet(PUBACK, pid=p.pid))
#         fb.close()                               # cut the link; fb.handshake() takes the next one
#
#     fb = FakeBroker(version=5)
#     fb.start(server)
#     client.connect(); ...                        # the test's thread drives the real client meanwhile
#     fb.run(client)                               # loops the client until the script ends; re-raises its failure
#     fb.stop()
#
# Incoming bytes are framed and decoded with tinymqtt's own frame() and the server half's decode()
# (tinymqtt_cli.server_codec) at the script's protocol version. fb.log keeps every packet received: (monotonic time it arrived, connection number, raw bytes).
import socket
import threading
import time

from tinymqtt.packets import frame, NAMES, CONNECT, CONNACK, DISCONNECT
from tinymqtt_cli.server_codec import Packet, encode, decode  # a broker decodes CONNECT and encodes CONNACK


class Closed(AssertionError):
    """The client closed the connection (or it was reset) while the script waited for a packet."""


def _name(t):
    return NAMES.split()[t] if 0 <= t < 16 else str(t)


class FakeBroker:
    def __init__(self, version=5, timeout=3.0):
        self.version = version
        self.timeout = timeout  # default wait for anything the script expects
        self.lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(8)
        self.port = self.lsock.getsockname()[1]
        self.conn = None
        self.connections = 0  # connections accepted so far
        self.log = []  # (time, connection number, raw bytes) of every packet received
        self.closed_at = None  # when the client last closed its connection
        self._buf = bytearray()
        self._ready = []  # whole packets framed but not yet handed to the script
        self._thread = None
        self.error = None
        self.done = False

    # ---------------------------------------------------------------- the script and the test's thread

    def start(self, script):
        """Runs script(self) in a background thread."""
        def body():
            try:
                script(self)
            except BaseException as e:  # reported by run()/join() in the test's thread
                self.error = e
            finally:
                self.done = True
        self._thread = threading.Thread(target=body, name="fakebroker", daemon=True)
        self._thread.start()

    def join(self, timeout=None):
        """Waits for the script to end; re-raises what it raised."""
        if self._thread:
            self._thread.join(self.timeout * 4 if timeout is None else timeout)
            if self._thread.is_alive():
                raise AssertionError("the broker script did not finish")
        if self.error:
            raise self.error

    def run(self, client, until=None, timeout=None):
        """Loops the client in the calling thread until until() holds, or (without it) until the script
        ends. A script failure is raised here at once; a timeout is an AssertionError."""
        deadline = time.monotonic() + (self.timeout * 3 if timeout is None else timeout)
        while True:
            if self.error:
                raise self.error
            if until() if until else self.done:
                if not until:
                    self.join()
                return
            if time.monotonic() > deadline:
                raise AssertionError("timed out waiting for %s" % ("the condition" if until else "the script"))
            client.loop(0.01)

    def stop(self, client=None):
        """Closes every socket and waits for the script thread (blocked reads wake up at the shutdown). client: a
        blocking client of this server, whose link is closed first without a reconnect."""
        if client:
            client.reconnect = False
            if client.transport:
                client.transport.close()
                client.transport = None
        self._drop()
        try:
            self.lsock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.lsock.close()
        if self._thread:
            self._thread.join(self.timeout + 1)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    # ---------------------------------------------------------------- connections

    def wait_connection(self, timeout=None):
        """Accepts the client's next connection; it becomes the one the script talks to."""
        self._drop()
        self.lsock.settimeout(self.timeout if timeout is None else timeout)
        try:
            conn, _ = self.lsock.accept()
        except socket.timeout:
            raise AssertionError("the client did not connect") from None
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.conn = conn
        self.connections += 1
        self._buf = bytearray()
        self._ready = []
        return conn

    def close(self):
        """Cuts the current connection (the client sees the server close it)."""
        self._drop()

    def _drop(self):
        c, self.conn = self.conn, None
        if c:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            c.close()

    def handshake(self, session_present=False, props=None, reason=0, timeout=None):
        """Accepts the next connection, expects CONNECT and answers CONNACK; returns the CONNECT."""
        self.wait_connection(timeout)
        c = self.expect(CONNECT, timeout)
        self.send(Packet(CONNACK, session_present=session_present, reason=reason, props=props))
        return c

    # ---------------------------------------------------------------- receiving

    def recv_raw(self, timeout=None):
        """The next whole packet's bytes, or None when none comes within timeout; raises Closed when the
        client closes the connection first."""
        if self.conn is None:
            raise AssertionError("no connection: call wait_connection() or handshake() first")
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while not self._ready:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            self.conn.settimeout(left)
            try:
                data = self.conn.recv(65536)
            except socket.timeout:
                return None
            except OSError as e:
                raise Closed("the connection was reset: %s" % e) from None
            now = time.monotonic()
            if not data:
                self.closed_at = now
                raise Closed("the client closed the connection")
            self._buf += data
            while self._buf:
                n = frame(self._buf, len(self._buf))
                if not n or n > len(self._buf):
                    break
                raw = bytes(self._buf[:n])
                del self._buf[:n]
                self.log.append((now, self.connections, raw))
                self._ready.append(raw)
        return self._ready.pop(0)

    def expect(self, type=None, timeout=None, **fields):
        """The next packet, decoded (its bytes in .raw); asserts its type and any given fields (pid=3, dup=True)."""
        raw = self.recv_raw(timeout)
        want = _name(type) if type else "a packet"
        if raw is None:
            raise AssertionError("expected %s, got nothing" % want)
        p = decode(raw, self.version)
        p.raw = raw  # the exact bytes, for tests of sizes and encodings
        if isinstance(p.payload, memoryview):
            p.payload = bytes(p.payload)
        if type is not None and p.type != type:
            raise AssertionError("expected %s, got %r" % (want, p))
        for k in fields:
            if getattr(p, k) != fields[k]:
                raise AssertionError("expected %s with %s=%r, got %r" % (want, k, fields[k], p))
        return p

    def expect_nothing(self, seconds):
        """Asserts the client sends nothing (and keeps the connection) for that long."""
        raw = self.recv_raw(seconds)
        if raw is not None:
            raise AssertionError("expected silence, got %r" % decode(raw, self.version))

    def expect_closed(self, timeout=None):
        """Asserts the client closes the connection without sending anything else; returns when it did."""
        try:
            raw = self.recv_raw(timeout)
        except Closed:
            self._drop()
            return self.closed_at
        if raw is None:
            raise AssertionError("expected the client to close the connection; it stayed open")
        raise AssertionError("expected the client to close the connection, got %r" % decode(raw, self.version))

    def expect_disconnect(self, reason, timeout=None):
        """v5: asserts DISCONNECT with that reason code, then the close."""
        p = self.expect(DISCONNECT, timeout, reason=reason)
        self.expect_closed(timeout)
        return p

    # ---------------------------------------------------------------- sending

    def encode(self, p):
        buf = bytearray(70000 + len(p.payload or b""))
        return bytes(buf[:encode(buf, p, self.version)])

    def send(self, *packets):
        """Encodes the packets at the script's version and writes them in one write."""
        self.send_raw(b"".join(self.encode(p) for p in packets))

    def send_raw(self, data):
        self.conn.sendall(data)

    def received(self, type=None, connection=None):
        """The raw packets received so far (of one type, on one connection)."""
        return [raw for t, c, raw in self.log
                if (type is None or raw[0] >> 4 == type) and (connection is None or c == connection)]
