# Sections 1 and 2: end-to-end throughput through one mosquitto, counted by one subscriber, and the round trip
# of single QoS 1/2 publishes. Every client runs in its own process (tools/bench/workers.py), so none shares a
# GIL with the counter or with this coordinator.
#
# Throughput: the worker connects and says READY; the clock starts when we send GO and stops when the counter
# (mosquitto_sub, subscribed at QoS 1, one byte per message) has printed the last message. Clients run in
# rounds, in a rotating order; each rate is the median of its rounds and each ratio the median of the ratios
# to the ceiling run of the same round: other work on the machine moves single runs by tens of percent.
import json
import os
import subprocess
import time

from tools.bench.broker import Counter
from tools.bench.workers import ROOT

CEILING = "raw"
CLIENTS = ("raw", "tinymqtt", "tinymqtt-aio", "paho", "minimqtt")
LABELS = {"raw": "ceiling (raw socket)", "tinymqtt": "tinymqtt, blocking", "tinymqtt-aio": "tinymqtt, asyncio",
          "paho": "paho-mqtt", "minimqtt": "Adafruit MiniMQTT", "mp-raw": "MicroPython: ceiling (raw socket)",
          "mp-tinymqtt": "MicroPython: tinymqtt", "mp-tinymqtt-aio": "MicroPython: tinymqtt asyncio",
          "mp-tinymqtt-aio-nowait": "MicroPython: tinymqtt asyncio nowait",
          "mp-umqtt": "MicroPython: umqtt.simple", "mp-umqtt-nodelay": "MicroPython: umqtt + NODELAY",
          "mp-mqtt_as": "MicroPython: mqtt_as"}
LABELS.update({"mp32-" + k[3:]: v.replace("MicroPython:", "MicroPython 32-bit:") for k, v in list(LABELS.items())
               if k.startswith("mp-")})  # mp32-NAME: mp-NAME on the 32-bit unix port (tools/bench/mp_unix.py)
PEER_MODULES = {"paho": ("paho.mqtt.client", "paho-mqtt"),
                "minimqtt": ("adafruit_minimqtt.adafruit_minimqtt", "adafruit-circuitpython-minimqtt")}
PAHO_WINDOW = 20  # paho's own default: its throughput falls with a larger window (it rescans it on every ack)
TOPIC = "bench/tput"
SUB_QOS = 1


def peer_version(python, client):
    """The installed version of a peer, or None when it is missing (then it is left out)."""
    mod = PEER_MODULES.get(client)
    if not mod:
        return ""
    code = "import importlib.metadata as m, %s; print(m.version(%r))" % (mod[0], mod[1])
    p = subprocess.run([python, "-c", code], capture_output=True, text=True)
    return p.stdout.strip() if p.returncode == 0 else None


class Worker:
    def __init__(self, python, client, mode, qos, n, port, cap, window, payload_len, topic):
        args = [python, "-m", "tools.bench.workers", client, mode, qos, n, port, cap, window, payload_len, topic]
        env = None
        if client.startswith(("mp-", "mp32-")):  # MicroPython: the unix port runs tools/bench/mp_workers.py
            from tools.bench import mp_unix
            args, env = mp_unix.command(client, args[4:])  # (the peers: mp_unix.PEER_PATH)
        self.p = subprocess.Popen([str(a) for a in args], cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, env=env)

    def ready(self):
        """True once connected; False when the client does not support this run (MiniMQTT and QoS 2)."""
        line = self.p.stdout.readline()
        if line.strip() != "READY":
            out, err = self.p.communicate(timeout=30)
            if "UNSUPPORTED" in (line + out + err):
                return False
            raise RuntimeError("worker failed before READY: %s%s%s" % (line, out, err[-2000:]))
        return True

    def go(self):
        t = time.monotonic()
        self.p.stdin.write("GO\n")
        self.p.stdin.flush()
        return t

    def running(self):
        return self.p.poll() is None

    def result(self, timeout=120):
        out, err = self.p.communicate(timeout=timeout)
        for line in out.splitlines():
            if line.startswith("RESULT "):
                return json.loads(line[7:])
        raise RuntimeError("worker gave no result (exit %s): %s" % (self.p.returncode, err[-2000:]))


