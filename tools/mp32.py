# Builds the 32-bit MicroPython unix port (real socket, select and asyncio; 31-bit small ints and 16-byte heap
# blocks, as ESP32 and RP2040 have) and firmware with tinymqtt frozen into it, from the MicroPython source in
# ../shared/micropython (its README gives the commands this follows). Everything goes into a cache outside the
# checkout, so a second run only compares hashes:
#   ~/.cache/tinymqtt/mp32-KEY/micropython            the port (KEY: the tarballs' hash and the build flags)
#   ~/.cache/tinymqtt/mp32-KEY/frozen-PROFILE-HASH/micropython   one firmware per profile and frozen content
#   python -m tools.mp32            builds what is missing (tools/bootstrap.sh runs it; prints the build time)
#   python -m tools.mp32 --where    prints the port's path
# A missing ../shared fails loudly: set TINYMQTT_NO_MP32=1 to run without the 32-bit port on purpose.
import contextlib
import fcntl
import glob
import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MP_TARBALL, LIB_TARBALL = "micropython-1.28.0.tar.gz", "micropython-lib-8380c7b.tar.gz"
MP_DIR = "micropython-1.28.0"
# The README's flags: 32-bit objects, and no module that needs a submodule the tarballs leave out.
FLAGS = ("VARIANT=standard", "CFLAGS_EXTRA=-m32", "LDFLAGS_EXTRA=-m32",
         "MICROPY_PY_FFI=0", "MICROPY_PY_BTREE=0", "MICROPY_SSL_MBEDTLS=0", "MICROPY_PY_SSL=0")
PROFILES = ("mqtt311", "full")
FROZEN_PORT = "linux"  # the port frozen beside the library (ports/linux: plain sockets, as the unix port has)
OFF = "TINYMQTT_NO_MP32"
KEEP = 8  # firmware builds kept per profile


class Missing(Exception):
    """The MicroPython source is not where the checkout expects it."""


def _main_checkout():
    """The main checkout's folder when this one is a git worktree of it (else this checkout's)."""
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        common = subprocess.run(["git", "-C", REPO, "rev-parse", "--path-format=absolute", "--git-common-dir"],
                                capture_output=True, text=True, timeout=10).stdout.strip()
        if common:  # .../main/.git
            return os.path.dirname(common)
    return REPO


def shared_dir():
    """../shared beside the checkout (CI copies it there; for a git worktree, beside its main checkout), or
    TINYMQTT_SHARED."""
    if os.environ.get("TINYMQTT_SHARED"):
        candidates = [os.environ["TINYMQTT_SHARED"]]
    else:
        candidates = [os.path.join(os.path.dirname(d), "shared") for d in (REPO, _main_checkout())]
    for c in candidates:
        if os.path.exists(os.path.join(c, "micropython", MP_TARBALL)):
            return c
    raise Missing("no MicroPython source: expected %s and %s in %s (CI copies shared/ beside the clone); "
                  "set TINYMQTT_SHARED=DIR, or %s=1 to run without the 32-bit port"
                  % (MP_TARBALL, LIB_TARBALL, " or ".join(os.path.join(c, "micropython") for c in candidates), OFF))


def _sha(paths):
    h = hashlib.sha256()
    for p in paths:
        h.update(os.path.relpath(p, REPO).encode() if p.startswith(REPO) else os.path.basename(p).encode())
        with open(p, "rb") as f:
            h.update(f.read())
    return h.hexdigest()[:16]


def cache_dir():
    """The port's cache folder, keyed by the tarballs and the flags (Missing if there is no source)."""
    src = os.path.join(shared_dir(), "micropython")
    h = hashlib.sha256(_sha([os.path.join(src, MP_TARBALL), os.path.join(src, LIB_TARBALL)]).encode())
    h.update(" ".join(FLAGS).encode())
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "tinymqtt", "mp32-" + h.hexdigest()[:16])


