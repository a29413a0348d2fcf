# Bundling (boards.toml `bundle`): the eager core of a profile as ONE module, the package's tinymqtt/__init__,
# so a board loads one .mpy (one qstr table, one module object) instead of seven or eight; and (`lazy_bundle`)
# modules only some applications load (MQTT 5's) as one more, loaded on first use of any of them. A build step
# like freezing: the sources stay the same files, deploy concatenates its own (per-module transformed) copies.
#   bundle([(name, text), ...], init_text, lazy=[names]) -> the text of tinymqtt/__init__.py
#   lazy_bundle([(name, text), ...], outer=[bundle's names]) -> the text of the first module's file
#   BundleError when two modules would give one module-level name two different meanings.
import ast

PACKAGE = "tinymqtt"


class BundleError(ValueError):
    """Why these modules cannot share one namespace, naming the modules and the name."""


def _bound(stmt):
    """Names a module-level statement binds (into if/try blocks; never into function or class bodies)."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [stmt.name]
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return [a.asname or a.name.split(".")[0] for a in stmt.names]
    if isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.For, ast.With)):
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [getattr(stmt, "target", None)] + [
            i.optional_vars for i in getattr(stmt, "items", [])]
        out = [n.id for t in targets if t is not None for n in ast.walk(t) if isinstance(n, ast.Name)]
        if isinstance(stmt, (ast.For, ast.With)):
            out += [n for s in stmt.body + getattr(stmt, "orelse", []) for n in _bound(s)]
        return out
    if isinstance(stmt, (ast.If, ast.While, ast.Try)):
        blocks = [stmt.body, stmt.orelse, getattr(stmt, "finalbody", [])]
        blocks += [h.body for h in getattr(stmt, "handlers", [])]
        out = [h.name for h in getattr(stmt, "handlers", []) if h.name]
        return out + [n for b in blocks for s in b for n in _bound(s)]
    return []


def _const(stmt):
    """(name, ast dump of the value) for `NAME = const(...)`, else None."""
    if (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)
            and isinstance(stmt.value, ast.Call) and isinstance(stmt.value.func, ast.Name)
            and stmt.value.func.id == "const"):
        return stmt.targets[0].id, ast.dump(stmt.value)
    return None


def _bundled_import(stmt, names):
    """The bundled module a module-level `from tinymqtt.M import ...` names, else None; refuses the import forms
    that would bind the package in a bundled module's namespace (import tinymqtt.M, from tinymqtt import M)."""
    if isinstance(stmt, ast.ImportFrom) and stmt.level == 0 and stmt.module:
        if stmt.module.startswith(PACKAGE + ".") and stmt.module[len(PACKAGE) + 1:] in names:
            return stmt.module[len(PACKAGE) + 1:]
        if stmt.module == PACKAGE and any(a.name in names for a in stmt.names):
            raise BundleError("`from tinymqtt import M` of a bundled module at module level: write "
                              "`from tinymqtt.M import NAME`")
    if isinstance(stmt, ast.Import) and any(a.name.startswith(PACKAGE + ".") and a.name[len(PACKAGE) + 1:] in names
                                            for a in stmt.names):
        raise BundleError("`import tinymqtt.M` of a bundled module at module level: write `from tinymqtt.M import NAME`")
    return None


def order(modules):
    """The modules (name, text) in dependency order: each after the bundled modules it imports at module level
    (otherwise in the order given)."""
    names = [n for n, _ in modules]
    deps = {}
    for name, text in modules:
        deps[name] = [m for s in ast.parse(text).body for m in [_bundled_import(s, names)] if m]
    out, busy = [], []

    def visit(n):
        if n in out:
            return
        if n in busy:
            raise BundleError("bundled modules import each other at module level: %s" % " -> ".join(busy + [n]))
        busy.append(n)
        for d in deps[n]:
            visit(d)
        busy.pop()
        out.append(n)
    for n in names:
        visit(n)
    text = dict(modules)
    return [(n, text[n]) for n in out]


def _imports_only(stmt):
    """A compound statement that only imports, or binds names to names or constants: one that two modules may
    both hold (the same objects either way)."""
    if not isinstance(stmt, (ast.Try, ast.If)):
        return False
    for s in ast.walk(stmt):
        if isinstance(s, ast.stmt) and not isinstance(s, (ast.Try, ast.If, ast.Import, ast.ImportFrom, ast.Pass,
                                                          ast.Assign)):
            return False
        if isinstance(s, ast.Assign) and not isinstance(s.value, (ast.Name, ast.Constant)):
            return False
    return True


def _origin(stmt, module, name):
    """What object a module-level name is bound to, as a comparable key: the module and name that define it, or
    for an import from outside the bundle, where it comes from."""
    if isinstance(stmt, ast.ImportFrom):
        for a in stmt.names:
            if (a.asname or a.name) == name:
                return ("import", "." * stmt.level + (stmt.module or ""), a.name)
    if isinstance(stmt, ast.Import):
        for a in stmt.names:
            if (a.asname or a.name.split(".")[0]) == name:
                return ("import", a.name if a.asname else a.name.split(".")[0])
    return ("def", module, name)


