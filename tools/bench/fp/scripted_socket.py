# umqtt.simple's usocket on the 32-bit unix port, which has no sockets (tools/bench/footprint.py puts it in the
# peer's 32-bit tree and in sys.modules as usocket: a file cannot shadow that built-in name): the scripted server
# of fp/scripted_port.py, the tree's tinymqtt_port, behind socket's names.
from tinymqtt_port import Socket as socket  # noqa: F401


def getaddrinfo(host, port, *args):
    return [(2, 1, 0, "", (host, port))]
