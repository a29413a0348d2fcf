# The MicroPython peers that publish beside tinymqtt on the unix ports (make bench's MicroPython row, python -m
# tools.bench.aio_rates), from their source tarballs, never from a registry: umqtt.simple from the micropython-lib
# that MicroPython 1.28 pins and mqtt_as 0.8.3 from ../shared/peers (tools/bench/realistic.py's peers()). They go
# on the publishers' path (mp_unix.PEER_PATH) with what mqtt_as takes from a board: `network` and `machine`.
import os
import shutil

from tools.bench import footprint, mp_unix, realistic

WINDOW = 1000  # QoS 1/2 messages in flight for tinymqtt and the ceiling (make bench's --window default)


def setup(tmp, log=print):
    """{"umqtt": ("umqtt.simple 1.7.0", folder holding umqtt/simple.py), "mqtt_as": ("mqtt_as 0.8.3", folder
    holding mqtt_as/)} for the peers that could be had, unpacked into tmp (a peer that cannot be had is left out
    with a line saying so); their folders and mqtt_as's stand-ins become mp_unix.PEER_PATH."""
    got = realistic.peers(tmp, log)
    out, path = {}, []
    for name, app in (("umqtt", "real_umqtt.py"), ("mqtt_as", "real_mqtt_as.py")):
        if app in got:
            version, [(src, member)] = got[app]  # (src ends with member: umqtt/simple.py, mqtt_as/__init__.py)
            out[name] = (version, src[:-len(member)].rstrip("/"))
            path.append(out[name][1])
    if "mqtt_as" in out:  # (not tests/fakes as a whole: it has a socket.py, and the publishers need the real one)
        standins = os.path.join(tmp, "standins")
        os.makedirs(standins, exist_ok=True)
        shutil.copy(os.path.join(footprint.FP, "network.py"), standins)
        shutil.copy(os.path.join(footprint.ROOT, "tests", "fakes", "machine.py"), standins)
        path.append(standins)
    mp_unix.PEER_PATH[:] = path
    return out
