# The benchmarks: `python -m tools.bench` (see __main__.py) measures tinymqtt against its peers and a raw-socket
# ceiling through one local mosquitto, and its heap, size, wire bytes and codec speed under MicroPython.
