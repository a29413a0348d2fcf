# A MicroPython "device" for real mpremote without hardware: one unix-port process (.venv/bin/micropython)
# on a pseudo-terminal, its REPL served over TCP on a loopback port (mpremote connect socket://HOST:PORT),
# one connection at a time, the same process across connections (use mpremote's `resume`: the unix port has
# no soft reset; mpremote's would end the process). Unlike a board, a program it runs is not stopped by the
# Ctrl-C mpremote sends on connecting (measured: the next command failed to enter the raw REPL), so run
# programs that end by themselves. The device's filesystem is `root` (its working directory); its path is
# "", .frozen, lib, as on a board.
import os
import select
import socket
import subprocess
import threading
import tty

from tools.sim import MICROPYTHON


class Device:
    def __init__(self, root, heap="4m"):
        self.root = root
        self.output = bytearray()  # everything the device printed (bounded), for failure messages
        self.master, slave = os.openpty()
        tty.setraw(slave)
        env = dict(os.environ, MICROPYPATH=":.frozen:lib")
        self.proc = subprocess.Popen([MICROPYTHON, "-X", "heapsize=%s" % heap], stdin=slave, stdout=slave,
                                     stderr=slave, cwd=root, env=env, start_new_session=True)
        os.close(slave)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = "socket://127.0.0.1:%d" % self.listener.getsockname()[1]
        self._stop = False
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self):
        conn = None
        while not self._stop:
            fds = [self.master, self.listener] + ([conn] if conn else [])
            try:
                ready, _, _ = select.select(fds, [], [], 0.2)
            except (OSError, ValueError):
                return
            if self.listener in ready:
                try:
                    new, _ = self.listener.accept()
                except OSError:
                    return
                if conn:
                    conn.close()  # the newest client wins, as when a serial port is reopened
                conn = new
                # A serial line has no Nagle: without these two, each of mpremote's small writes waited for a
                # delayed ACK (~40 ms a round trip, 7 s to copy a 30 KB file).
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.master in ready:
                try:
                    data = os.read(self.master, 65536)
                except OSError:  # the process ended
                    data = b""
                if not data:
                    break
                self.output += data
                del self.output[:-65536]
                if conn:
                    try:
                        conn.sendall(data)
                    except OSError:
                        conn.close()
                        conn = None
            if conn and conn in ready:
                data = conn.recv(65536)
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK, 1)  # ACK now: mpremote's next write
                if data:
                    os.write(self.master, data)
                else:
                    conn.close()
                    conn = None
        if conn:
            conn.close()

    def alive(self):
        return self.proc.poll() is None

    def close(self):
        self._stop = True
        self.listener.close()
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self._thread.join(2)
        os.close(self.master)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