def frozen_inputs():
    """The files the firmware manifest can freeze (any change gives another firmware)."""
    patterns = ["manifest.py", "boards.toml", "lib/*.json", "lib/tinymqtt/*.py", "ports/%s/*.py" % FROZEN_PORT,
                "ports/%s/*.json" % FROZEN_PORT,
                "ports/common/*.py"]
    return sorted(f for p in patterns for f in glob.glob(os.path.join(REPO, p)))


def firmware_manifest(profile):
    """The manifest a board user writes: MicroPython's asyncio, then tinymqtt's manifest.py for a profile and port."""
    return ('include("$(MPY_DIR)/extmod/asyncio")\n'
            'include(%r, profile=%r, port=%r)\n' % (os.path.join(REPO, "manifest.py"), profile, FROZEN_PORT))


def _where(profile=None):
    d = cache_dir()
    if profile is None:
        return os.path.join(d, "micropython")
    return os.path.join(d, "frozen-%s-%s" % (profile, _sha(frozen_inputs())), "micropython")


def port():
    """The 32-bit port's path if it is built, else None (Missing if there is no source)."""
    exe = _where()
    return exe if os.access(exe, os.X_OK) else None


def frozen(profile, log=print):
    """The path of the 32-bit firmware with `profile` frozen, built (about 20 s) if this checkout's library changed
    since the last build; the port itself must be built (build())."""
    exe = _where(profile)
    if not os.access(exe, os.X_OK):
        with _locked():
            if not os.access(exe, os.X_OK):
                _build_frozen(profile, exe, log)
    return exe


@contextlib.contextmanager
def _locked():
    """One build at a time in the cache folder (several checkouts share it)."""
    d = cache_dir()
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, ".lock"), "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _make(args, log_path, log):
    with open(log_path, "w") as out:
        p = subprocess.run(["make", "-j2"] + args, stdout=out, stderr=subprocess.STDOUT)
    if p.returncode:
        with open(log_path) as f:
            log(f.read()[-4000:])
        raise RuntimeError("mp32: make %s failed (log: %s)" % (" ".join(args), log_path))


def _have_m32():
    """True if gcc links a 32-bit program (Debian: gcc-multilib)."""
    if not shutil.which("gcc"):
        return False
    with contextlib.suppress(OSError):
        tmp = os.path.join(cache_dir(), ".m32-probe")
        os.makedirs(tmp, exist_ok=True)
        with open(os.path.join(tmp, "t.c"), "w") as f:
            f.write("#include <stdio.h>\nint main(void) { return 0; }\n")
        return subprocess.run(["gcc", "-m32", "-o", os.path.join(tmp, "t"), os.path.join(tmp, "t.c")],
                              capture_output=True).returncode == 0
    return False


def _install_multilib(log):
    if _have_m32():
        return
    if os.getuid() != 0:
        raise RuntimeError("mp32: gcc cannot build 32-bit programs: install it with "
                           "'sudo apt-get install -y gcc-multilib' and re-run")
    log("mp32: apt-get install gcc-multilib")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for cmd in (["apt-get", "update", "-q"], ["apt-get", "install", "-y", "-q", "gcc-multilib"]):
        p = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if p.returncode:
            log(p.stdout[-2000:] + p.stderr[-2000:])
            raise RuntimeError("mp32: %s failed (output above)" % " ".join(cmd))
    if not _have_m32():
        raise RuntimeError("mp32: gcc-multilib is installed but gcc -m32 still cannot link")


def _src():
    return os.path.join(cache_dir(), MP_DIR)


