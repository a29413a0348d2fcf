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
    assert got == sorted(boards.profiles()[profile].lib + ["tinymqtt_port.py"])
    if not os.path.exists(MICROPYTHON):
        pytest.skip("no unix-port micropython")
    code = "import tinymqtt.client, tinymqtt_port, sys; print(sorted(m for m in sys.modules if 'tinymqtt' in m))"
    p = subprocess.run([MICROPYTHON, "-c", code], env={"MICROPYPATH": ".frozen:" + str(tmp_path / "lib")},
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stdout + p.stderr
    loaded = eval(p.stdout)
    assert "tinymqtt.aio" not in loaded and "tinymqtt.reasons" not in loaded


class Manifest:
    """MicroPython's manifest API as tools/manifestfile.py defines it (package, module, metadata, options),
    recording what would be frozen."""

    def __init__(self, **kwargs):
        self.kwargs, self.defaults, self.frozen = kwargs, {}, []

    def run(self):
        here = os.getcwd()
        os.chdir(REPO)  # manifestfile.py runs a manifest in its own folder
        try:
            opts = type("Options", (), {"defaults": lambda _, **kw: self.defaults.update(kw),
                                        "__getattr__": lambda _, k: self.kwargs.get(k, self.defaults.get(k))})()
            runpy.run_path("manifest.py", {"options": opts, "metadata": lambda **kw: None,
                                           "package": self.package, "module": self.module})
        finally:
            os.chdir(here)
        return sorted(self.frozen)

    def package(self, name, files, base_path="."):
        for f in files:
            assert os.path.isfile(os.path.join(base_path, name, f)), f
            self.frozen.append(name + "/" + f)

    def module(self, name, base_path="."):
        assert os.path.isfile(os.path.join(base_path, name)), (base_path, name)
        self.frozen.append(name)


def test_manifest_freezes_a_profile_and_a_port():
    assert Manifest().run() == sorted(boards.profiles()["full"].lib)
    assert Manifest(profile="mqtt311", port="esp32").run() == sorted(
        boards.profiles()["mqtt311"].lib + ["tinymqtt_port.py", "tinymqtt_board.py", "tinymqtt_stream.py", "tinymqtt_tls.py"])
