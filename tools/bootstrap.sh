#!/usr/bin/env bash
# Prepares a fresh clone for `make test`: .venv (requirements-test.txt), node_modules (package-lock.json:
# the npm MicroPython), the mosquitto broker (apt, as root) and the 32-bit MicroPython port (tools/mp32.py, from
# ../shared/micropython). Idempotent: stamp files inside .venv and
# node_modules record what was installed, so a second run only compares two hashes.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { echo "bootstrap: $*"; }
hash_of() { cat "$@" | sha256sum | cut -c1-16; }

# 1. mosquitto (Debian installs it in /usr/sbin, which is not on every PATH).
if ! command -v mosquitto >/dev/null && [ ! -x /usr/sbin/mosquitto ]; then
    if [ "$(id -u)" != 0 ]; then
        say "mosquitto not found: install it with 'sudo apt-get install -y mosquitto mosquitto-clients' and re-run"
        exit 1
    fi
    say "apt-get install mosquitto mosquitto-clients"
    export DEBIAN_FRONTEND=noninteractive
    if ! { apt-get update -q && apt-get install -y -q mosquitto mosquitto-clients; } >/tmp/tinymqtt-apt.$$.log 2>&1; then
        cat /tmp/tinymqtt-apt.$$.log; rm -f /tmp/tinymqtt-apt.$$.log; say "apt-get failed (log above)"; exit 1
    fi
    rm -f /tmp/tinymqtt-apt.$$.log
fi

# 2. Python venv with the test requirements.
want=$(hash_of requirements-test.txt)
if [ "$(cat .venv/.bootstrap-stamp 2>/dev/null)" != "$want" ] || [ ! -x .venv/bin/python ]; then
    if [ ! -x .venv/bin/python ]; then
        say "creating .venv"
        python3 -m venv .venv
    fi
    say "pip install -r requirements-test.txt"
    if ! .venv/bin/python -m pip install -q --disable-pip-version-check -r requirements-test.txt >.venv/pip.log 2>&1; then
        cat .venv/pip.log; say "pip install failed (log above)"; exit 1
    fi
    echo "$want" >.venv/.bootstrap-stamp
fi

# 3. Node packages (exact versions from package-lock.json).
want=$(hash_of package.json package-lock.json)
if [ "$(cat node_modules/.bootstrap-stamp 2>/dev/null)" != "$want" ]; then
    command -v npm >/dev/null || { say "npm not found: install Node.js >= 18 (with npm)"; exit 1; }
    say "npm ci"
    if ! npm ci --no-audit --no-fund --loglevel=error >/tmp/tinymqtt-npm.$$.log 2>&1; then
        cat /tmp/tinymqtt-npm.$$.log; rm -f /tmp/tinymqtt-npm.$$.log; say "npm ci failed (log above)"; exit 1
    fi
    rm -f /tmp/tinymqtt-npm.$$.log
    echo "$want" >node_modules/.bootstrap-stamp
fi

# 4. The 32-bit MicroPython unix port and firmware with tinymqtt frozen, built from ../shared/micropython into
#    ~/.cache/tinymqtt (cached by the tarballs' hash and the library's content; tools/mp32.py says more).
.venv/bin/python -m tools.mp32

# 5. This checkout on .venv's path (a .pth file, offline, no build step): the core (lib), the Linux port and the
#    host packages (host: `.venv/bin/python -m tinymqtt_cli` works after `make test` / `make demo`); users outside
#    the checkout `pip install .` instead (README).
site=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
want="$(pwd)/lib
$(pwd)/ports/linux
$(pwd)/host"
if [ "$(cat "$site/tinymqtt-checkout.pth" 2>/dev/null)" != "$want" ]; then
    printf '%s\n' "$want" >"$site/tinymqtt-checkout.pth"
fi