def bundle(modules, init_text, lazy=()):
    """tinymqtt/__init__'s text: init_text (its __version__), then sys.modules["tinymqtt.M"] and the package
    attribute M for every bundled M (MicroPython's import finds the first but does not set the second), then
    each module's text in dependency order without its imports of other bundled modules (an `as` import becomes
    an assignment), each `NAME = const(N)` once. BundleError when two modules bind one name to different
    objects (a definition, a different const, or an import of something else). lazy: the modules of the lazy
    bundle (lazy_bundle()), the one whose file it is first: the package's __getattr__ loads that file for each."""
    modules = order(modules)
    names = [n for n, _ in modules]
    # name -> the module that defines it, and its origin key: first what _aliases binds (the package's names, sys)
    where = dict.fromkeys(names + ["sys"], "__init__")
    origins = dict({n: ("package",) for n in names}, sys=("import", "sys"))
    for stmt in ast.parse(init_text).body:
        for n in _bound(stmt):
            where[n], origins[n] = "__init__", _origin(stmt, "__init__", n)
    code = "".join(l for l in init_text.splitlines(True) if not l.startswith("#"))  # (its words: "loads nothing")
    parts = ["# Written by tools/deploy: lib/tinymqtt/__init__.py and, in one namespace, %s (edit those).\n"
             % ", ".join(names) + code.strip("\n") + "\n", _aliases(names)]
    texts, getattrs, _ = _join(modules, where, origins, (), True)
    parts += texts
    if getattrs or lazy:
        route = '"tinymqtt." + name'
        if len(lazy) > 1:  # (comparisons: a tuple to look the name up in would cost the package's code a constant)
            route = '"tinymqtt." + (%r if %s else name)' % (lazy[0], " or ".join("name == %r" % m for m in lazy[1:]))
        parts.append(_GETATTR % ("".join(_TRY % g for g in getattrs), route))
    return "\n".join(parts)


def lazy_bundle(modules, outer):
    """The text of a lazy bundle (boards.toml lazy_bundle): the modules (name, text) in one namespace as bundle()
    joins them, written as the first one's file, which names itself sys.modules["tinymqtt.M"] for each M when it
    loads: on first use of any (`from tinymqtt import M`: the package's __getattr__, bundle(lazy=...), which then
    answers from sys.modules; `import tinymqtt.M` of the first). outer: the modules of the package's bundle; the
    members' module-level imports from them become one `from tinymqtt import ...` (the package is their one
    namespace). A module's __getattr__ stays the module's (renamed and asked in turn when more than one has one)."""
    first = modules[0][0]
    modules = order(modules)
    names = [n for n, _ in modules]
    many = sum(isinstance(s, ast.FunctionDef) and s.name == "__getattr__"
               for _, t in modules for s in ast.parse(t).body) > 1
    where, origins = {"sys": "the lazy bundle's header"}, {"sys": ("import", "sys")}  # (what the header binds)
    texts, getattrs, hoisted = _join(modules, where, origins, outer, many)
    head = "# Written by tools/deploy: in one namespace, %s (edit those); loaded on first use of any.\nimport sys\n" % (
        ", ".join(names))
    if hoisted:
        lines = [""]
        for n, b in hoisted:
            item = n if n == b else "%s as %s" % (n, b)
            if len(lines[-1]) + len(item) > 96:
                lines.append("")
            lines[-1] += item + ", "
        head += "from %s import (%s)\n" % (PACKAGE, "\n    ".join(l.rstrip() for l in lines)[:-1])
    others = ["sys.modules[%r]" % (PACKAGE + "." + n) for n in names if n != first]
    parts = [head + " = ".join(others + ["sys.modules[__name__]"]) + "  # (and %s.%s: this file)\n" % (
        PACKAGE, first)] + texts
    if getattrs:
        parts.append(_LAZY_GETATTR % "".join(_TRY % g for g in getattrs))
    return "\n".join(parts)


