# Reorders a bytecode .mpy's qstr table by use, so that the names used most get the indices below 128: bytecode
# and function preludes name a qstr by its index as a var-uint, one byte below 128 and two above. mpy-cross numbers
# qstrs in order of first use, so a big module (a profile's bundle has ~300) spends a second byte on ~500 of its
# ~1,100 name references. Re-encoding changes instruction lengths, so every jump is re-linked to its target
# instruction and the code is laid out again until the offsets settle (as mpy-cross's own passes and
# MicroPython's tools/mpy-tool.py --merge do). The bytes saved come off the flash and the heap alike (a plain .mpy's
# bytecode is copied to the heap).
#
# Only what the format (mpy v6: MicroPython 1.22 and later) says is touched; a file this cannot rewrite safely (native code,
# line-number tables, which map bytecode offsets; another version) comes back unchanged. Opcode formats, prelude
# encodings and jump encodings follow MicroPython's py/bc.h and py/emitbc.c (MIT licence).

MPY_VERSION = 6
_NATIVE_ARCH_FLAGS_PRESENT = 0x40
_MASK_EXTRA_BYTE = 0x9E
_QSTR, _VAR_UINT, _OFFSET = 1, 2, 3
_LOAD_CONST_SMALL_INT = 0x22
_SIGNED_JUMPS = (0x40, 0x42, 0x43, 0x44)  # UNWIND_JUMP, JUMP, POP_JUMP_IF_TRUE, POP_JUMP_IF_FALSE
_OBJ_STR, _OBJ_BYTES, _OBJ_TUPLE = 5, 6, 10


class Unchanged(Exception):
    """The file holds something this rewriter does not handle: keep it as mpy-cross wrote it."""


class _Reader:
    def __init__(self, data, pos=0):
        self.data = data
        self.pos = pos

    def byte(self):
        b = self.data[self.pos]
        self.pos += 1
        return b

    def bytes(self, n):
        self.pos += n
        if self.pos > len(self.data):
            raise Unchanged("truncated")
        return self.data[self.pos - n:self.pos]

    def uint(self):
        v = 0
        while True:
            b = self.byte()
            v = v << 7 | b & 0x7F
            if not b & 0x80:
                return v


def encode_uint(v):
    out = bytearray([v & 0x7F])
    v >>= 7
    while v:
        out.insert(0, 0x80 | v & 0x7F)
        v >>= 7
    return bytes(out)


def _skip_obj(r):
    kind = r.byte()
    if kind == _OBJ_TUPLE:
        for _ in range(r.uint()):
            _skip_obj(r)
    elif 4 < kind < _OBJ_TUPLE:  # str, bytes, int, float, complex: a length and the text (str, bytes: and a NUL)
        r.bytes(r.uint() + (kind in (_OBJ_STR, _OBJ_BYTES)))
    elif kind == 0 or kind > _OBJ_TUPLE:
        raise Unchanged("native code's function table, or an object kind this does not know")


class _Op:
    __slots__ = ("offset", "fmt", "code", "arg", "extra", "target", "overflow")

    def __init__(self, offset, fmt, code, arg, extra):
        self.offset, self.fmt, self.code, self.arg, self.extra = offset, fmt, code, arg, extra
        self.target = None
        self.overflow = False


def _decode(code):
    """The instructions of a function's bytecode; a jump's arg becomes the offset it lands on."""
    ops, at, ip = [], {}, 0
    while ip < len(code):
        start, op = ip, code[ip]
        fmt = 0x000003A4 >> 2 * (op >> 4) & 3
        ip += 1
        arg = extra = None
        if fmt in (_QSTR, _VAR_UINT):
            arg = code[ip] & 0x7F
            if op == _LOAD_CONST_SMALL_INT and arg & 0x40:
                arg |= -1 << 7
            while code[ip] & 0x80:
                ip += 1
                arg = arg << 7 | code[ip] & 0x7F
            ip += 1
        elif fmt == _OFFSET:
            if code[ip] & 0x80:
                arg = (code[ip] & 0x7F | code[ip + 1] << 7) - (0x4000 if op in _SIGNED_JUMPS else 0)
                ip += 2
            else:
                arg = code[ip] - (0x40 if op in _SIGNED_JUMPS else 0)
                ip += 1
            arg += ip  # (a jump counts from the end of its offset: UNWIND_JUMP's extra byte comes after)
        if op & _MASK_EXTRA_BYTE == 0:
            extra = code[ip]
            ip += 1
        o = _Op(start, fmt, op, arg, extra)
        ops.append(o)
        at[start] = o
    for o in ops:
        if o.fmt == _OFFSET:
            if o.arg not in at:
                raise Unchanged("a jump into an instruction")
            o.target = at[o.arg]
    return ops


