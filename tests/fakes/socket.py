# The `socket` module the WebAssembly build lacks, for tests/test_board_ports.py's asyncio run there: the
# board layer imports socket and resolves the broker's name with getaddrinfo before asyncio connects over the
# simulator's bridge (tests/fakes/jsstream.py). Names only: everything that moves bytes runs on real sockets
# under the unix port (tests/test_unix_*.py).
AF_INET = 2
SOCK_STREAM = 1
IPPROTO_TCP = 6
hosts = {"broker.example": "10.0.0.2"}  # what getaddrinfo resolves


def getaddrinfo(host, port, af=0, type=0, proto=0, flags=0):
    ip = host if host.replace(".", "").isdigit() else hosts.get(host)
    if ip is None:
        raise OSError(-202)  # what an ESP32 raises for a name that does not resolve
    return [(AF_INET, SOCK_STREAM, IPPROTO_TCP, "", (ip, port))]
