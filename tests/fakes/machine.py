# A stand-in for MicroPython's `machine` module on the simulated board: Pin remembers its level and prints
# it, RTC memory survives a "deep sleep" (it is printed as FAKE-RTC <hex>; the test puts it back into
# fake_rtc.bin before the restart), and deepsleep() prints DEEPSLEEP <ms> and ends the program: the test
# then starts it again, as a board wakes up at main.py.
import sys


class Pin:
    IN, OUT = 0, 1
    PULL_UP, PULL_DOWN = 1, 2

    def __init__(self, id, mode=None, pull=None, value=None):
        self.id, self._v = id, 0
        if value is not None:
            self.value(value)

    def value(self, v=None):
        if v is None:
            return self._v
        self._v = 1 if v else 0
        print("FAKE-PIN %s %d" % (self.id, self._v))

    def on(self):
        self.value(1)

    def off(self):
        self.value(0)

    def toggle(self):
        self.value(1 - self._v)


_rtc = b""
try:
    with open("fake_rtc.bin", "rb") as _f:
        _rtc = _f.read()
except OSError:
    pass


class RTC:
    def memory(self, data=None):
        global _rtc
        if data is None:
            return _rtc
        _rtc = bytes(data)
        print("FAKE-RTC " + "".join("%02x" % b for b in _rtc))


def unique_id():
    return b"\xde\xad\xbe\xef"


def deepsleep(ms=0):
    print("DEEPSLEEP %d" % ms)
    raise SystemExit


def reset():
    print("RESET")
    raise SystemExit
