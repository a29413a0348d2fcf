# A fleet of simulated MQTT devices on tinymqtt's AsyncClient (one asyncio process holds thousands), with
# faults (cut connections, dying devices) and a manifest of everything sent. See sim.py; run it with
# `python -m tools.fleet --help`. Importing this package puts the repo's lib/ and Linux port on sys.path.
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
for _p in (os.path.join(ROOT, "ports", "linux"), os.path.join(ROOT, "lib")):
    if _p not in sys.path:
        sys.path.insert(0, _p)
