# Short private names for boards (boards.toml `short_errors`): before mpy-cross, every private name the library
# defines (one leading underscore: a helper, a method, an attribute, a module constant) becomes a short one (_a,
# _b, ... _aa) the same in every library module, so a name one module defines and another uses still meets. A
# .mpy holds each name's text once per file, and the board interns it in its heap: `_on_connack` costs 13 bytes
# twice, `_a` 4. The leading underscore stays (MicroPython drops a private `_X = const(...)` from the globals as
# before, and an application's own attributes cannot meet one). Tracebacks on the board name `_a`:
# `python -m tools.deploy.short_names` prints the table. The source never changes: a build step, like -O3.
#
# A private name the library binds only as an attribute (`self._last_sent = ...`: never a def, a class, a global, a
# parameter) gets no new text at all where one is free: one of STATIC, names every MicroPython firmware already has
# (the .mpy format's static qstr list, so the .mpy names it by number and the board interns nothing), chosen for being
# str methods and builtins nobody sets on an object of theirs. An attribute is no module name, so `from tinymqtt
# import *` gets none, and tracebacks never show one (functions keep the `_x` form). What an application looks at
# in the REPL keeps the `_x` form, where `c.isdigit` would read as a bug: the attributes that SEEN's modules set
# (on its client; app_acks.py's on its messages). The session's and the in-flight window's are further from its eyes.
#
# Only names the library itself binds are renamed (def, class, a parameter, an assignment to a name or an
# attribute, import as), in code and in strings that are exactly such a name (getattr(p, "_era")); a private
# name the library only reads (another module's, or one only a type()'s dict binds) stays, in code and strings.
import ast
import functools
import glob
import io
import os
import re
import tokenize

LIB = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "lib", "tinymqtt")
PRIVATE = re.compile(r"_[A-Za-z][A-Za-z0-9_]*\Z")  # (not "_", not a dunder or a mangled __name)
_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
SEEN = ("driver.py", "client.py", "aio.py", "app_acks.py")  # (their attributes keep the _x form: see above)
# (in this order; a name a library module already has is skipped: tests/test_short_names.py checks each is static)
STATIC = ("isalpha", "isdigit", "islower", "isspace", "isupper", "lstrip", "rstrip", "rsplit", "rfind", "rindex",
          "popitem", "divmod", "from_bytes", "to_bytes", "little", "callable", "classmethod", "staticmethod",
          "locals", "eval", "exec", "chr", "ord", "pow", "zip", "abs")


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
    """(private names this module binds, but for `_X = const(...)`'s, which MicroPython drops: they cost nothing;
    every name it binds other than as an attribute: a def, a class, a parameter, a name, import as)."""
    attrs, other, consts = set(), set(), set()
    for n in ast.walk(tree):
        if (isinstance(n, ast.Assign) and isinstance(n.value, ast.Call) and isinstance(n.value.func, ast.Name)
                and n.value.func.id == "const"):
            consts.update(t.id for t in n.targets if isinstance(t, ast.Name))
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            other.add(n.name)
        elif isinstance(n, ast.arg):
            other.add(n.arg)
        elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            other.add(n.id)
        elif isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store):
            attrs.add(n.attr)
        elif isinstance(n, ast.alias) and n.asname:
            other.add(n.asname)
    return {x for x in (attrs | other) - consts if PRIVATE.match(x)}, other


def _names(text):
    """Every NAME token of text."""
    return [t.string for t in tokenize.generate_tokens(io.StringIO(text).readline) if t.type == tokenize.NAME]


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
    once), then the most used, get the shortest (an attribute-only one: a STATIC name while one is free); no short
    name is a name any module already has."""
    sources = library_sources()
    bound, files, uses, taken, other = set(), {}, {}, set(), set()
    for name, text in sources.items():
        mine, others = _bindings(ast.parse(text))
        bound |= mine
        other |= mine if name in SEEN else others
        names = _names(text)
        taken.update(names)
        for n in set(names):
            files[n] = files.get(n, 0) + 1
        for n in names:
            uses[n] = uses.get(n, 0) + 1
    out, i = {}, 0
    static = [n for n in STATIC if n not in taken]
    for name in sorted(bound, key=lambda n: (-files.get(n, 0), -uses.get(n, 0), n)):
        if name not in other and static:
            out[name] = static.pop(0)
            continue
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
        if new is not None:
            (row, col), (row2, col2) = t.start, t.end
            line = lines[row - 1]
            lines[row - 1] = line[:col] + new + line[col2:]
    return "".join(lines)


if __name__ == "__main__":
    for old, new in sorted(table().items(), key=lambda kv: (len(kv[1]), kv[1])):
        print("%-6s %s" % (new, old))
