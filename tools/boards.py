# Reads boards.toml (one table per board, [profile.NAME] file sets) and checks every key, so a typo fails here
# with the board and the key named, not later on a device. load() -> {name: Board}; profiles() -> {name: Profile};
# get(board, profile=NAME) -> the Board with that profile's files; python -m tools.boards lists them.
import dataclasses
import difflib
import os
import re
import sys
import tomllib
from dataclasses import dataclass, field

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_PATH = os.path.join(REPO, "boards.toml")
ARCHES = ("x86", "x64", "armv6", "armv6m", "armv7m", "armv7em", "armv7emsp", "armv7emdp", "xtensa", "xtensawin",
          "rv32imc", "rv64imc")


class BoardError(ValueError):
    """boards.toml is wrong; the message names the file, the board and the key."""


@dataclass
class Board:
    name: str
    description: str
    port: str  # the port's folder, e.g. "ports/esp32"
    support: list  # more port modules (repo paths) that go to /lib
    platform: str  # sys.platform on the board
    micropython: tuple  # the version floor, e.g. (1, 27, 0)
    mpy_cross: list  # mpy-cross flags
    lib: list  # library modules, paths under lib/
    heap_budget: int
    max_packet_size: int
    out_size: int
    max_inflight: int
    receive_maximum: int
    topic_alias_maximum: int
    keepalive: int
    wlan: bool
    config: dict = field(default_factory=dict)  # extra config.py values
    profile: str = "full"  # the profile whose files `lib` holds
    bundle: list = field(default_factory=list)  # library modules deploy concatenates into tinymqtt/__init__
    short_errors: bool = False  # library error text becomes what it concerns, a number (tools/deploy/shorten.py)

    @property
    def port_module(self):
        return self.port + "/tinymqtt_port.py"

    @property
    def arch(self):
        for f in self.mpy_cross:
            if f.startswith("-march="):
                return f[7:]
        return None

    def session_options(self):
        """What config.SESSION holds: the Session options sized for this board."""
        return {k: getattr(self, k) for k in SESSION_KEYS}

    def version_text(self):
        return ".".join(map(str, self.micropython))


def _int(lo, hi):
    def check(v):
        if isinstance(v, bool) or not isinstance(v, int):
            return "must be an integer, got %r" % (v,)
        if not lo <= v <= hi:
            return "must be between %d and %d, got %d" % (lo, hi, v)
    return check


def _str(v):
    if not isinstance(v, str) or not v:
        return "must be a non-empty string, got %r" % (v,)


def _bool(v):
    if not isinstance(v, bool):
        return "must be true or false, got %r" % (v,)


def _str_list(v):
    if not isinstance(v, list) or not all(isinstance(x, str) and x for x in v):
        return "must be a list of strings, got %r" % (v,)


def _version(v):
    if not isinstance(v, str) or not re.fullmatch(r"\d+\.\d+(\.\d+)?", v):
        return "must be a version like \"1.27.0\", got %r" % (v,)


def _config(v):
    if not isinstance(v, dict):
        return "must be a table of config.py values, got %r" % (v,)
    for k, x in v.items():
        if not re.fullmatch(r"[A-Z][A-Z0-9_]*", k):
            return "%r is not an UPPER_CASE name" % k
        if not isinstance(x, (str, int, float, bool)):
            return "%s must be a string, number or boolean, got %r" % (k, x)


# key -> (check, required)
KEYS = {
    "description": (_str, False),
    "port": (_str, True),
    "support": (_str_list, False),
    "platform": (_str, True),
    "micropython": (_version, True),
    "mpy_cross": (_str_list, True),
    "lib": (_str_list, False),
    "heap_budget": (_int(8192, 1 << 30), True),
    "max_packet_size": (_int(128, 268435455), True),
    "out_size": (_int(128, 268435455), True),
    "max_inflight": (_int(1, 65535), True),
    "receive_maximum": (_int(1, 65535), True),
    "topic_alias_maximum": (_int(0, 65535), True),
    "keepalive": (_int(0, 65535), True),
    "wlan": (_bool, True),
    "short_errors": (_bool, False),
    "config": (_config, False),
}


def _fail(path, board, key, why):
    raise BoardError("%s: [%s] %s: %s" % (os.path.relpath(path) if os.path.isabs(path) else path, board, key, why))


