# CPython's buffers that grow (docs/options.md). With the default sizes a CPython session accepts and announces
# MQTT's largest packet, as paho does, while its buffers start at 4096 bytes and grow only when a larger packet
# actually comes or goes, so a fleet of idle clients stays small. MicroPython keeps fixed, preallocated buffers
# (what a board's heap can promise): no board build has this file, and the session's calls into it compile out.


def grow_out(s, n):
    """Room in s.out for an n-byte packet after what it holds (checks.check_size bounded n by the limits)."""
    need = s.outlen + n
    if need > s.out_size:
        b = bytearray(max(need, 2 * s.out_size))
        b[:s.outlen] = s.out[:s.outlen]
        s.out = b
        s.out_size = len(b)


def grow_in(s, total):
    """s.inbuf is full of the first bytes of a total-byte packet: twice as large (at most total), what it holds
    kept. It grows as the packet's bytes come, never on the strength of its announced length alone."""
    n = s.inlen
    b = bytearray(min(total, 2 * n))
    b[:n] = s.inbuf[:n]
    s.inbuf = b
    s._inmv = memoryview(b)
    return b
