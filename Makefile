# Developer and CI entry points. `make test` works on a fresh clone: tools/bootstrap.sh creates .venv,
# node_modules (the npm MicroPython) and installs mosquitto, then pytest runs on CPython and MicroPython.
PYTEST_ARGS ?=
DEMO_ARGS ?=
BENCH_ARGS ?=

.PHONY: test demo bench bootstrap

bootstrap:
	@tools/bootstrap.sh

test: bootstrap
	.venv/bin/python -m pytest tests -q -ra $(PYTEST_ARGS)

demo: bootstrap
	.venv/bin/python -m tools.demo $(DEMO_ARGS)

# Benchmarks against peers (paho-mqtt, Adafruit MiniMQTT) in their own venv, so the peers never reach the
# test environment; writes docs/benchmarks.md and docs/benchmarks.png.
bench: bootstrap
	@[ -x .venv-bench/bin/python ] || python3 -m venv .venv-bench
	.venv-bench/bin/python -m pip install -q --disable-pip-version-check -r requirements-bench.txt
	.venv-bench/bin/python -m tools.bench $(BENCH_ARGS)