DEFAULT_PROFILE = "full"
SESSION_KEYS = ("max_packet_size", "out_size", "max_inflight", "receive_maximum", "topic_alias_maximum", "keepalive")


@dataclass
class Profile:
    name: str
    description: str
    lib: list  # library modules, paths under lib/
    leaves_out: list  # what a board on this profile cannot do, in words
    session: dict = field(default_factory=dict)  # Session options that replace the board's (smaller buffers)
    bundle: list = field(default_factory=list)  # the modules tools/deploy loads as one (tools/deploy/bundle.py)


def _check_lib(path, name, lib, repo):
    for m in lib:
        if not m.endswith(".py") or not os.path.isfile(os.path.join(repo, "lib", m)):
            _fail(path, name, "lib", "lib/%s does not exist" % m)


def _check_profiles(path, t, repo):
    if not isinstance(t, dict) or not t:
        raise BoardError("%s: [profile] must hold [profile.NAME] tables" % path)
    out = {}
    for name, p in t.items():
        where = "profile." + name
        if not re.fullmatch(r"[a-z][a-z0-9_]*", name) or not isinstance(p, dict):
            raise BoardError("%s: [%s]: a profile is a table named with lower-case letters, digits and _"
                             % (path, where))
        for key in p:
            if key not in ("description", "lib", "leaves_out", "bundle") + SESSION_KEYS:
                _fail(path, where, key, "unknown key (a profile has description, lib, leaves_out, bundle "
                      "and Session options: %s)" % ", ".join(SESSION_KEYS))
            if key in SESSION_KEYS:
                why = KEYS[key][0](p[key])
                if why:
                    _fail(path, where, key, why)
        if "lib" not in p:
            _fail(path, where, "lib", "missing (a profile is its file set)")
        for key in ("lib", "leaves_out", "bundle"):
            why = _str_list(p.get(key, []))
            if why and p.get(key) != []:
                _fail(path, where, key, why)
        _check_lib(path, where, p["lib"], repo)
        for m in p.get("bundle", []):
            if m not in p["lib"] or m == "tinymqtt/__init__.py":
                _fail(path, where, "bundle", "%s is not one of the profile's lib modules (other than the package's "
                      "__init__.py, which the bundle becomes)" % m)
        out[name] = Profile(name, p.get("description", name), list(p["lib"]), list(p.get("leaves_out", [])),
                            {k: p[k] for k in SESSION_KEYS if k in p}, list(p.get("bundle", [])))
    if DEFAULT_PROFILE not in out:
        raise BoardError("%s: no [profile.%s] (the file set a board gets by default)" % (path, DEFAULT_PROFILE))
    return out


def _check_board(path, name, t, repo, profiles=None):
    if not isinstance(t, dict):
        raise BoardError("%s: [%s] must be a table of settings, got %r" % (path, name, t))
    for key in t:
        if key not in KEYS:
            close = difflib.get_close_matches(key, KEYS, 1)
            _fail(path, name, key, "unknown key" + (" (did you mean %s?)" % close[0] if close else ""))
    for key, (check, required) in KEYS.items():
        if key not in t:
            if required:
                _fail(path, name, key, "missing (every board needs it)")
            continue
        why = check(t[key])
        if why:
            _fail(path, name, key, why)
    port = t["port"]
    if not os.path.isfile(os.path.join(repo, port, "tinymqtt_port.py")):
        _fail(path, name, "port", "%s/tinymqtt_port.py does not exist" % port)
    for p in t.get("support", []):
        if not os.path.isfile(os.path.join(repo, p)):
            _fail(path, name, "support", "%s does not exist" % p)
        if not p.endswith(".py"):
            _fail(path, name, "support", "%s is not a .py module" % p)
    if "lib" in t:
        _check_lib(path, name, t["lib"], repo)
    elif not profiles:
        _fail(path, name, "lib", "missing (and no [profile.%s] to take it from)" % DEFAULT_PROFILE)
    for f in t["mpy_cross"]:
        if f.startswith("-march="):
            if f[7:] not in ARCHES:
                _fail(path, name, "mpy_cross", "unknown architecture %r (one of %s)" % (f[7:], ", ".join(ARCHES)))
        elif not re.fullmatch(r"-(O\d|X\S+|msmall-int-bits=\d+|march-flags=\S+)", f):
            _fail(path, name, "mpy_cross", "flag %r is not one deploy passes to mpy-cross (-march=, -O, -X...)" % f)
    if t["out_size"] > t["max_packet_size"]:
        _fail(path, name, "out_size", "%d is larger than max_packet_size %d (a packet never exceeds it)"
              % (t["out_size"], t["max_packet_size"]))
    buffers = t["max_packet_size"] + t["out_size"]
    if buffers > t["heap_budget"] // 2:
        _fail(path, name, "heap_budget", "%d leaves too little room: the buffers alone (max_packet_size + out_size "
              "= %d) must fit in half of it" % (t["heap_budget"], buffers))
    return Board(
        name=name, description=t.get("description", name), port=port, support=list(t.get("support", [])),
        platform=t["platform"], micropython=tuple(int(x) for x in (t["micropython"] + ".0").split(".")[:3]),
        mpy_cross=list(t["mpy_cross"]),
        lib=on_board(t["lib"] if "lib" in t else profiles[DEFAULT_PROFILE].lib, t.get("short_errors", False)),
        bundle=[] if "lib" in t else list(profiles[DEFAULT_PROFILE].bundle),
        heap_budget=t["heap_budget"],
        max_packet_size=t["max_packet_size"], out_size=t["out_size"], max_inflight=t["max_inflight"],
        receive_maximum=t["receive_maximum"], topic_alias_maximum=t["topic_alias_maximum"],
        keepalive=t["keepalive"], wlan=t["wlan"], config=dict(t.get("config", {})),
        short_errors=t.get("short_errors", False))


