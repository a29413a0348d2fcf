# What the realistic programs (real_*.py) share: topics from config, the phases (READY once connected and
# subscribed; RESTART after the first reading came back, when tools/bench/realistic.py restarts the broker;
# done once the client has connected again and two more readings came back), the heap figures and the RESULT
# line. Plain MicroPython: no client's code.
import gc
import json
import time

import config

TOPIC = "real/" + config.CLIENT_ID
DATA, STATUS, OTHER = TOPIC + "/data", TOPIC + "/status", TOPIC + "/other"
PAYLOAD = b"0123456789abcdef"
N = 20  # messages per allocation figure


class Run:
    def __init__(self, base, got, connects):
        self.base, self.got, self.connects = base, got, connects
        self.n, self.phase, self.next = 0, 0, time.ticks_ms()
        gc.collect()
        self.fig = {"connected": gc.mem_alloc() - base}
        print("READY")

    def due(self):
        if time.ticks_diff(time.ticks_ms(), self.next) < 0:
            return False
        self.next = time.ticks_add(self.next, config.PERIOD_MS)
        return True

    def reading(self):
        self.n += 1
        return b"%d" % self.n

    def done(self):
        """Moves through the phases; True once the run is over."""
        if self.phase == 0 and self.got:  # a reading came back: the bench restarts the broker now
            print("RESTART")
            self.phase, self.before = 1, self.connects[0]
        elif self.phase == 1 and self.connects[0] > self.before:  # connected again
            self.phase, self.after = 2, len(self.got)
        return self.phase == 2 and len(self.got) >= self.after + 2

    # Heap bytes per QoS 0 publish, per QoS 1 publish (until its PUBACK) and per received QoS 1 message (a
    # publish to our own subscription until it comes back, less the publish), each over N at steady state.
    # pub0 / pub1 / pub_data each send one message through the client's API and return (blocking: once its flow
    # is complete) or return what to await; service() is the client's wait for the echo.
    def measure(self, pub0, pub1, pub_data, service):
        def echo():
            n = len(self.got)
            pub_data()
            while len(self.got) == n:
                service()
        for key, step in (("pub q0", pub0), ("pub q1", pub1), ("echo q1", echo)):
            for _ in range(3):
                step()
            a = self._start()
            for _ in range(N):
                step()
            self._stop(key, a)
        self._rx()

    async def ameasure(self, pub0, pub1, pub_data):
        import asyncio
        for key, step in (("pub q0", pub0), ("pub q1", pub1), ("echo q1", pub_data)):
            for i in range(3 + N):
                if i == 3:
                    a = self._start()
                n = len(self.got)
                await step()
                while key == "echo q1" and len(self.got) == n:
                    await asyncio.sleep_ms(5)
            self._stop(key, a)
        self._rx()

    def _start(self):
        gc.collect()
        gc.disable()
        return gc.mem_alloc()

    def _stop(self, key, a):
        self.fig[key] = (gc.mem_alloc() - a) // N
        gc.enable()

    def _rx(self):
        self.fig["rx q1"] = self.fig.pop("echo q1") - self.fig["pub q1"]

    def result(self):
        gc.collect()
        self.fig["end"] = gc.mem_alloc() - self.base
        self.fig["readings"] = self.n
        print("RESULT " + json.dumps(self.fig))
