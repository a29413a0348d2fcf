# lib/ is what a board runs, read statically (ast): no module imports itself back through others (an import cycle
# makes what a name holds depend on which module was imported first), counting the imports inside functions
# (packets.v5() importing props, say), and no module assigns into another module's namespace or into a class it
# imported (a module that rewrites another at import makes behaviour depend on import order).
import ast
import os
import re

import pytest

LIB = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib")


def lib_modules(root=LIB):
    """{dotted name: path} of every .py under root (a package's __init__.py under the package's name)."""
    out = {}
    for d, _, files in os.walk(root):
        for f in files:
            if f.endswith(".py"):
                rel = os.path.relpath(os.path.join(d, f), root)[:-3].split(os.sep)
                out[".".join(rel[:-1] if rel[-1] == "__init__" else rel)] = os.path.join(d, f)
    return out


def imported(tree, name, modules):
    """The modules of `modules` that the module `name` imports anywhere in tree (its functions too), each with the
    line of its first import: `import a.b`, `from a import b` (b a module, or a name of a), relative imports."""
    out = {}
    package = name if modules.get(name, "").endswith("__init__.py") else name.rpartition(".")[0]
    for n in ast.walk(tree):
        targets = []
        if isinstance(n, ast.Import):
            targets = [a.name for a in n.names]
        elif isinstance(n, ast.ImportFrom):
            base = n.module or ""
            if n.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - n.level + 1] + ([base] if base else []))
            targets = [base + "." + a.name if base + "." + a.name in modules else base for a in n.names]
        for t in targets:
            while t and t not in modules:  # `import a.b.c` of a name inside a.b: the module a.b
                t = t.rpartition(".")[0]
            if t and t != name:
                out.setdefault(t, n.lineno)
    return out


def graph(root=LIB):
    modules = lib_modules(root)
    g = {}
    for name, path in modules.items():
        with open(path, encoding="utf-8") as f:
            g[name] = imported(ast.parse(f.read(), path), name, modules)
    return g


def cycles(g):
    """Every import cycle of g, each as [a, b, ..., a], found by a depth-first walk (one per back edge)."""
    found, state, stack = [], {}, []

    def visit(m):
        state[m] = 1  # on the stack
        stack.append(m)
        for n in sorted(g[m]):
            if state.get(n) == 1:
                found.append(stack[stack.index(n):] + [n])
            elif n not in state:
                visit(n)
        stack.pop()
        state[m] = 2  # done

    for m in sorted(g):
        if m not in state:
            visit(m)
    return found


def patches(tree):
    """[(line, what)] of every assignment (or deletion, or setattr/delattr) into a name this module imported: an
    attribute of an imported module or class (`packets.encode = ...`, `Packet.__eq__ = ...`), or sys.modules."""
    names = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Import):
            names.update(a.asname or a.name.split(".")[0] for a in n.names)
        elif isinstance(n, ast.ImportFrom):
            names.update(a.asname or a.name for a in n.names)

    def into(t):  # the imported name that target t writes into, or None
        while isinstance(t, (ast.Attribute, ast.Subscript)):
            if isinstance(t.value, ast.Name):
                return t.value.id if t.value.id in names else None
            t = t.value
        return None

    out = []
    for n in ast.walk(tree):
        targets = []
        if isinstance(n, ast.Assign):
            targets = n.targets
        elif isinstance(n, (ast.AugAssign, ast.AnnAssign)):
            targets = [n.target]
        elif isinstance(n, ast.Delete):
            targets = n.targets
        elif (isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in ("setattr", "delattr")
              and n.args and isinstance(n.args[0], ast.Name) and n.args[0].id in names):
            out.append((n.lineno, "%s(%s, ...)" % (n.func.id, n.args[0].id)))
        flat = []
        while targets:
            t = targets.pop()
            if isinstance(t, (ast.Tuple, ast.List)):
                targets.extend(t.elts)
            else:
                flat.append(t)
        for t in flat:
            if isinstance(t, (ast.Attribute, ast.Subscript)) and into(t):
                out.append((n.lineno, ast.unparse(t)))
    return out


def test_lib_has_no_import_cycle():
    g = graph()
    assert "tinymqtt.packets" in g and "tinymqtt.props" in g["tinymqtt.packets"]  # (the lazy import in v5() counts)
    found = cycles(g)
    assert not found, "import cycles in lib/: " + "; ".join(" -> ".join(c) for c in found)


@pytest.mark.parametrize("name", sorted(lib_modules()))
def test_no_lib_module_writes_into_another(name):
    path = lib_modules()[name]
    with open(path, encoding="utf-8") as f:
        found = patches(ast.parse(f.read(), path))
    assert not found, "%s writes into what it imported: %s" % (name, ", ".join("line %d: %s" % w for w in found))


def test_the_checks_find_what_they_look_for():
    # The walker on small made-up modules: a cycle through an import inside a function, and the patches the old
    # cli_codec.install() made (a tuple assignment into a module, a dunder into an imported class).
    modules = {"p.a": "a.py", "p.b": "b.py", "p.c": "c.py"}
    g = {"p.a": imported(ast.parse("from p.b import x\n"), "p.a", modules),
         "p.b": imported(ast.parse("def f():\n    from p import c as C\n"), "p.b", modules),
         "p.c": imported(ast.parse("import p.a\n"), "p.c", modules)}
    assert cycles(g) == [["p.a", "p.b", "p.c", "p.a"]]
    src = ("from p import a as K\nfrom p.a import Packet\nimport sys\n"
           "def install():\n    K.encode, K.decode = 1, 2\n    Packet.__eq__ = 3\n    setattr(K, 'x', 4)\n"
           "    sys.modules['p.a'] = 5\n    local = Packet(1)\n    self_x = 6\n")
    assert sorted(w for _, w in patches(ast.parse(src))) == ["K.decode", "K.encode", "Packet.__eq__",
                                                            "setattr(K, ...)", "sys.modules['p.a']"]


def test_lib_has_no_host_only_flag():
    # lib/ is what a board runs: no module keeps code for host tools behind a flag deploy turns off (the _HOST of
    # packets.py and inflight.py, which the server half and the tests once needed), and no file is host-only.
    from tools.deploy import features
    assert "_HOST" not in features.FLAGS
    for name, path in lib_modules().items():
        with open(path, encoding="utf-8") as f:
            assert "_HOST" not in f.read(), name
    assert not [n for n in lib_modules() if re.fullmatch(r"cli|cli_.*|__main__", n.split(".")[-1])]


def test_cpython_stays_cpython_beside_pypis_micropython_stub(tmp_path):
    # PyPI's `micropython` package (an editor stub with a const()) can sit in a CPython venv: the core must still
    # take CPython's growing buffers, not a board's fixed 4 KB ones (it did, when const came from a try-import).
    import subprocess
    import sys
    (tmp_path / "micropython.py").write_text("def const(x):\n    return x\n")
    repo = os.path.dirname(LIB)
    code = ("from tinymqtt.errors import const\nfrom tinymqtt.client import Client\n"
            "c = Client('c', port=1)\nprint(const is int, c.session._in_max)\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), LIB, os.path.join(repo, "ports", "linux")]))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert out.split() == ["True", str(268435455 + 5)]
