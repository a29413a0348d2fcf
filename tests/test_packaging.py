# Beyond copying files: mip metadata and the freezing manifest, both written from boards.toml's profiles.
# mpremote's own mip code installs a profile from the local metadata into a folder (through a stand-in for
# the device's filesystem), and the real MicroPython unix port then imports the client from that folder alone.
import json
import os
import runpy
import subprocess

import pytest
from mpremote import mip as mpremote_mip

from tools import boards, mip

REPO = boards.REPO
MICROPYTHON = os.path.join(REPO, ".venv", "bin", "micropython")


def test_mip_metadata_is_up_to_date_with_boards_toml():
    assert mip.main(["--check"]) == 0, "run python -m tools.mip"
    with open(os.path.join(REPO, "package.json")) as f:
        npm = json.load(f)
    assert npm["dependencies"] and npm["private"], "npm's fields stay"
    assert [d for d, _ in npm["urls"]] == boards.profiles()["full"].lib


class FolderDevice:
    """The part of mpremote's transport that mip uses, writing into a local folder."""

    def __init__(self, root):
        self.root = root

    def _p(self, path):
        return os.path.join(self.root, path.lstrip("/"))

    def fs_exists(self, path):
        return os.path.exists(self._p(path))

    def fs_mkdir(self, path):
        os.mkdir(self._p(path))

    def fs_writefile(self, path, data, progress_callback=None):
        with open(self._p(path), "wb") as f:
            f.write(data)


@pytest.mark.parametrize("profile", sorted(boards.profiles()))
def test_mpremote_mip_installs_a_profile_and_micropython_imports_it(profile, tmp_path, capsys):
    dev = FolderDevice(str(tmp_path))
    meta = os.path.join(REPO, mip.profile_file(profile))
    mpremote_mip._install_package(dev, meta, None, "/lib", None, False)
    mpremote_mip._install_package(dev, os.path.join(REPO, "ports/linux/package.json"), None, "/lib", None, False)
    got = sorted(os.path.relpath(os.path.join(d, f), tmp_path / "lib") for d, _, fs in os.walk(tmp_path) for f in fs)
    assert got == sorted(boards.profiles()[profile].lib + ["tinymqtt_port.py", "tinymqtt_tls.py"])
    if not os.path.exists(MICROPYTHON):
        pytest.skip("no unix-port micropython")
    code = "import tinymqtt.client, tinymqtt_port, sys; print(sorted(m for m in sys.modules if 'tinymqtt' in m))"
    p = subprocess.run([MICROPYTHON, "-c", code], env={"MICROPYPATH": ".frozen:" + str(tmp_path / "lib")},
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stdout + p.stderr
    loaded = eval(p.stdout)
    assert "tinymqtt.aio" not in loaded and "tinymqtt.reasons" not in loaded


class Options:
    """tools/manifestfile.py's IncludeOptions: the include() keywords, then defaults() (which replaces)."""

    def __init__(self, **kwargs):
        self._kwargs, self._defaults = kwargs, {}

    def defaults(self, **kwargs):
        self._defaults = kwargs

    def __getattr__(self, name):
        return self._kwargs.get(name, self._defaults.get(name, None))


class Manifest:
    """MicroPython's manifest API as tools/manifestfile.py defines it in freeze mode (package, module and
    metadata with their signatures; the manifest runs in its own folder), recording (frozen name, source,
    opt). The real ManifestFile was run on manifest.py too (profiles mqtt311/full, ports esp32/picow):
    the same names; this stand-in keeps the test free of a MicroPython checkout."""

    def __init__(self, **kwargs):
        self.kwargs, self.frozen = kwargs, []

    def run(self):
        here = os.getcwd()
        os.chdir(REPO)
        try:
            runpy.run_path("manifest.py", {"options": Options(**self.kwargs), "metadata": self.metadata,
                                           "package": self.package, "module": self.module})
        finally:
            os.chdir(here)
        return sorted(name for name, _, _ in self.frozen)

    def metadata(self, description=None, version=None, license=None, author=None, stdlib=False, pypi=None,
                 pypi_publish=None):
        raise AssertionError("through include(), metadata() would set the including board's metadata: every "
                             "file it freezes would be tagged, and a board with its own metadata() fails")

    def package(self, package_path, files=None, base_path=".", opt=None):
        assert files is not None, "the profile's file list, not every .py under lib/tinymqtt"
        for f in files:
            assert os.path.isfile(os.path.join(base_path, package_path, f)), f
            self.frozen.append((package_path + "/" + f, os.path.join(base_path, package_path, f), opt))

    def module(self, module_path, base_path=".", opt=None):
        assert module_path.endswith(".py") and os.path.isfile(os.path.join(base_path, module_path)), module_path
        self.frozen.append((module_path, os.path.join(base_path, module_path), opt))


def test_manifest_freezes_a_profile_and_a_port():
    assert Manifest().run() == sorted(boards.profiles()["full"].lib)
    m = Manifest(profile="mqtt311", port="esp32")
    assert m.run() == sorted(
        boards.profiles()["mqtt311"].lib + ["tinymqtt_port.py", "tinymqtt_board.py", "tinymqtt_stream.py", "tinymqtt_tls.py"])
    assert ("tinymqtt_port.py", "ports/esp32/tinymqtt_port.py", 3) in m.frozen
    assert {opt for _, _, opt in m.frozen} == {3}, "-O3, as deploy compiles for boards"
    m = Manifest(port="picow", opt=0)
    assert "tinymqtt_port.py" in m.run() and {opt for _, _, opt in m.frozen} == {0}
