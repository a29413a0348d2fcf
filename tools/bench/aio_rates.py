# python -m tools.bench.aio_rates: msgs/s of the asyncio client at QoS 0/1/2 on the 64-bit and 32-bit unix ports,
# against the raw MicroPython socket (the ceiling) and mqtt_as in the same run, as make bench's MicroPython row
# measures them (20000 x 64 B here, 1000 in flight, counted by a C subscriber; the peers: tools/bench/mp_peers.py).
# Environment: N, ROUNDS (median taken), QOS ("0,1,2"), CLIENTS ("raw,tinymqtt-aio,mqtt_as"), BUILDS ("mp-,mp32-"),
# MP_BUFFERS (tinymqtt's out_size,max_packet_size: "65536,65536" as in the bench; tools/bench/mp_workers.py).
# Each row: the median msgs/s, the median of each round's ratio to the ceiling's rate in that round, and the median
# client CPU time per message (the publisher's /proc/self/stat, 10 ms ticks: steadier than msgs/s on a shared
# machine); above the rows, the machine's load average before and after the run.
import os
import sys
import tempfile

from tools.bench import mp_peers, mp_unix, throughput
from tools.bench.broker import BenchBroker


def main():
    tmp = tempfile.mkdtemp()
    got = mp_peers.setup(tmp)
    names = os.environ.get("CLIENTS", "raw,tinymqtt-aio,mqtt_as").split(",")
    n, rounds = int(os.environ.get("N", 20000)), int(os.environ.get("ROUNDS", 1))
    qoses = [int(q) for q in os.environ.get("QOS", "0,1,2").split(",")]
    out = {}
    load = os.getloadavg()[0]  # (the machine's load beside the rates: a shared machine's rates move with it)
    broker = BenchBroker().start()
    try:
        for prefix in os.environ.get("BUILDS", "mp-,mp32-").split(","):
            r = throughput.throughput(sys.executable, broker, mp_unix.clients(prefix, got, names), qoses, n,
                                      rounds, mp_peers.WINDOW, 64, cap=10, slow=mp_unix.slow(prefix, n),
                                      ceiling=prefix + "raw")
            out.update({"%s q%d" % (c, q): v for (c, q), v in r.items() if v})
    finally:
        broker.close()
    print("load average (1 min) %.2f before, %.2f after" % (load, os.getloadavg()[0]))
    for k, v in out.items():  # (CPU: the publishing process's, per message, median of the rounds)
        print("%-24s %8.0f msgs/s  x%.2f of its ceiling  client CPU %5.1f us/msg" % (
            k, v["rate"], v.get("ratio") or 0, (v.get("cpu_us") or {}).get("client") or 0))


if __name__ == "__main__":
    main()
