# Figures the test run reports at its end ("tinymqtt figures" block printed by tests/conftest.py).
# Any test may call record("fuzz cases", 100000); a later record of the same key replaces the earlier one.
_figures = {}


def record(key, value):
    _figures[str(key)] = value


def figures():
    return list(_figures.items())
