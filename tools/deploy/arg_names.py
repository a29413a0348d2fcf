# Which of the library's private functions never meet a keyword argument (boards.toml `short_errors`): a function's
# prelude names each of its parameters, and MicroPython reads those names only to match a keyword argument. For the
# functions listed here tools/deploy/qstr_sort.py lets every parameter name the most used name of the .mpy, so a
# name that only such a parameter had (`room`, `total`, `pl`) leaves the file's table and the board's heap.
#
# Safe because the private names are the library's own (tools/deploy/short_names.py binds them the same in every
# module): a function is left alone when any library module calls its name with a keyword or **, uses it as a
# value (bound to a public name, `flush = Driver._v`, or handed on as a callback: whoever holds it may name its
# parameters), or names it in a string (getattr), and when it has keyword-only parameters.
import ast
import functools

from tools.deploy.short_names import PRIVATE, library_sources, rename


def _keyworded(tree):
    """Names this module may call with keywords: called with one or with **, used as a value (anything read but
    not called at once), or named by a string."""
    out, called = set(), set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Call):
            called.add(id(n.func))
            if n.keywords:
                out.add(_name(n.func))
        elif isinstance(n, ast.Constant) and isinstance(n.value, str):
            out.add(n.value)
    for n in ast.walk(tree):
        if isinstance(n, (ast.Name, ast.Attribute)) and isinstance(n.ctx, ast.Load) and id(n) not in called:
            out.add(_name(n))
    return out


def _name(node):
    return node.id if isinstance(node, ast.Name) else getattr(node, "attr", None)


@functools.lru_cache(maxsize=1)
def _kept():
    kept = set()
    for text in library_sources().values():
        kept |= _keyworded(ast.parse(rename(text)))
    return frozenset(kept)


def positional_only(text):
    """Names of text's private functions (a library module's board copy: short names) whose parameters no caller
    in the library, or in text, names."""
    tree = ast.parse(text)
    kept = _kept() | _keyworded(tree)
    out = set()
    for n in ast.walk(tree):
        if (isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and PRIVATE.match(n.name)
                and not n.args.kwonlyargs and n.name not in kept):
            out.add(n.name)
    return out
