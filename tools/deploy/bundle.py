# Bundling (boards.toml `bundle`): the modules every client of a profile loads, as ONE module, the package's
# tinymqtt/__init__, so a board loads one .mpy (one table of names, one module object) instead of eight. A build
# step like freezing: the sources stay the same files; deploy joins its own (per-module transformed) copies.
#   bundle([(name, text), ...], init_text) -> the text of tinymqtt/__init__.py
#   BundleError when two modules would give one module-level name two different meanings.
import ast

PACKAGE = "tinymqtt"


class BundleError(ValueError):
    """Why these modules cannot share one namespace, naming the modules and the name."""


def _bound(node):
    """Names a module-level statement binds (never inside a function, class body, lambda or comprehension)."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return [a.asname or a.name.split(".")[0] for a in node.names]
    if isinstance(node, ast.Name):
        return [node.id] if isinstance(node.ctx, ast.Store) else []
    if isinstance(node, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
        return []
    out = [node.name] if isinstance(node, ast.ExceptHandler) and node.name else []
    return out + [n for c in ast.iter_child_nodes(node) for n in _bound(c)]


def _origin(stmt, module, name):
    """What a module-level name is bound to, as a comparable key: where its import takes it from, or its module."""
    for a in getattr(stmt, "names", ()) if isinstance(stmt, (ast.Import, ast.ImportFrom)) else ():
        if (a.asname or a.name.split(".")[0]) == name:
            return ("import", "." * getattr(stmt, "level", 0) + (getattr(stmt, "module", "") or ""), a.name)
    return ("def", module, name)


def _bundled(stmt, names):
    """The bundled module a module-level `from tinymqtt.M import ...` names, else None; refuses the forms that
    would bind the package in a bundled module's namespace (import tinymqtt.M, from tinymqtt import M)."""
    mods = [a.name for a in stmt.names] if isinstance(stmt, ast.Import) else []
    if isinstance(stmt, ast.ImportFrom) and stmt.level == 0 and stmt.module == PACKAGE:
        mods = [PACKAGE + "." + a.name for a in stmt.names]
    if any(m.startswith(PACKAGE + ".") and m[len(PACKAGE) + 1:] in names for m in mods):
        raise BundleError("`import tinymqtt.M` or `from tinymqtt import M` of a bundled module at module level: "
                          "write `from tinymqtt.M import NAME`")
    if isinstance(stmt, ast.ImportFrom) and stmt.level == 0 and (stmt.module or "").startswith(PACKAGE + "."):
        return stmt.module[len(PACKAGE) + 1:] if stmt.module[len(PACKAGE) + 1:] in names else None
    return None


def order(modules):
    """The modules (name, text) in dependency order: each after the bundled modules it imports at module level."""
    names = [n for n, _ in modules]
    deps = {n: [m for s in ast.parse(t).body for m in [_bundled(s, names)] if m] for n, t in modules}
    out, busy = [], []

    def visit(n):
        if n in busy:
            raise BundleError("bundled modules import each other at module level: %s" % " -> ".join(busy + [n]))
        if n not in out:
            busy.append(n)
            for d in deps[n]:
                visit(d)
            out.append(busy.pop())
    for n in names:
        visit(n)
    return [(n, dict(modules)[n]) for n in out]


