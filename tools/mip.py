# mip metadata written from boards.toml, so `mpremote mip install` and frozen firmware get exactly a profile's
# files: lib/package.json (profile full) and lib/NAME.json (other profiles), ports/*/package.json (a board's
# port), and "urls" in the repository's package.json (npm's file for the test tools: npm ignores the key).
#   python -m tools.mip            rewrite them      python -m tools.mip --check   exit 1 when one is stale
#   mpremote mip install github:OWNER/tinymqtt                  the full library (repository root)
#   mpremote mip install github:OWNER/tinymqtt/lib/mqtt311.json  a profile;  .../ports/esp32  a board's port
import argparse
import json
import os
import re
import sys

from tools import boards as boards_mod

REPO = boards_mod.REPO


def version():
    with open(os.path.join(REPO, "lib", "tinymqtt", "__init__.py")) as f:
        for line in f:
            if line.startswith("__version__"):
                return line.split("=")[1].strip().strip("\"'")
    return "0.0.0"


def profile_file(name):
    return os.path.join("lib", "package.json" if name == boards_mod.DEFAULT_PROFILE else name + ".json")


def outputs():
    """{repo-relative path: dict} for every mip file."""
    out = {}
    profiles = boards_mod.profiles()
    v = version()
    for name, p in profiles.items():
        out[profile_file(name)] = {"urls": [[m, m] for m in p.lib], "version": v}
    for b in boards_mod.load().values():
        urls = [["tinymqtt_port.py", "tinymqtt_port.py"]]
        urls += [[os.path.basename(s), os.path.relpath(os.path.join(REPO, s), os.path.join(REPO, b.port))]
                 for s in b.support]
        out[os.path.join(b.port, "package.json")] = {"urls": urls, "version": v}
    with open(os.path.join(REPO, "package.json")) as f:
        npm = json.load(f)
    npm["urls"] = [[m, "lib/" + m] for m in profiles[boards_mod.DEFAULT_PROFILE].lib]
    npm["version"] = v
    out["package.json"] = npm
    return out


def text(data):
    """JSON with one [dest, url] pair a line."""
    s = json.dumps(data, indent=2)
    return re.sub(r'\[\s*("[^"]*"),\s*("[^"]*")\s*\]', r"[\1, \2]", s) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m tools.mip")
    ap.add_argument("--check", action="store_true", help="only check that every file is up to date")
    a = ap.parse_args(argv)
    stale = []
    for rel, data in outputs().items():
        path = os.path.join(REPO, rel)
        try:
            with open(path) as f:
                same = f.read() == text(data)
        except OSError:
            same = False
        if same:
            continue
        stale.append(rel)
        if not a.check:
            with open(path, "w") as f:
                f.write(text(data))
    if a.check and stale:
        print("stale mip metadata (run python -m tools.mip): %s" % ", ".join(stale), file=sys.stderr)
        return 1
    for rel in stale:
        print("wrote %s" % rel)
    return 0


if __name__ == "__main__":
    sys.exit(main())