def on_board(lib, short_errors):
    """The library modules a board gets: all of its profile's (short error text keeps reasons.py, the names of
    the reason codes an error shows)."""
    return list(lib)


def parse(text, path="boards.toml", repo=REPO):
    """Boards from TOML text; BoardError naming the board and the key when anything is wrong."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise BoardError("%s: not valid TOML: %s" % (path, e)) from None
    if not data:
        raise BoardError("%s: no boards (add a [NAME] table per board)" % path)
    profiles = _check_profiles(path, data.pop("profile"), repo) if "profile" in data else None
    if not data:
        raise BoardError("%s: no boards (add a [NAME] table per board)" % path)
    boards = {}
    for name, t in data.items():
        if not re.fullmatch(r"[a-z][a-z0-9_]*", name):
            raise BoardError("%s: [%s]: a board name is lower-case letters, digits and _" % (path, name))
        boards[name] = _check_board(path, name, t, repo, profiles)
    return boards


def parse_profiles(text, path="boards.toml", repo=REPO):
    """{name: Profile} from TOML text ({} when it declares none)."""
    data = tomllib.loads(text)
    return _check_profiles(path, data["profile"], repo) if "profile" in data else {}


def load(path=DEFAULT_PATH, repo=REPO):
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise BoardError("%s: cannot read it (%s)" % (path, e.strerror)) from None
    return parse(text, path, repo)


def profiles(path=DEFAULT_PATH, repo=REPO):
    load(path, repo)  # every check, with the boards' errors first
    with open(path, encoding="utf-8") as f:
        return parse_profiles(f.read(), path, repo)


def get(name, path=DEFAULT_PATH, profile=None):
    """The board; with profile, its lib is that profile's file set (full: the board's own lib)."""
    boards = load(path)
    if name not in boards:
        raise BoardError("%s: no board %r (boards: %s)" % (path, name, ", ".join(sorted(boards))))
    board = boards[name]
    if profile in (None, board.profile):
        return board
    known = profiles(path)
    if profile not in known:
        raise BoardError("%s: no profile %r (profiles: %s)" % (path, profile, ", ".join(sorted(known))))
    p = known[profile]
    return dataclasses.replace(board, lib=on_board(p.lib, board.short_errors), profile=profile, bundle=list(p.bundle),
                               **p.session)


def main(argv=None):
    try:
        boards = load()
    except BoardError as e:
        print("error: %s" % e, file=sys.stderr)
        return 1
    for b in boards.values():
        print("%-8s %-14s MicroPython >= %-7s %-18s %s" % (b.name, b.port, b.version_text(),
                                                            " ".join(b.mpy_cross) or "(bytecode)", b.description))
    for p in profiles().values():
        print("profile %-8s %2d modules  %s" % (p.name, len(p.lib), p.description))
    return 0


if __name__ == "__main__":
    sys.exit(main())
