# The Spark source as a user gets it: the package is built and pip-installed (pyproject's hatchling backend, no
# network) into a fresh virtual environment whose only other packages are the shared .venv's (pyspark,
# pyarrow: a .pth line, so none of .venv's own .pth files, which point at a checkout, take effect), and the job
# in docs/spark.md runs there word for word, outside the repo, with no PYTHONPATH: only its broker address and
# its directory are replaced. It must read 2,000 of 2,000 messages, first try.
import os
import re
import subprocess
import sys
import sysconfig
import zipfile

import pytest

from tests.support.broker import Mosquitto
from tests.support.report import record

pytest.importorskip("pyspark", reason="pyspark is not installed (tools/bootstrap.sh installs pyspark[sql])")
pytest.importorskip("hatchling", reason="hatchling (requirements-test.txt) builds the package offline")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def doc_job():
    with open(os.path.join(ROOT, "docs", "spark.md")) as f:
        blocks = re.findall(r"```python\n(.*?)```", f.read(), re.S)
    job = [b for b in blocks if b.startswith("# mqtt_job.py")]
    assert len(job) == 1, "docs/spark.md must hold one job block starting with '# mqtt_job.py'"
    return job[0]


def test_the_documented_job_in_a_fresh_venv_reads_every_message(tmp_path):
    venv = str(tmp_path / "venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True)
    py = os.path.join(venv, "bin", "python")
    site = subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], check=True,
                          capture_output=True, text=True).stdout.strip()
    with open(os.path.join(site, "shared-venv.pth"), "w") as f:
        f.write(sysconfig.get_paths()["purelib"] + "\n")  # pyspark, pyarrow, pip, hatchling: not tinymqtt
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}
    wheels = str(tmp_path / "wheels")
    subprocess.run([py, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", wheels, ROOT],
                   check=True, env=env, cwd=str(tmp_path))
    (whl,) = [os.path.join(wheels, n) for n in os.listdir(wheels)]
    with zipfile.ZipFile(whl) as z:
        names = z.namelist()
        meta = z.read([n for n in names if n.endswith(".dist-info/METADATA")][0]).decode()
    assert "tinymqtt_spark/source.py" in names and "tinymqtt/client.py" in names and "tinymqtt_port.py" in names
    assert not [n for n in names if n.startswith(("tools/", "host/", "lib/"))]
    assert re.search(r"Requires-Dist: pyspark\[sql\].*extra == ['\"]spark['\"]", meta), meta
    subprocess.run([py, "-m", "pip", "install", "-q", "--no-deps", "--no-index", whl], check=True, env=env,
                   cwd=str(tmp_path))
    where = subprocess.run([py, "-c", "import tinymqtt, tinymqtt_port, tinymqtt_spark; print(tinymqtt.__file__, "
                            "tinymqtt_port.__file__, tinymqtt_spark.__file__)"], check=True, capture_output=True,
                           text=True, env=env, cwd=str(tmp_path)).stdout.split()
    assert all(w.startswith(site) for w in where), where  # the installed copies, not the checkout's

    work = str(tmp_path / "job")
    with Mosquitto(extra_conf="max_queued_messages 1000000\nmax_queued_bytes 0\n") as b:
        job = doc_job().replace('"127.0.0.1:1883"', '"127.0.0.1:%d"' % b.port).replace('"/tmp/mqtt-job"',
                                                                                      repr(work))
        path = str(tmp_path / "mqtt_job.py")
        with open(path, "w") as f:
            f.write(job)
        r = subprocess.run([py, path], env=env, cwd=str(tmp_path), capture_output=True, text=True, timeout=300)
    why = r.stdout + "\n".join(line for line in r.stderr.splitlines() if not line.startswith("\tat "))[:6000]
    assert r.returncode == 0, why
    assert "rows: 2000 of 2000" in r.stdout, why
    record("spark: documented job in a fresh venv (pip-installed package)", "2000 of 2000 rows")