def _join(modules, where, origins, outer, rename):
    """([each module's text as bundled], [its renamed __getattr__s], [(name, asname) the modules import from
    outer's]) for modules in dependency order: bundle()'s join. where, origins: the names bound before them (by the
    header); outer: lazy_bundle()'s (their imports from these modules are dropped: the caller imports the names);
    rename: each module's __getattr__ becomes _ga0, _ga1... in module order (the caller's __getattr__ asks them)."""
    names = [n for n, _ in modules]
    consts, getattrs, parts, hoisted = {}, [], [], []  # const name -> (module, value dump)
    for mod, text in modules:
        lines = text.splitlines(True)
        tree = ast.parse(text)
        keep = [True] * len(lines)
        extra = {}  # line index -> assignment that replaces a dropped `from ... import X as Y`
        _inner_imports(tree, names, lines)
        for stmt in tree.body:
            span = range(stmt.lineno - 1, stmt.end_lineno)
            src = _bundled_import(stmt, names)
            if src is not None:
                for a in stmt.names:
                    key = origins.get(a.name) if where.get(a.name) in names else None
                    if key is None or where[a.name] not in names[:names.index(mod)]:
                        raise BundleError("%s imports %s from %s, which does not define it before %s" % (
                            mod, a.name, src, mod))
                    if a.asname and a.asname != a.name:
                        _bind(a.asname, mod, key, where, origins)
                        extra.setdefault(stmt.lineno - 1, []).append("%s = %s\n" % (a.asname, a.name))
                for i in span:
                    keep[i] = False
                continue
            if _bundled_import(stmt, outer) is not None:
                for a in stmt.names:
                    _bind(a.asname or a.name, mod, ("import", PACKAGE, a.name), where, origins)
                    if (a.name, a.asname or a.name) not in hoisted:
                        hoisted.append((a.name, a.asname or a.name))
                for i in span:
                    keep[i] = False
                continue
            if rename and isinstance(stmt, ast.FunctionDef) and stmt.name == "__getattr__":
                # a module's __getattr__ would answer for the package: renamed, and called by the package's own
                renamed = "_ga%d" % len(getattrs)  # (short: its name's text is in the .mpy and the heap)
                i = stmt.lineno - 1
                lines[i] = lines[i].replace("def __getattr__(", "def %s(" % renamed, 1)
                getattrs.append(renamed)
                _bind(renamed, mod, ("def", mod, renamed), where, origins)
                continue
            c = _const(stmt)
            if c is not None and c[0] in consts:
                if consts[c[0]][1] != c[1]:
                    raise BundleError("%s and %s both define %s, with different values: rename one (bundle "
                                      "in boards.toml puts them in one namespace)" % (consts[c[0]][0], mod, c[0]))
                for i in span:
                    keep[i] = False
                continue
            if c is not None:
                consts[c[0]] = (mod, c[1])
            if _imports_only(stmt):  # (try: from micropython import const / except: const = int): one is enough
                key = ("same", ast.dump(stmt))
                if all(origins.get(n) == key for n in _bound(stmt)):
                    for i in span:
                        keep[i] = False
                    continue
                for n in _bound(stmt):
                    _bind(n, mod, key, where, origins)
                continue
            for n in _bound(stmt):
                _bind(n, mod, _origin(stmt, mod, n), where, origins)
        body = []
        for i, line in enumerate(lines):
            if i in extra:
                body += extra[i]
            body.append(line if keep[i] else "\n" if line.strip() else line)
        parts.append("# ---- tinymqtt/%s.py\n" % mod + "".join(body).strip("\n") + "\n")
    return parts, getattrs, hoisted


# The package's __getattr__ when a bundled module has one (packets: its names made on use), or a lazy bundle
# exists: that module's answer, else the submodule of that name (a lazy bundle's member: the lazy bundle's file).
# MicroPython's `from tinymqtt import props` asks a package's __getattr__ before it imports the submodule, and
# whatever that raises ends the import: so a name that is neither raises ImportError (what `from tinymqtt import M`
# must raise when M is not on the board), not AttributeError (hasattr(tinymqtt, "nothing") raises it too: nothing
# in the library asks).
_GETATTR = """
def __getattr__(name):
%s    __import__(%s)
    return sys.modules["tinymqtt." + name]
"""
_TRY = """    try:
        return %s(name)
    except AttributeError:
        pass
"""
_LAZY_GETATTR = """
def __getattr__(name):
%s    raise AttributeError(name)
"""


def _inner_imports(tree, names, lines):
    """A function's one-line `from tinymqtt.M import X` of a bundled M (an import only some calls need, such as the
    3.x retry timer's) becomes `pass`, or `Y = X` for `X as Y`: X is a global of the bundle already, and the
    import would cost the file the module's name and a lookup at every call."""
    for fun in ast.walk(tree):
        if not isinstance(fun, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for stmt in ast.walk(fun):
            if (isinstance(stmt, ast.ImportFrom) and stmt.level == 0 and stmt.lineno == stmt.end_lineno
                    and (stmt.module or "").startswith(PACKAGE + ".") and stmt.module[len(PACKAGE) + 1:] in names):
                line = lines[stmt.lineno - 1]
                indent = line[:len(line) - len(line.lstrip())]
                lines[stmt.lineno - 1] = indent + "; ".join(
                    ["pass"] + ["%s = %s" % (a.asname, a.name) for a in stmt.names if a.asname]) + "\n"


def _bind(name, mod, key, where, origins):
    if name in where and where[name] != mod and origins[name] != key:
        raise BundleError("%s and %s both define %s at module level: rename one (bundle in boards.toml puts them "
                          "in one namespace)" % (where[name], mod, name))
    if name not in where or where[name] == mod:
        where[name], origins[name] = mod, key


def _aliases(names):
    return ("import sys\n"
            "for _m in %r:  # `from tinymqtt.M import X`, `import tinymqtt.M as m`, `tinymqtt.M.X` find the bundle\n"
            "    sys.modules[%r + _m] = globals()[_m] = sys.modules[__name__]\n"
            "del _m\n" % (tuple(names), PACKAGE + "."))
