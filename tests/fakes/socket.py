# A stand-in for MicroPython's `socket` module (the simulated board has none), for the blocking paths of the
# board ports under real MicroPython. Each socket() plays the next script in `scripts`: what the "server"
# does on every readinto() call, in order: bytes (delivered), an int (raised as OSError(errno), e.g. 116 a
# timeout on ESP32, 104 a reset), None (a non-blocking read with nothing there), b"" (the server closed).
# When the script runs out a read times out (OSError(ETIMEDOUT)). Every call is logged for the test.
AF_INET = 2
SOCK_STREAM = 1
IPPROTO_TCP = 6
SOL_SOCKET = 1
SO_REUSEADDR = 4
TCP_NODELAY = 1

ETIMEDOUT = 110
hosts = {"broker.example": "10.0.0.2"}  # what getaddrinfo resolves
dns_error = -202  # what an ESP32 raises for a name that does not resolve (lwIP on a Pico W: -2)
connect_error = {}  # (ip, port) -> errno that connect() raises
write_chunk = 0  # >0: write() takes at most this many bytes per call
scripts = []
log = []
sockets = []


def getaddrinfo(host, port, af=0, type=0, proto=0, flags=0):
    log.append(("getaddrinfo", host, port))
    ip = host if host.replace(".", "").isdigit() else hosts.get(host)
    if ip is None:
        raise OSError(dns_error)
    return [(AF_INET, SOCK_STREAM, IPPROTO_TCP, "", (ip, port))]


class socket:
    def __init__(self, af=AF_INET, type=SOCK_STREAM, proto=IPPROTO_TCP):
        log.append(("socket", af, type, proto))
        self.script = list(scripts.pop(0)) if scripts else []
        self.sent = bytearray()
        self.timeout = None
        self.closed = False
        self.opts = []
        sockets.append(self)

    def settimeout(self, t):
        self.timeout = t

    def setblocking(self, flag):
        self.timeout = None if flag else 0

    def connect(self, addr):
        log.append(("connect", addr))
        err = connect_error.get(addr)
        if err:
            raise OSError(err)

    def setsockopt(self, level, opt, value):
        self.opts.append((level, opt, value))

    def write(self, buf, *args):  # write(buf), write(buf, max_len), write(buf, off, max_len)
        if self.closed:
            raise OSError(9)  # EBADF
        off, n = 0, len(buf)
        if len(args) == 1:
            n = min(args[0], n)
        elif len(args) == 2:
            off, n = args[0], min(args[1], n - args[0])
        if write_chunk:
            n = min(n, write_chunk)
        self.sent += bytes(buf[off:off + n])
        return n

    def readinto(self, buf, nbytes=None):
        if self.closed:
            raise OSError(9)
        if not self.script:
            raise OSError(ETIMEDOUT)
        step = self.script.pop(0)
        if step is None:
            return None
        if isinstance(step, int):
            raise OSError(step)
        n = min(len(step), len(buf))
        buf[:n] = step[:n]
        if n < len(step):
            self.script.insert(0, step[n:])
        return n

    def close(self):
        self.closed = True
