# A real mosquitto for tests: writes a config (free loopback port, anonymous, generous in-flight/queue limits,
# log to a file) into a temp dir, starts `mosquitto -c FILE`, waits for the port, stops it with SIGTERM.
# Use the `broker` / `make_broker` fixtures from tests/conftest.py rather than this class directly.
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time


def mosquitto_binary():
    """Path of the mosquitto binary (Debian puts it in /usr/sbin, which is not always on PATH)."""
    path = shutil.which("mosquitto") or ("/usr/sbin/mosquitto" if os.access("/usr/sbin/mosquitto", os.X_OK) else None)
    if not path:
        raise RuntimeError("mosquitto not found: run tools/bootstrap.sh (apt-get install mosquitto)")
    return path


def free_port(host="127.0.0.1"):
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class Mosquitto:
    host = "127.0.0.1"

    def __init__(self, extra_conf: str = "", persistence: bool = False, debug_log: bool = None):
        self.extra_conf = extra_conf
        # debug_log (default: the environment's TINYMQTT_MOSQUITTO_DEBUG=1): mosquitto logs every packet
        # ("log_type all": each PUBLISH with its packet id and DUP flag), and close() keeps the temp dir and its log
        self.debug_log = os.environ.get("TINYMQTT_MOSQUITTO_DEBUG") == "1" if debug_log is None else debug_log
        self.persistence = persistence
        self.dir = tempfile.mkdtemp(prefix="tinymqtt-mosquitto-")
        self.conf_path = os.path.join(self.dir, "mosquitto.conf")
        self.log_path = os.path.join(self.dir, "mosquitto.log")
        self.port = free_port(self.host)
        self.proc = None

    def _write_conf(self):
        lines = [
            "listener %d %s" % (self.port, self.host),
            "allow_anonymous true",
            "max_inflight_messages 1000",
            "max_queued_messages 100000",
            "log_dest file %s" % self.log_path,
            "log_timestamp true",
            "persistence %s" % ("true" if self.persistence else "false"),
        ]
        if self.debug_log:
            lines.append("log_type all")
        if os.geteuid() == 0:  # else mosquitto drops to user "mosquitto", which cannot write to our 0700 temp dir
            lines.append("user root")
        if self.persistence:
            lines.append("persistence_location %s/" % self.dir)
        with open(self.conf_path, "w") as f:
            f.write("\n".join(lines) + "\n" + self.extra_conf + "\n")

    def start(self, timeout: float = 5.0):
        if self.proc is not None:
            return self
        self._write_conf()
        with open(os.path.join(self.dir, "stderr.txt"), "ab") as err:
            self.proc = subprocess.Popen([mosquitto_binary(), "-c", self.conf_path], cwd=self.dir,
                                         stdin=subprocess.DEVNULL, stdout=err, stderr=err)
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                self._fail("mosquitto exited with code %s" % self.proc.returncode)
            try:
                socket.create_connection((self.host, self.port), timeout=0.2).close()
                return self
            except OSError:
                if time.monotonic() > deadline:
                    self._fail("mosquitto did not accept on port %d within %.0f s" % (self.port, timeout))
                time.sleep(0.02)

    def _fail(self, why):
        self.stop()
        raise RuntimeError("%s\n--- config ---\n%s--- log ---\n%s" % (why, open(self.conf_path).read(), self.log_text()))

    def stop(self, timeout: float = 5.0):
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait()

    def restart(self):
        """Stop and start again on the same port (with persistence on, the sessions survive)."""
        self.stop()
        self.start()
        return self

    def log_text(self) -> str:
        out = ""
        for name in ("mosquitto.log", "stderr.txt"):
            try:
                with open(os.path.join(self.dir, name), errors="replace") as f:
                    out += f.read()
            except OSError:
                pass
        return out

    def close(self):
        """Stop and remove the temp dir."""
        self.stop()
        if not self.debug_log:
            shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return "<Mosquitto %s:%d %s>" % (self.host, self.port, "running" if self.proc else "stopped")
