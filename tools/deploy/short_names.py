# Short private names for boards (boards.toml `short_errors`): before mpy-cross, every private name the library
# defines (one leading underscore: a helper, a method, an attribute, a module constant) becomes a short one (_a,
# _b, ... _aa) the same in every library module, so a name one module defines and another uses still meets (a
# name's text is in each .mpy and in the board's heap: docs/size.md). The leading underscore stays (MicroPython
# drops a private `_X = const(...)` from the globals as before, and an application's own attributes cannot meet
# one). Tracebacks on the board name `_a`: `python -m tools.deploy.short_names` prints the table.
#
# Only names the library itself binds are renamed (def, class, a parameter, an assignment to a name or an
# attribute, import as), in code and in strings that are exactly such a name (getattr(p, "_era")); a private
# name the library only reads (another module's, or one only a type()'s dict binds) stays, in code and strings.
import ast
import functools
from collections import Counter
import glob
import io
import os
import re
import tokenize

LIB = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "lib", "tinymqtt")
PRIVATE = re.compile(r"_[A-Za-z][A-Za-z0-9_]*\Z")  # (not "_", not a dunder or a mangled __name)
_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


class NameClash(ValueError):
    """A short name would meet a name the text already has."""


def library_sources():
    """{module file name: source} of the library modules a board may load (every one in lib/tinymqtt)."""
    out = {}
    for path in sorted(glob.glob(os.path.join(LIB, "*.py"))):
        name = os.path.basename(path)
        with open(path, encoding="utf-8") as f:
            out[name] = f.read()
    return out


def _bindings(tree):
    """The private names this module binds, but for `_X = const(...)`'s, which MicroPython drops: they cost
    nothing."""
    bound, consts = set(), set()
    for n in ast.walk(tree):
        if (isinstance(n, ast.Assign) and isinstance(n.value, ast.Call) and isinstance(n.value.func, ast.Name)
                and n.value.func.id == "const"):
            consts.update(t.id for t in n.targets if isinstance(t, ast.Name))
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(n.name)
        elif isinstance(n, ast.arg):
            bound.add(n.arg)
        elif isinstance(n, (ast.Name, ast.Attribute)) and isinstance(n.ctx, ast.Store):
            bound.add(getattr(n, "id", None) or n.attr)
        elif isinstance(n, ast.alias) and n.asname:
            bound.add(n.asname)
    return {x for x in bound - consts if PRIVATE.match(x)}


def _short(i):
    s = ""
    while True:
        s = _LETTERS[i % len(_LETTERS)] + s
        i = i // len(_LETTERS) - 1
        if i < 0:
            return "_" + s


@functools.lru_cache(maxsize=1)
def table():
    """{private name: short name} for the whole library: the names in the most modules (each .mpy holds a name
    once), then the most used, get the shortest; no short name is a name any module already has."""
    bound, files, uses = set(), Counter(), Counter()
    for text in library_sources().values():
        bound |= _bindings(ast.parse(text))
        names = [t.string for t in tokenize.generate_tokens(io.StringIO(text).readline) if t.type == tokenize.NAME]
        files.update(set(names))
        uses.update(names)
    out, i, taken = {}, 0, set(uses)
    for name in sorted(bound, key=lambda n: (-files[n], -uses[n], n)):
        while _short(i) in taken:
            i += 1
        if len(_short(i)) < len(name):
            out[name] = _short(i)
            i += 1
    return out


def rename(text, names=None):
    """text with each private name of names (default table()) replaced, in code and in strings that are exactly
    one; NameClash when a short name is already one of text's own names."""
    names = table() if names is None else names
    toks = list(tokenize.generate_tokens(io.StringIO(text).readline))
    mine = {t.string for t in toks if t.type == tokenize.NAME} - set(names)
    clash = mine & set(names.values())
    if clash:
        raise NameClash("short name(s) %s already in the text" % ", ".join(sorted(clash)))
    lines = text.splitlines(True)
    for t in reversed(toks):  # (from the end: a replacement never moves a token still to come)
        new = None
        if t.type == tokenize.NAME and t.string in names:
            new = names[t.string]
        elif t.type == tokenize.STRING and t.string[:1] in "'\"" and t.string[1:-1] in names \
                and t.string[0] == t.string[-1] and len(t.string) > 2:
            new = t.string[0] + names[t.string[1:-1]] + t.string[0]
        if new is not None:  # (a name or string token is on one line)
            line = lines[t.start[0] - 1]
            lines[t.start[0] - 1] = line[:t.start[1]] + new + line[t.end[1]:]
    return "".join(lines)


if __name__ == "__main__":
    for old, new in sorted(table().items(), key=lambda kv: (len(kv[1]), kv[1])):
        print("%-6s %s" % (new, old))