def cpu_seconds(pid):
    """utime + stime of a live process, from /proc (None where there is no /proc)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def throughput_one(python, port, counter, client, qos, n, cap, window, payload_len, broker_pid=None):
    w = Worker(python, client, "tput", qos, n, port, cap, window, payload_len, TOPIC)
    if not w.ready():
        return None
    base = counter.read(0)
    cpu0 = (cpu_seconds(broker_pid) if broker_pid else None, cpu_seconds(counter.proc.pid))
    t0 = w.go()
    marks = []  # (time, total) after every read of the counter while the worker runs
    while w.running() and time.monotonic() < t0 + cap + 60:
        got = counter.read(0.05) - base  # (the clock read after it: a read waits up to 50 ms for what comes)
        marks.append((time.monotonic(), got))
        time.sleep(0.002)  # let the counter's bytes pile up: fewer wake-ups for this process
    res = w.result(timeout=30)
    sent = res["sent"]
    got, t_last = counter.wait_for(base + sent, time.monotonic() + 10)
    marks.append((t_last, got - base))
    got -= base
    t_end = next((t for t, k in marks if k >= sent), t_last)
    elapsed = t_end - t0
    cpu1 = (cpu_seconds(broker_pid) if broker_pid else None, cpu_seconds(counter.proc.pid))
    cpu = {"client": res["cpu"]}
    for name, a, b in (("broker", cpu0[0], cpu1[0]), ("counter", cpu0[1], cpu1[1])):
        if a is not None and b is not None:
            cpu[name] = b - a
    return {"client": client, "qos": qos, "sent": sent, "received": got, "seconds": elapsed,
            "rate": got / elapsed if elapsed > 0 else 0.0, "publish_seconds": res["t_pub"] - t0,
            "acked_seconds": res["t_done"] - t0, "pending": res["pending"],
            "cpu_us": {k: v / got * 1e6 for k, v in cpu.items()} if got else {}}


def _f(x):
    return "?" if x is None else "%.1f" % x


def median(xs):
    xs = sorted(xs)
    k = len(xs)
    return (xs[k // 2] + xs[(k - 1) // 2]) / 2 if k else 0.0


def throughput(python, broker, clients, qoses, n, rounds, window, payload_len=64, cap=20.0, slow=None, log=print,
               ceiling=CEILING):
    """{(client, qos): {"rate": median msgs/s, "runs": [...]}}. `slow`: {client: (n, cap)} for clients that
    wait for every ack inside publish() (MiniMQTT at QoS 1): measured over a small n, one round."""
    slow = slow or {}
    counter = Counter(broker.port, "bench/#", SUB_QOS)
    time.sleep(0.3)  # subscribed
    out = {}
    try:
        for qos in qoses:
            for r in range(rounds):
                order = list(clients[r % len(clients):]) + list(clients[:r % len(clients)])
                for client in order:
                    cn, ccap = n, cap
                    if qos and client in slow:
                        if r:
                            continue
                        cn, ccap = slow[client]
                    win = PAHO_WINDOW if client == "paho" else window
                    res = throughput_one(python, broker.port, counter, client, qos, cn, ccap, win, payload_len,
                                         broker.proc.pid)
                    if res is None:
                        out[(client, qos)] = None
                        continue
                    res["window"], res["round"] = win, r
                    out.setdefault((client, qos), {"runs": []})["runs"].append(res)
                    c = res["cpu_us"]
                    log("  QoS %d %-22s %8.0f msgs/s  (%d of %d in %.2f s)  CPU us/msg: client %.1f, "
                        "mosquitto %s, counter %s" % (qos, LABELS[client], res["rate"], res["received"], res["sent"],
                                                      res["seconds"], c.get("client", 0), _f(c.get("broker")),
                                                      _f(c.get("counter"))))
            ceil = {x["round"]: x["rate"] for x in (out.get((ceiling, qos)) or {"runs": []})["runs"]}
            for client in clients:
                d = out.get((client, qos))
                if d:
                    d["rate"] = median([x["rate"] for x in d["runs"]])
                    # Against the ceiling run of the same round: the two ran seconds apart, under the same load.
                    paired = [x["rate"] / ceil[x["round"]] for x in d["runs"] if ceil.get(x["round"])]
                    if paired:
                        d["ratio"] = median(paired)
                    d["cpu_us"] = {k: median([x["cpu_us"][k] for x in d["runs"] if k in x["cpu_us"]])
                                   for k in d["runs"][0]["cpu_us"]}
    finally:
        counter.close()
    return out


def percentile(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p))] if xs else 0.0


def latency(python, broker, clients, qoses, samples, cap, window, payload_len=64, log=print):
    """{(client, qos): {"p50": s, "p99": s, "n": samples}}: one publish at a time, each waited for."""
    out = {}
    for qos in qoses:
        for client in clients:
            if client == CEILING:
                continue
            w = Worker(python, client, "lat", qos, samples, broker.port, cap, window, payload_len, "bench/lat")
            if not w.ready():
                out[(client, qos)] = None
                continue
            w.go()
            lat = w.result(timeout=cap + 60)["lat"]
            out[(client, qos)] = {"p50": percentile(lat, 0.5), "p99": percentile(lat, 0.99), "n": len(lat)}
            log("  QoS %d %-22s p50 %8.1f us  p99 %8.1f us  (%d samples)" % (
                qos, LABELS[client], out[(client, qos)]["p50"] * 1e6, out[(client, qos)]["p99"] * 1e6, len(lat)))
    return out
