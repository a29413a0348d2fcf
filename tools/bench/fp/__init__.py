# The apps tools/bench/footprint.py deploys with each profile's tree and runs on real MicroPython, the link
# scripted inside the interpreter that its WebAssembly rows use (scripted_port.py), and the realistic program
# that tools/bench/realistic.py runs for every client (real_*.py).