def _encode_signed(v):
    out = bytearray([v & 0x7F])
    v >>= 7
    while v != 0 and v != -1:
        out.insert(0, 0x80 | v & 0x7F)
        v >>= 7
    if v == -1 and not out[0] & 0x40:
        out.insert(0, 0xFF)
    elif v == 0 and out[0] & 0x40:
        out.insert(0, 0x80)
    return bytes(out)


def _encode(op):
    out = bytearray([op.code])
    if op.fmt == _QSTR or op.fmt == _VAR_UINT:
        out += _encode_signed(op.arg) if op.code == _LOAD_CONST_SMALL_INT else encode_uint(op.arg)
    elif op.fmt == _OFFSET:
        signed = op.code in _SIGNED_JUMPS
        d = op.target.offset - op.offset - 2
        if (signed and -64 <= d <= 63) or (not signed and 0 <= d <= 127):
            out.append(d + (0x40 if signed else 0))
        else:
            d -= 1
            d += 0x4000 if signed else 0
            if not 0 <= d <= 0x7FFF:  # (in a pass whose later offsets are still the last pass's, or too long)
                d = 0x7FFF
                op.overflow = True
            out += bytes((0x80 | d & 0x7F, d >> 7 & 0xFF))
    if op.extra is not None:
        out.append(op.extra)
    return bytes(out)


def _layout(ops):
    """The bytecode of ops, laid out again until every instruction's offset stays put."""
    for _ in range(16):
        out = bytearray()
        moved = False
        for op in ops:
            if op.offset != len(out):
                op.offset, moved = len(out), True
            op.overflow = False
            out += _encode(op)
        if not moved:
            if any(op.overflow for op in ops):
                raise Unchanged("a jump too long")
            return bytes(out)
    raise Unchanged("jump offsets did not settle")


class _Fun:
    """One bytecode function of the file: its prelude split into what names qstrs and what does not."""

    def __init__(self, r):
        kind_len = r.uint()
        if kind_len & 3:
            raise Unchanged("native code")
        data = r.bytes(kind_len >> 3)
        p = _Reader(data)
        z = p.byte()  # prelude signature: xSSSSEAA, then xFSSKAED bytes while x
        n_pos, n_kw = z & 3, 0
        n = 0
        while z & 0x80:
            z = p.byte()
            n_pos |= (z & 4) << n
            n_kw |= (z & 8) >> 3 << n
            n += 1
        self.sig = data[:p.pos]
        n_info = n_cell = n = 0
        while True:  # prelude size: xIIIIIIC bytes
            z = p.byte()
            n_info |= (z & 0x7E) >> 1 << 6 * n
            n_cell |= (z & 1) << n
            n += 1
            if not z & 0x80:
                break
        info = p.pos
        self.names = [p.uint() for _ in range(1 + n_pos + n_kw)]  # its name, then its arguments'
        if p.pos != info + n_info:
            raise Unchanged("a line-number table")
        self.cells = data[p.pos:p.pos + n_cell]
        self.ops = _decode(data[p.pos + n_cell:])
        self.children = [_Fun(r) for _ in range(r.uint())] if kind_len & 4 else []

    def uses(self, count):
        for q in self.names:
            count[q] += 1
        for op in self.ops:
            if op.fmt == _QSTR:
                count[op.arg] += 1
        for c in self.children:
            c.uses(count)

    def anonymize(self, functions, name):
        # The parameters of the functions whose name is one of the qstrs in functions all become qstr name.
        if self.names[0] in functions:
            self.names[1:] = [name] * (len(self.names) - 1)
        for c in self.children:
            c.anonymize(functions, name)

    def write(self, new_index):
        names = b"".join(encode_uint(new_index[q]) for q in self.names)
        for op in self.ops:
            if op.fmt == _QSTR:
                op.arg = new_index[op.arg]
        size = bytearray()
        i, c = len(names), len(self.cells)
        while True:
            z = (i & 0x3F) << 1 | (c & 1)
            i >>= 6
            c >>= 1
            size.append(z | (0x80 if i | c else 0))
            if not i | c:
                break
        data = self.sig + bytes(size) + names + self.cells + _layout(self.ops)
        out = encode_uint(len(data) << 3 | bool(self.children) << 2) + data
        if self.children:
            out += encode_uint(len(self.children)) + b"".join(c.write(new_index) for c in self.children)
        return out


