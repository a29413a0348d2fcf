# A TCP proxy on 127.0.0.1 between clients and a broker, for tests that break the link on purpose:
# cut() closes every connection (no DISCONNECT reaches the broker: a crash), silence() keeps the sockets open
# but drops what arrives (a dead link), refuse turns new connections away; bytes are counted both ways.
# One thread owns every socket; the test's calls run on it and return once they have taken effect.
#
#     with Proxy(broker.host, broker.port) as px:   # clients connect to px.host, px.port
#         px.silence(down=True)                     # the broker's packets no longer reach the clients
#         px.cut()                                  # every connection closed; new ones are accepted
import queue
import selectors
import socket
import struct
import threading


class Proxy:
    def __init__(self, host, port):
        self.target = (host, port)
        self.up = self.down = 0  # bytes forwarded client -> broker, broker -> client
        self.dropped_up = self.dropped_down = 0  # bytes read and dropped while silent
        self.accepted = 0  # connections accepted (and forwarded) so far
        self.refuse = False  # True: new connections are closed at once
        self._silent = [False, False]  # [up, down]
        self._peer = {}  # socket -> (the other socket, 0 for client -> broker or 1 for broker -> client)
        self._sel = selectors.DefaultSelector()
        self._listen = socket.create_server(("127.0.0.1", 0))
        self.host, self.port = self._listen.getsockname()[:2]
        self._wake_r, self._wake_w = socket.socketpair()
        self._calls = queue.Queue()
        self._sel.register(self._listen, selectors.EVENT_READ)
        self._sel.register(self._wake_r, selectors.EVENT_READ)
        self._running = True
        self._thread = threading.Thread(target=self._loop, name="proxy:%d" % self.port, daemon=True)
        self._thread.start()

    # ---------------------------------------------------------------- the test's controls

    @property
    def connections(self):
        """Connections open now."""
        return self._call(lambda: len(self._peer) // 2)

    def silence(self, up=True, down=True):
        """Stops forwarding (up: client -> broker, down: broker -> client); the sockets stay open."""
        def set_silent():
            self._silent = [up, down]
        self._call(set_silent)

    def resume(self):
        """Forwards both ways again (what was dropped stays lost)."""
        self.silence(False, False)

    def cut(self, reset=False):
        """Closes every open connection on both sides (reset=True: with a TCP RST instead of a FIN)."""
        self._call(lambda: self._drop_all(reset))

    def close(self):
        if self._running:
            self._call(self._stop)
            self._thread.join(5)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ---------------------------------------------------------------- the proxy's thread

    def _call(self, fn):
        if not self._running:
            raise RuntimeError("the proxy is closed")
        done = queue.Queue()
        self._calls.put((fn, done))
        self._wake_w.send(b"x")
        ok, value = done.get(timeout=5)
        if not ok:
            raise value
        return value

    def _loop(self):
        while self._running:
            for key, _ in self._sel.select():
                s = key.fileobj
                if not self._running:
                    return
                if s is self._listen:
                    self._accept()
                elif s is self._wake_r:
                    self._run_calls()
                elif s in self._peer:
                    self._forward(s)

    def _run_calls(self):
        self._wake_r.recv(4096)
        while not self._calls.empty():
            fn, done = self._calls.get()
            try:
                done.put((True, fn()))
            except Exception as e:  # handed back to the caller
                done.put((False, e))

    def _accept(self):
        c, _ = self._listen.accept()
        if self.refuse:
            c.close()
            return
        try:
            b = socket.create_connection(self.target, timeout=2)
        except OSError:
            c.close()
            return
        for s in (c, b):
            s.settimeout(5)  # a peer that stops reading cannot hang the proxy for ever
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._peer[c], self._peer[b] = (b, 0), (c, 1)
        self._sel.register(c, selectors.EVENT_READ)
        self._sel.register(b, selectors.EVENT_READ)
        self.accepted += 1

    def _forward(self, s):
        other, way = self._peer[s]
        try:
            data = s.recv(65536)
        except OSError:
            data = b""
        if not data:
            self._drop(s)
            return
        if self._silent[way]:
            if way:
                self.dropped_down += len(data)
            else:
                self.dropped_up += len(data)
            return
        if way:
            self.down += len(data)
        else:
            self.up += len(data)
        try:
            other.sendall(data)
        except OSError:
            self._drop(s)

    def _drop(self, s, reset=False):
        # Closes a connection: both its sockets.
        other, _ = self._peer.pop(s)
        del self._peer[other]
        for x in (s, other):
            self._sel.unregister(x)
            if reset:
                x.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            x.close()

    def _drop_all(self, reset=False):
        for s in list(self._peer):
            if s in self._peer:  # its partner was dropped with it
                self._drop(s, reset)

    def _stop(self):
        self._drop_all()
        self._running = False
        self._sel.close()
        for s in (self._listen, self._wake_r, self._wake_w):
            s.close()
