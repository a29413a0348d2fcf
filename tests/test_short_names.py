# tools/deploy/short_names.py: the library's private names, short on boards with short_errors. The table must be
# one-to-one, rename only names the library binds, keep them private, and never meet a name the library already
# has; the renamed modules must still be Python with the same public names. That the renamed library works is
# shown on real MicroPython: tests/test_unix_aio.py and test_unix_blocking.py run their flows (QoS 0/1/2 both
# ways, topic aliases, reconnect with resend, will) on layer "esp32-mpy", the library as deploy builds it.
import ast
import os

import pytest

import tools.deploy as deploy
from tools import boards
from tools.deploy import library_text
from tools.deploy.short_names import PRIVATE, NameClash, library_sources, rename, table

REPO = boards.REPO


def public(text):
    tree = ast.parse(text)
    return sorted(n for s in tree.body for n in (
        [s.name] if isinstance(s, (ast.FunctionDef, ast.ClassDef)) else
        [t.id for t in getattr(s, "targets", []) if isinstance(t, ast.Name)]) if not n.startswith("_"))


def test_the_table_is_one_to_one_private_and_new():
    t = table()
    assert len(t) > 40 and len(set(t.values())) == len(t)
    taken = set()
    for text in library_sources().values():
        taken |= {n.id for n in ast.walk(ast.parse(text)) if isinstance(n, ast.Name)}
    for old, new in t.items():
        assert PRIVATE.match(old) and PRIVATE.match(new) and len(new) < len(old)
        assert new not in taken, "a short name is one the library already uses"
    assert "_on_connack" in t and "_CONNECT" not in t  # (a const() name costs nothing: it keeps its place)
    assert "_io_queue" not in t  # (never bound by the library: another module's name stays as it is)


def test_renamed_modules_keep_their_public_names_and_strings_follow():
    for name, text in library_sources().items():
        new = rename(text)
        assert public(new) == public(text), name
        names = {x.id for x in ast.walk(ast.parse(new)) if isinstance(x, ast.Name)}  # (parsed once, not per name)
        assert not [n for n in table() if n in names]
    acks = rename(library_sources()["app_acks.py"])
    assert '"_era"' not in acks and '"%s"' % table()["_era"] in acks  # getattr(msg, "_era", e) follows p._era
    assert "_base" not in table() and '{"_base": base}' in acks and "self._base" in acks  # (bound by type() only)


def test_a_text_that_has_a_short_name_already_is_refused():
    with pytest.raises(NameClash):
        rename("x = 1\n_a = 2\n", {"_long_name": "_a"})
    assert rename("self._long_name = '_long_name'  # _long_name\n", {"_long_name": "_a"}) == \
        "self._a = '_a'  # _long_name\n"


def test_boards_with_short_errors_get_short_names_and_others_keep_theirs(tmp_path, library_built_once):
    path = os.path.join(REPO, "lib", "tinymqtt", "session.py")
    esp = library_text(boards.get("esp32"), path, "tinymqtt/session.py")
    linux = library_text(boards.get("linux"), path, "tinymqtt/session.py")
    assert "_on_connack" in linux and "_on_connack" not in esp
    # (the esp32 mqtt311 library as deploy builds it: once a session, tests/conftest.py)
    built = {d: data for d, data, _ in deploy.library_files(boards.get("esp32", profile="mqtt311"), str(tmp_path))}
    assert b"_on_connack" not in built["lib/tinymqtt/__init__.mpy"]
