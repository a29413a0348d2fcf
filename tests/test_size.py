# tools/size.py's measurements of issue 30's budget beyond the .mpy bytes (tests/test_profiles.py checks those):
# the 32-bit heap of a connected client (--heap) and each commit's figures with its own tools (--history).
import ast

import pytest

from tools import size
from tools.bench import footprint as fp


def test_heap_rows_are_the_footprint_benchs_three_clients():
    assert [(r[1], r[2], r[3]) for r in size._rows()] == [("mqtt311", "fp_blocking.py", 4),
                                                          ("full", "fp_blocking.py", 5), ("full", "fp_aio.py", 5)]


def test_history_script_uses_only_what_footprint_has_had_since_81aa425():
    # (an older commit's footprint.py runs it: no port32(), no run_unix(exe=))
    used = {n.attr for n in ast.walk(ast.parse(size._HISTORY)) if isinstance(n, ast.Attribute)
            and getattr(n.value, "id", "") == "fp"}
    assert used == {"micropython", "ROWS", "tree", "tree32", "run_wasm", "WASM_RUNS", "run_unix"}
    assert all(hasattr(fp, n) for n in used)


def test_heap_measures_a_connected_mqtt311_client_on_both_32_bit_builds():
    if not fp.wasm_available():
        pytest.skip("no node / npm MicroPython")
    rows = size.heap32(["mqtt311"], log=lambda *a: None)
    (label, profile, version, u32, wasm), = rows
    assert (profile, version) == ("mqtt311", 4)
    for r in (u32, wasm):
        if r is not None:  # (u32: None without ../shared's MicroPython source, TINYMQTT_NO_MP32)
            assert 4096 < r["import"] < r["connected"] < 64 * 1024
    assert wasm is not None
