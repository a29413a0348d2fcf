# The broker and the counter every throughput run shares: one local mosquitto started by the bench (limits
# raised, so nothing is queued-then-dropped or throttled by the broker's defaults), and a mosquitto_sub (C,
# libmosquitto) that prints one byte per message, which this process counts with large reads.
import os
import subprocess
import time

from tests.support.broker import Mosquitto, mosquitto_binary

CONF = ("max_inflight_messages 0",        # 0: no limit on QoS 1/2 messages in flight to the counter
        "max_queued_messages 0",          # 0: no limit on the queue behind it
        "max_inflight_bytes 0", "max_queued_bytes 0",
        "persistent_client_expiration 1m", "set_tcp_nodelay true")


class BenchBroker(Mosquitto):
    def _write_conf(self):
        lines = ["listener %d %s" % (self.port, self.host), "allow_anonymous true", "persistence false",
                 "log_dest file %s" % self.log_path, "log_type error", "log_type warning"]
        lines += CONF
        if os.geteuid() == 0:
            lines.append("user root")
        with open(self.conf_path, "w") as f:
            f.write("\n".join(lines) + "\n")


def mosquitto_version():
    p = subprocess.run([mosquitto_binary(), "-h"], capture_output=True, text=True)
    for line in (p.stdout + p.stderr).splitlines():
        if "version" in line:
            return line.split("version", 1)[1].strip().split()[0]
    return "?"


class Counter:
    """mosquitto_sub -t TOPIC -q SUBQOS -F x -N: one byte on its stdout per message; count() reads them."""

    def __init__(self, port, topic, qos=1):
        self.proc = subprocess.Popen(["mosquitto_sub", "-h", "127.0.0.1", "-p", str(port), "-t", topic,
                                      "-q", str(qos), "-F", "x", "-N", "-i", "bench-counter-%d" % os.getpid()],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.fd = self.proc.stdout.fileno()
        os.set_blocking(self.fd, False)
        self.total = 0

    def read(self, timeout):
        """Reads what has arrived, waiting up to timeout seconds for something; returns the running total."""
        import select
        r, _, _ = select.select([self.fd], [], [], timeout)
        if r:
            try:
                d = os.read(self.fd, 1 << 20)
            except BlockingIOError:
                d = b""
            if not d and self.proc.poll() is not None:
                raise RuntimeError("the counting subscriber exited: %s" % self.proc.stderr.read().decode(errors="replace"))
            self.total += len(d)
        return self.total

    def wait_for(self, target, deadline):
        """Reads until the total reaches target or the monotonic deadline passes; returns (total, time)."""
        while self.total < target:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            self.read(min(left, 0.5))
        return self.total, time.monotonic()

    def close(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
