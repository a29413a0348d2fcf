# Developer and CI entry points. `make test` works on a fresh clone: tools/bootstrap.sh creates .venv,
# node_modules (the npm MicroPython) and installs mosquitto, then pytest runs on CPython and MicroPython.
PYTEST_ARGS ?=
DEMO_ARGS ?=

.PHONY: test demo bootstrap

bootstrap:
	@tools/bootstrap.sh

test: bootstrap
	.venv/bin/python -m pytest tests -q -ra $(PYTEST_ARGS)

demo: bootstrap
	.venv/bin/python -m tools.demo $(DEMO_ARGS)