def _build_port(log):
    """Unpacks the tarballs and builds mpy-cross and the port into the cache (the README's commands)."""
    d = cache_dir()
    shared = os.path.join(shared_dir(), "micropython")
    _install_multilib(log)
    if not os.path.isdir(os.path.join(_src(), "lib", "micropython-lib", "micropython")):
        shutil.rmtree(_src(), ignore_errors=True)
        log("mp32: unpacking %s and %s into %s" % (MP_TARBALL, LIB_TARBALL, d))
        with tarfile.open(os.path.join(shared, MP_TARBALL)) as t:
            t.extractall(d)
        with tarfile.open(os.path.join(shared, LIB_TARBALL)) as t:
            t.extractall(os.path.join(_src(), "lib"))
    log("mp32: building mpy-cross and the 32-bit unix port (about a minute on 2 cores)")
    started = time.monotonic()
    _make(["-C", os.path.join(_src(), "mpy-cross")], os.path.join(d, "mpy-cross.log"), log)
    _make(["-C", os.path.join(_src(), "ports", "unix"), "BUILD=build-m32"] + list(FLAGS),
          os.path.join(d, "port.log"), log)
    shutil.copy(os.path.join(_src(), "ports", "unix", "build-m32", "micropython"), _where())
    log("mp32: port built in %.0f s" % (time.monotonic() - started))


def _build_frozen(profile, exe, log):
    """Re-links the frozen build folder with this profile's manifest (only the frozen content is compiled again)
    and keeps the binary in its own folder."""
    d = os.path.dirname(exe)
    os.makedirs(d, exist_ok=True)
    manifest = os.path.join(d, "fw_manifest.py")
    with open(manifest, "w") as f:
        f.write(firmware_manifest(profile))
    log("mp32: building the firmware with tinymqtt %s frozen (port %s)" % (profile, FROZEN_PORT))
    started = time.monotonic()
    unix = os.path.join(_src(), "ports", "unix")
    # The first time, start from a copy of the port's objects (with their times): only the frozen content and
    # the link are left to do, as in every later build with another manifest.
    if not os.path.isdir(os.path.join(unix, "build-m32-frozen")):
        shutil.copytree(os.path.join(unix, "build-m32"), os.path.join(unix, "build-m32-frozen"), symlinks=True)
    # make decides from the frozen content's file whether to link again: a manifest whose output equals what that
    # file last held (another checkout's build of this profile) would leave the last profile's binary in place.
    # And it compiles a frozen .py again only when the .py is newer than its .mpy: a checkout whose files are older
    # than another checkout's would get that one's bytecode. So neither is kept.
    for stale in ("frozen_content.c", "micropython"):
        with contextlib.suppress(FileNotFoundError):
            os.remove(os.path.join(unix, "build-m32-frozen", stale))
    shutil.rmtree(os.path.join(unix, "build-m32-frozen", "frozen_mpy"), ignore_errors=True)
    _make(["-C", unix, "BUILD=build-m32-frozen", "FROZEN_MANIFEST=" + manifest] + list(FLAGS),
          os.path.join(d, "build.log"), log)
    shutil.copy(os.path.join(unix, "build-m32-frozen", "micropython"), exe + ".tmp")
    os.replace(exe + ".tmp", exe)
    log("mp32: %s firmware built in %.0f s" % (profile, time.monotonic() - started))
    # Firmware of earlier library versions: the newest few stay (other checkouts on this machine may be running
    # theirs right now), older ones go.
    kept = sorted(glob.glob(os.path.join(cache_dir(), "frozen-%s-*" % profile)), key=os.path.getmtime)
    for old in kept[:-KEEP]:
        shutil.rmtree(old, ignore_errors=True)


def build(log=print):
    """Builds the port and every profile's firmware that is missing; returns the port's path."""
    started = time.monotonic()
    built = False
    if port() is None:
        with _locked():
            if port() is None:
                _build_port(log)
                built = True
    for profile in PROFILES:
        if not os.access(_where(profile), os.X_OK):
            frozen(profile, log)
            built = True
    if built:
        log("mp32: done in %.0f s: %s" % (time.monotonic() - started, cache_dir()))
    return _where()


def main(argv):
    if os.environ.get(OFF):
        print("mp32: %s is set: no 32-bit MicroPython port (its tests will skip)" % OFF)
        return 0
    try:
        if "--where" in argv:
            print(port() or "")
            return 0 if port() else 1
        build()
    except (Missing, RuntimeError) as e:
        print("mp32: %s" % e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