def bundle(modules, init_text):
    """tinymqtt/__init__'s text: init_text (its __version__); sys.modules["tinymqtt.M"] and the package attribute
    M for every bundled M (MicroPython's import finds the first but does not set the second); then each module's
    text in dependency order without its imports of other bundled modules (`from tinymqtt.M import X as Y` becomes
    `Y = X`), each `NAME = const(N)`, identical try/if block and `import sys` (the bundle's own) once. A module's
    __getattr__ becomes _ga0, _ga1...: the package's own asks each, then imports the submodule (loaded on use)."""
    modules = order(modules)
    names = [n for n, _ in modules]
    where = {n: ("__init__", ("package",)) for n in names} | {"sys": ("__init__", ("import", "", "sys"))}
    for stmt in ast.parse(init_text).body:
        for n in _bound(stmt):
            where[n] = ("__init__", _origin(stmt, "__init__", n))
    seen, getattrs = set(), []  # (const assignments and try/if blocks already in, as ast dumps)
    code = "".join(l for l in init_text.splitlines(True) if not l.startswith("#"))
    parts = ["# Written by tools/deploy: lib/tinymqtt/__init__.py and, in one namespace, %s (edit those).\n%s\n"
             "import sys\nfor _m in %r:  # `from tinymqtt.M import X`, `import tinymqtt.M as m` find the bundle\n"
             "    sys.modules[%r + _m] = globals()[_m] = sys.modules[__name__]\ndel _m\n"
             % (", ".join(names), code.strip("\n"), tuple(names), PACKAGE + ".")]
    for mod, text in modules:
        lines, tree = text.splitlines(True), ast.parse(text)
        for stmt in tree.body:
            first, span = stmt.lineno - 1, range(stmt.lineno - 1, stmt.end_lineno)
            drop, extra, binds = False, [], [(n, _origin(stmt, mod, n)) for n in _bound(stmt)]
            if (src := _bundled(stmt, names)) is not None:
                drop, binds = True, []
                for a in stmt.names:
                    if where.get(a.name, ("",))[0] not in names[:names.index(mod)]:
                        raise BundleError("%s imports %s from %s, which does not define it before %s" % (
                            mod, a.name, src, mod))
                    if a.asname and a.asname != a.name:
                        binds.append((a.asname, where[a.name][1]))
                        extra.append("%s = %s\n" % (a.asname, a.name))
            elif isinstance(stmt, ast.FunctionDef) and stmt.name == "__getattr__":
                getattrs.append("_ga%d" % len(getattrs))
                lines[first] = lines[first].replace("def __getattr__(", "def %s(" % getattrs[-1], 1)
                binds = [(getattrs[-1], ("def", mod, getattrs[-1]))]
            elif isinstance(stmt, (ast.Try, ast.If)) or getattr(getattr(stmt, "value", None), "func", None) and \
                    getattr(stmt.value.func, "id", "") == "const":
                key = ast.dump(stmt)
                drop = key in seen
                binds = [] if drop else [(n, ("same", key) if not isinstance(stmt, ast.Assign) else o)
                                         for n, o in binds]
                seen.add(key)
            for n, key in binds:
                if n in where and where[n][0] != mod and where[n][1] != key:
                    raise BundleError("%s and %s both define %s%s: rename one (bundle in boards.toml puts them in "
                                      "one namespace)" % (where[n][0], mod, n, ", with different values"
                                                          if key[0] == "def" and "const" in ast.dump(stmt) else ""))
                where.setdefault(n, (mod, key))
            if drop:
                for i in span:
                    lines[i] = "\n" if lines[i].strip() else lines[i]
                lines[first] = "".join(extra) or lines[first]
        _inner_imports(tree, names, lines)
        parts.append("# ---- tinymqtt/%s.py\n" % mod + "".join(lines).strip("\n") + "\n")
    asks = "".join("    try:\n        return %s(name)\n    except AttributeError:\n        pass\n" % g
                   for g in getattrs)
    parts.append('\ndef __getattr__(name):\n%s    __import__("tinymqtt." + name)\n    return sys.modules["tinymqtt." + '
                 'name]\n' % asks)
    return "\n".join(parts)


def _inner_imports(tree, names, lines):
    """A function's one-line `from tinymqtt.M import X` of a bundled M (the 3.x retry timer's) becomes `pass`, or
    `Y = X` for `X as Y`: X is a global of the bundle, the import would cost a lookup at every call."""
    for fun in ast.walk(tree):
        for stmt in ast.walk(fun) if isinstance(fun, (ast.FunctionDef, ast.AsyncFunctionDef)) else ():
            if (isinstance(stmt, ast.ImportFrom) and stmt.level == 0 and stmt.lineno == stmt.end_lineno
                    and (stmt.module or "").startswith(PACKAGE + ".") and stmt.module[len(PACKAGE) + 1:] in names):
                line = lines[stmt.lineno - 1]
                lines[stmt.lineno - 1] = line[:len(line) - len(line.lstrip())] + "; ".join(
                    ["pass"] + ["%s = %s" % (a.asname, a.name) for a in stmt.names if a.asname]) + "\n"
