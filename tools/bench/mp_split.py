# python -m tools.bench.mp_split: where the asyncio client's CPU per message goes on the unix ports (64-bit and,
# when built, 32-bit), connected to a local mosquitto: the session's publish() alone against AsyncClient.publish()
# at QoS 0 (the message left in `out` for the writer task), and the client's handling of one PUBACK event (_event:
# the flow table, then its waiters woken). Per call, the best of 20 runs of 2000 calls with `out` emptied after
# each: a best-of time is steadier than msgs/s on a shared machine. What aio_rates' ratios leave open: the share of
# the asyncio layer in the client's CPU time, against the session's.
import shutil
import subprocess
import tempfile

import tools.sim
from tools.bench.broker import BenchBroker

APP = r'''
import asyncio, time
import config
from tinymqtt.aio import AsyncClient

N, ROUNDS = 2000, 20


def best(*fs):
    # (the runs of each alternate, so a busy moment of the machine falls on all of them alike)
    b = [None] * len(fs)
    for r in range(ROUNDS):
        for i, f in enumerate(fs):
            t = time.ticks_us()
            f()
            d = time.ticks_diff(time.ticks_us(), t) / N
            b[i] = d if b[i] is None else min(b[i], d)
    return b


async def main():
    c = AsyncClient(config.BROKER_HOST, config.BROKER_PORT, reconnect=False, client_id=config.CLIENT_ID, version=4,
                    out_size=65536, max_packet_size=65536)
    await c.connect()
    s = c.session
    payload = b"x" * 64

    def session_publish():
        for i in range(N):
            s.publish("bench/split", payload, 0)
            s.outlen = 0

    def client_publish():
        for i in range(N):
            c.publish("bench/split", payload, 0)  # (an awaitable already done: the writer task would send it)
            s.outlen = 0

    def ack_event():
        for i in range(N):
            c._event(4, 1, 0)  # a PUBACK (packet type 4) nobody awaits, reason 0

    a, b, e = best(session_publish, client_publish, ack_event)
    print("session.publish() %.2f us, AsyncClient.publish() %.2f us (the asyncio layer %.2f us), a PUBACK's "
          "_event %.2f us" % (a, b, b - a, e))
    await c.disconnect()


asyncio.run(main())
'''


def main():
    broker = BenchBroker().start()
    try:
        for board, label in (("unix", "64-bit"), ("unix32", "32-bit")):
            if board == "unix32" and not tools.sim.micropython32():
                print("%-7s no 32-bit unix port (python -m tools.mp32 builds it)" % label)
                continue
            root = tempfile.mkdtemp(prefix="tinymqtt-split-")
            try:
                env = dict(BROKER_HOST=broker.host, BROKER_PORT=broker.port)
                argv, penv = tools.sim.command(tools.sim.assemble(APP, root, board, env), board)
                p = subprocess.run(argv, cwd=root, env=penv, capture_output=True, text=True, timeout=120)
                print("%-7s %s" % (label, (p.stdout + p.stderr).strip()))
            finally:
                shutil.rmtree(root, ignore_errors=True)
    finally:
        broker.close()


if __name__ == "__main__":
    main()
