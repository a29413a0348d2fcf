# tools/deploy/qstr_sort.py: a library .mpy with its qstr table ordered by use. The codec must give back
# mpy-cross's own bytes when nothing moves, the sorted file must be smaller and hold the same names, and real
# MicroPython (the unix port) must run a sorted file exactly as it runs mpy-cross's: a module with more than 128
# names, long and short jumps both ways, exception handlers, with, closures, generators and keyword arguments.
import os
import subprocess
import sys

import pytest

from tools import boards
from tools.deploy import compile_mpy, compile_text, library_text
from tools.deploy.qstr_sort import Unchanged, rewrite, sort_qstrs

REPO = boards.REPO
MICROPYTHON = os.path.join(REPO, ".venv", "bin", "micropython")

# Names used once at the top come first in mpy-cross's table; the ones used most come last, past index 127.
PROGRAM = '''
import sys
out = []
%(rare)s
late_global_used_a_lot = 3
class Box:
    def __init__(self, first_value, second_value=2, *rest, keyword_only=3, **more):
        self.attribute_used_a_lot = first_value
        self.another_attribute_used_a_lot = second_value + keyword_only + len(rest) + len(more)

    def step(self, by):
        self.attribute_used_a_lot += by
        return self.attribute_used_a_lot

def counter(limit):
    n = 0
    while n < limit:
        yield n
        n += 1

def closure_maker(start):
    total = [start]
    def add(x):
        total[0] += x
        return total[0]
    return add

class Ctx:
    def __enter__(self):
        out.append("enter")
        return self
    def __exit__(self, *a):
        out.append("exit %%s" %% (a[0] is not None))
        return True

def long_function(box, items):
    acc = 0
    for i in items:
        if i %% 3 == 0:
            acc += box.step(i)
%(long_body)s
        elif i %% 3 == 1:
            try:
                if i > 5:
                    raise ValueError(i)
                acc -= box.another_attribute_used_a_lot
            except ValueError as e:
                acc += e.args[0] * 2
            finally:
                acc += 1
        else:
            with Ctx():
                acc ^= box.attribute_used_a_lot
                if i == 8:
                    raise KeyError(i)
    return acc

box = Box(1, second_value=5, keyword_only=7, extra=1)
add = closure_maker(10)
out.append(long_function(box, list(counter(12))))
out.append(add(5) + add(6))
out.append([x * x for x in range(5) if x %% 2])
out.append(sorted({k: v for k, v in zip("abc", (3, 1, 2))}.items(), key=lambda kv: kv[1]))
out.append(sum(%(rare_sum)s))
print(repr(out))
'''


def program():
    rare = "\n".join("rare_name_number_%03d = %d" % (i, i) for i in range(150))
    rare_sum = "[" + ", ".join("rare_name_number_%03d" % i for i in range(0, 150, 7)) + "]"
    long_body = "\n".join("            acc += box.attribute_used_a_lot * %d + late_global_used_a_lot" % i
                          for i in range(40))  # a forward jump past 127 bytes, and the loop's back again
    return PROGRAM % {"rare": rare, "long_body": long_body, "rare_sum": rare_sum}


def o3(tmp_path, text, name="prog.py"):
    src = tmp_path / name
    src.write_text(text)
    return compile_mpy(str(src), name, ["-O3"], str(tmp_path))


def table(mpy):
    """The qstr table entries (bytes as the file holds them), in order."""
    from tools.deploy.qstr_sort import _Reader
    r = _Reader(mpy, 4)
    n, _ = r.uint(), r.uint()
    out = []
    for _ in range(n):
        start = r.pos
        v = r.uint()
        if not v & 1:
            r.bytes((v >> 1) + 1)
        out.append(mpy[start:r.pos])
    return out


def test_the_codec_gives_back_mpy_crosss_bytes_when_nothing_moves(tmp_path):
    board = boards.get("esp32", profile="full")
    files = [o3(tmp_path, program())]
    for m in board.lib:
        files.append(compile_text(board, library_text(board, os.path.join(REPO, "lib", m), m), m, str(tmp_path)))
    for f in files:  # (compile_text already sorted them: rewriting keeps that order as it is)
        assert rewrite(f, by_use=False) == f


