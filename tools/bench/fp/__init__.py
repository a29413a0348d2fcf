# The apps tools/bench/footprint.py deploys with each profile's tree and runs on real MicroPython, and the
# link scripted inside the interpreter that its 32-bit rows use (scripted_port.py, scripted_socket.py).
