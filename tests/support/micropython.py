# Runs Python code under the real MicroPython (npm WebAssembly port) via node + tests/support/mp_run.mjs.
# run_micropython() returns a CompletedProcess; mp_check() asserts success and returns stdout. Inside, the repo
# is at /repo: `import tinymqtt`, `import tests.shared.x` and `import mptest` work; top-level `await` works.
import os
import shutil
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MP_RUN = os.path.join(ROOT, "tests", "support", "mp_run.mjs")
PACKAGE = os.path.join(ROOT, "node_modules", "@micropython", "micropython-webassembly-pyscript")


def available():
    return shutil.which("node") is not None and os.path.isdir(PACKAGE)


def run_micropython(code: str, paths=(), timeout: float = 60, heapsize=None) -> subprocess.CompletedProcess:
    """Run `code` under MicroPython. `paths`: extra repo-relative files/dirs to copy in (lib/, tests/shared/
    and mptest.py always are). On timeout returns returncode -9 with the output so far and a hint."""
    if not available():
        raise RuntimeError("MicroPython not installed: run tools/bootstrap.sh (needs node and `npm ci`)")
    cmd = ["node", MP_RUN, "--root", ROOT]
    for p in paths:
        cmd += ["--copy", p]
    if heapsize:
        cmd += ["--heapsize", str(heapsize)]
    try:
        return subprocess.run(cmd, input=code, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    except subprocess.TimeoutExpired as e:
        def text(b):
            return b.decode(errors="replace") if isinstance(b, bytes) else (b or "")
        hint = ("\nTIMEOUT after %ss under MicroPython (note: an exception escaping while micropython.heap_lock() "
                "is active hangs this port forever)\n" % timeout)
        return subprocess.CompletedProcess(cmd, -9, text(e.stdout), text(e.stderr) + hint)


def describe(result: subprocess.CompletedProcess) -> str:
    return "MicroPython exit code %s\n--- stdout ---\n%s\n--- stderr ---\n%s" % (
        result.returncode, result.stdout, result.stderr)


def mp_check(code: str, **kw) -> str:
    """Run `code` under MicroPython, fail the calling test (showing all output) unless it exits 0; returns stdout."""
    result = run_micropython(code, **kw)
    assert result.returncode == 0, describe(result)
    return result.stdout