def test_sorting_keeps_the_names_and_the_source_file_first_and_saves_bytes(tmp_path):
    mpy = o3(tmp_path, program())
    out = sort_qstrs(mpy)
    assert len(out) < len(mpy)
    before, after = table(mpy), table(out)
    assert after[0] == before[0] and sorted(after) == sorted(before)
    late = b"\x2clate_global_used_a_lot\x00"  # (length 22 << 1, the name, its NUL)
    assert before.index(late) > 128 and after.index(late) < 8  # numbered late, used among the most


def test_files_it_cannot_rewrite_come_back_unchanged(tmp_path):
    src = tmp_path / "lines.py"
    src.write_text(program())
    with_lines = compile_mpy(str(src), "lines.py", [], str(tmp_path))  # no -O3: a line-number table
    with pytest.raises(Unchanged):
        rewrite(with_lines)
    assert sort_qstrs(with_lines) == with_lines
    for junk in (b"", b"M\x05\x00\x1f", b"not an mpy", with_lines[:len(with_lines) // 2]):
        assert sort_qstrs(junk) == junk


@pytest.mark.skipif(not os.access(MICROPYTHON, os.X_OK), reason="needs the unix-port MicroPython (make bootstrap)")
def test_micropython_runs_a_sorted_file_as_it_runs_mpy_crosss(tmp_path):
    text = program()
    expected = subprocess.run([sys.executable, "-c", text], capture_output=True, text=True, check=True).stdout
    mpy = o3(tmp_path, text)
    for name, data in (("plain", mpy), ("sorted", sort_qstrs(mpy))):
        d = tmp_path / name
        d.mkdir()
        (d / "prog.mpy").write_bytes(data)
        p = subprocess.run([MICROPYTHON, "-c", "import prog"], cwd=str(d), capture_output=True, text=True,
                           timeout=30, env=dict(os.environ, MICROPYPATH=str(d)))
        assert (name, p.returncode, p.stdout) == (name, 0, expected), p.stderr


# A private function no caller passes a keyword: its parameters' names leave the file (tools/deploy/arg_names.py);
# one that a caller passes a keyword, or that is handed on as a value, keeps them.
POSITIONAL = '''
def _private_helper(first_rarely_named_parameter, second_rarely_named_parameter):
    return first_rarely_named_parameter * 10 + second_rarely_named_parameter

def _called_by_keyword(keyword_named_parameter=0):
    return keyword_named_parameter + 1

def _handed_on(handed_on_parameter):
    return handed_on_parameter * 3

def apply(f, v):
    return f(v)

print(_private_helper(4, 2), _called_by_keyword(keyword_named_parameter=5), apply(_handed_on, 7))
'''


def test_parameters_no_caller_names_leave_the_table(tmp_path):
    from tools.deploy.arg_names import positional_only
    assert positional_only(POSITIONAL) == {"_private_helper"}
    mpy = o3(tmp_path, POSITIONAL)
    out = sort_qstrs(mpy, positional_only(POSITIONAL))
    names = b"".join(table(out))
    assert b"rarely_named_parameter" not in names and b"rarely_named_parameter" in b"".join(table(mpy))
    assert b"keyword_named_parameter" in names and b"handed_on_parameter" in names
    assert len(out) < len(sort_qstrs(mpy))
    if os.access(MICROPYTHON, os.X_OK):  # and MicroPython runs it as before
        d = tmp_path / "run"
        d.mkdir()
        (d / "prog.mpy").write_bytes(out)
        p = subprocess.run([MICROPYTHON, "-c", "import prog"], cwd=str(d), capture_output=True, text=True,
                           timeout=30, env=dict(os.environ, MICROPYPATH=str(d)))
        assert (p.returncode, p.stdout) == (0, "42 6 21\n"), p.stderr