def sort_qstrs(mpy, positional=(), by_use=True):
    """mpy (bytes of a .mpy file) with its qstr table ordered by use, most used first (index 0, the source file
    name that tracebacks show, stays first); the bytes unchanged when the file is not one this can rewrite.
    positional: names of functions no caller passes a keyword (tools/deploy/arg_names.py): their parameters all
    take the most used name, and a name only they had leaves the table."""
    try:
        out = rewrite(mpy, by_use, positional=positional)
    except (Unchanged, IndexError):
        return mpy
    return out if len(out) < len(mpy) else mpy


def rewrite(mpy, by_use=True, positional=()):
    """mpy decoded and written again, its qstrs ordered by use (by_use) or as they were (which gives back the same
    bytes: what the tests check the codec with), the parameters of the functions named in positional renamed
    (sort_qstrs); raises Unchanged for a file it cannot rewrite."""
    if len(mpy) < 4 or mpy[0] != ord("M") or mpy[1] != MPY_VERSION:
        raise Unchanged("not an mpy v6 file")
    r = _Reader(mpy, 4)
    if mpy[2] & _NATIVE_ARCH_FLAGS_PRESENT:
        r.uint()
    header = mpy[:r.pos]
    n_qstr, n_obj = r.uint(), r.uint()
    qstrs = []
    for _ in range(n_qstr):
        start = r.pos
        v = r.uint()
        if not v & 1:  # not one of the firmware's static qstrs: its text and a NUL follow
            r.bytes((v >> 1) + 1)
        qstrs.append(mpy[start:r.pos])
    objs_start = r.pos
    for _ in range(n_obj):
        _skip_obj(r)
    objs = mpy[objs_start:r.pos]
    module = _Fun(r)
    if r.pos != len(mpy):
        raise Unchanged("bytes after the module")
    count = [0] * n_qstr
    module.uses(count)
    if positional:
        names = {}
        for q, raw in enumerate(qstrs):
            v = _Reader(raw).uint()
            if not v & 1:
                names[raw[-1 - (v >> 1):-1].decode()] = q
        anon = {names[n] for n in positional if n in names}
        if anon:  # (a function's name is a qstr past 0: there is a most used one)
            common = max(range(1, n_qstr), key=lambda q: count[q])
            module.anonymize(anon, common)
            count = [0] * n_qstr
            module.uses(count)
    order = list(range(n_qstr))
    if by_use:  # (sorted is stable: ties keep their order)
        order = [0] + sorted(order[1:], key=lambda q: -count[q])
    if positional:  # (a name no longer used leaves the table; 0, the file's, is never used by code)
        order = [0] + [q for q in order[1:] if count[q]]
    new_index = [0] * n_qstr
    for new, old in enumerate(order):
        new_index[old] = new
    return (header + encode_uint(len(order)) + encode_uint(n_obj) + b"".join(qstrs[q] for q in order) + objs
            + module.write(new_index))
