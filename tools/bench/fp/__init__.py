# The apps tools/bench/footprint.py deploys with each profile's tree and runs on real MicroPython.
