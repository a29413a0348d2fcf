# tools/deploy: the file tree each board gets (--target), the plan (--dry-run), secrets that never reach the
# output, and the device path through a fake mpremote runner: only changed files are copied, stale files that
# would shadow an .mpy are removed, and a board below the version floor, on the wrong platform, without
# enough flash or not there at all stops the deploy with a one-line error. Every board's file set is
# compiled with its mpy-cross flags and the sizes are recorded.
import contextlib
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import types

import pytest

import tools.deploy as deploy
from tests.support import report
from tools import boards as boards_mod
from tools.deploy.__main__ import main

REPO = boards_mod.REPO
BOARDS = boards_mod.load()
SSID, PASSWORD = "Net-Of-Secrets-42", "hunter2-do-not-print"
WIFI = {"TINYMQTT_WIFI_SSID": SSID, "TINYMQTT_WIFI_PASSWORD": PASSWORD}


def run(*argv, env=None, runner=None):
    """python -m tools.deploy ARGV in-process, with its own environment (and no secrets.toml of the
    developer's unless --secrets names one); returns (exit code, stdout, stderr)."""
    argv = list(argv) if "--secrets" in argv else list(argv) + ["--secrets", os.devnull]
    out, err = io.StringIO(), io.StringIO()
    rc = main(argv, runner=runner, env=WIFI if env is None else env, out=out, err=err)
    return rc, out.getvalue(), err.getvalue()


def tree_of(root):
    return sorted(os.path.relpath(os.path.join(d, f), root).replace(os.sep, "/")
                  for d, _, fs in os.walk(root) for f in fs)


def load_config(path):
    ns = {}
    exec(open(path).read(), ns)
    return ns


@pytest.fixture(autouse=True)
def library_once(request, library_built_once):
    """Each deploy here builds a board's library, seconds on esp32 and picow; the same inputs give the same files,
    so each board, profile and mode builds it once (tests/conftest.py) and the other deploys reuse it. Everything
    else (app, port, config, what goes where) is built each time. The tests that count mpy-cross's runs (FRESH)
    build the library for real."""
    library_built_once.fresh = request.function in FRESH


# ------------------------------------------------------------------------------------------ --target

@pytest.mark.parametrize("board", sorted(BOARDS))
def test_target_writes_the_board_tree_with_mpy_files(board, tmp_path, monkeypatch):
    calls = []
    real_run = subprocess.run

    def spy(cmd, *a, **kw):
        calls.append(cmd)
        return real_run(cmd, *a, **kw)

    monkeypatch.setattr(deploy.subprocess, "run", spy)
    b = BOARDS[board]
    rc, out, err = run("--board", board, "--app", "examples/telemetry.py", "--target", str(tmp_path),
                       "--broker", "10.1.2.3:1884", "--client-id", "dev-1")
    assert rc == 0, err
    files = tree_of(tmp_path)
    lib = ["lib/" + m[:-3] + ".mpy" for m in b.lib if m not in b.bundle]  # (the bundle: tinymqtt/__init__)
    support = ["lib/" + os.path.basename(p)[:-3] + ".mpy" for p in b.support]
    expected = lib + support + ["lib/tinymqtt_port.mpy", "telemetry.mpy", "main.py", "config.py", ".tinymqtt.json"]
    assert files == sorted(expected)
    assert not any(f.startswith("lib/") and f.endswith(".py") for f in files), "the library is compiled"
    for f in files:
        if f.endswith(".mpy"):
            assert (tmp_path / f).read_bytes()[:2] == b"M\x06", "%s is an mpy v6 file" % f
    # mpy-cross ran once per module with exactly the board's flags (short errors: -O3 for the library only), and
    # the source name a traceback shows
    compiled = [c for c in calls if "-o" in c]
    assert len(compiled) == len(expected) - 3
    for c in compiled:
        o3 = ["-O3"] if b.short_errors and "/tinymqtt/" in c[-1] else []  # (the library's source name: its module)
        assert c[1:c.index("-s")] == b.mpy_cross + o3, c
    assert ["-s", "client" if b.short_errors else "tinymqtt/client.py"] == next(
        c for c in compiled if c[-1].endswith("client.py"))[-5:-3]
    # main.py stays source (a board runs it as such) and imports the compiled app
    assert (tmp_path / "main.py").read_text().splitlines()[-1] == "import telemetry"
    cfg = load_config(tmp_path / "config.py")
    assert (cfg["BOARD"], cfg["BROKER_HOST"], cfg["BROKER_PORT"], cfg["CLIENT_ID"]) == (board, "10.1.2.3", 1884, "dev-1")
    assert cfg["SESSION"] == deploy.session_for(b)
    for k, v in b.config.items():
        assert cfg[k] == v
    if b.wlan:
        assert (cfg["WIFI_SSID"], cfg["WIFI_PASSWORD"]) == (SSID, PASSWORD), "the board needs them"
    else:
        assert "WIFI_SSID" not in cfg and "WIFI_PASSWORD" not in cfg, "a board without WLAN gets no WiFi secrets"
    manifest = json.loads((tmp_path / ".tinymqtt.json").read_text())
    for f in files[1:] if files[0] == ".tinymqtt.json" else files:
        if f != ".tinymqtt.json":
            data = (tmp_path / f).read_bytes()
            assert manifest[f] == [len(data), hashlib.sha256(data).hexdigest()]
    assert SSID not in out + err and PASSWORD not in out + err


FRESH = {test_target_writes_the_board_tree_with_mpy_files}


@pytest.mark.parametrize("board", sorted(BOARDS))
def test_every_board_file_set_compiles_with_its_flags(board, tmp_path):
    """The board's own modules plus every example; records the .mpy sizes of what goes to the board."""
    b = BOARDS[board]
    values = deploy.config_values(b, client_id="x")
    tree = deploy.build(b, "examples/telemetry.py", values)
    groups = deploy.sizes(tree)
    report.record("mpy %s: library (B)" % board, groups["lib"])
    report.record("mpy %s: port (B)" % board, groups["port"])
    report.record("mpy %s: library + port (B)" % board, groups["lib"] + groups["port"])
    assert groups["lib"] > 10000 and groups["port"] > 500
    for app in sorted(os.listdir(os.path.join(REPO, "examples"))):
        if app.endswith(".py"):
            t = deploy.build(b, os.path.join("examples", app), values)
            assert any(f.dest == app[:-3] + ".mpy" for f in t)
    if b.arch:  # the architecture flag is real: native code compiles for it and says so in the header
        src = tmp_path / "nat.py"
        src.write_text("import micropython\n@micropython.native\ndef f(x):\n    return x + 1\n")
        data = deploy.compile_mpy(str(src), "nat.py", b.mpy_cross, str(tmp_path))
        assert data[:2] == b"M\x06" and data[2] >> 2 != 0, "native code carries the %s arch" % b.arch


def test_target_removes_what_an_earlier_deploy_left(tmp_path):
    rc, _, err = run("--board", "sim", "--app", "examples/rpc.py", "--target", str(tmp_path), "--source")
    assert rc == 0, err
    assert (tmp_path / "lib/tinymqtt/client.py").exists()
    (tmp_path / "mine.txt").write_text("not the deploy's")
    rc, _, err = run("--board", "sim", "--app", "examples/command.py", "--target", str(tmp_path))
    assert rc == 0, err
    files = tree_of(tmp_path)
    assert "lib/tinymqtt/client.py" not in files, "a stale .py would shadow client.mpy"
    assert "rpc.py" not in files and "command.mpy" in files and "mine.txt" in files


def test_source_mode_copies_py_files(tmp_path):
    rc, _, err = run("--board", "linux", "--app", "examples/rpc.py", "--target", str(tmp_path), "--source")
    assert rc == 0, err
    assert (tmp_path / "lib/tinymqtt/client.py").read_bytes() == open(os.path.join(REPO, "lib/tinymqtt/client.py"), "rb").read()
    assert (tmp_path / "lib/tinymqtt_port.py").read_bytes() == open(os.path.join(REPO, "ports/linux/tinymqtt_port.py"), "rb").read()


# ------------------------------------------------------------------------------------------ --dry-run

def test_dry_run_prints_the_plan_and_touches_nothing(tmp_path):
    calls = []
    target = tmp_path / "out"
    rc, out, err = run("--board", "esp32", "--app", "examples/command.py", "--dry-run", "--target", str(target),
                       runner=lambda *a, **k: calls.append(a))
    assert rc == 0, err
    assert not target.exists() and calls == []
    assert out.startswith("deploy to esp32 (folder %s): MicroPython >= 1.27.0, mpy-cross -march=xtensawin" % target)
    for dest in ("lib/tinymqtt/client.mpy", "lib/tinymqtt_port.mpy", "lib/tinymqtt_board.mpy", "command.mpy",
                 "main.py", "config.py"):
        assert "\n  %s " % dest in out
    assert "ports/esp32/tinymqtt_port.py" in out and "ports/common/tinymqtt_board.py" in out
    assert "WIFI_SSID='********'" in out and "WIFI_PASSWORD='********'" in out and "LED_PIN=2" in out
    assert "dry run: nothing written" in out
    rc, out, err = run("--board", "picow", "--app", "examples/command.py", "--dry-run", runner=lambda *a, **k: calls.append(a))
    assert rc == 0 and calls == [] and "device auto" in out and "changed files" in out


# ------------------------------------------------------------------------------------------ secrets

def test_secrets_come_from_env_or_secrets_toml_and_are_never_printed(tmp_path, capsys):
    secrets = tmp_path / "secrets.toml"
    secrets.write_text('[wifi]\nssid = "%s"\npassword = "%s"\n[broker]\nusername = "u"\npassword = "broker-pw-xyz"\n'
                       % (SSID, PASSWORD))
    outputs = []
    for argv in (["--dry-run"], ["--target", str(tmp_path / "t")]):
        rc, out, err = run("--board", "esp32", "--app", "examples/telemetry.py", "--secrets", str(secrets), *argv, env={})
        assert rc == 0, err
        outputs.append(out + err)
    cfg = load_config(tmp_path / "t" / "config.py")
    assert (cfg["WIFI_SSID"], cfg["WIFI_PASSWORD"], cfg["MQTT_PASSWORD"]) == (SSID, PASSWORD, "broker-pw-xyz")
    # the environment wins over the file
    rc, out, err = run("--board", "esp32", "--app", "examples/telemetry.py", "--secrets", str(secrets), "--target",
                       str(tmp_path / "t2"), env={"TINYMQTT_WIFI_PASSWORD": "env-pw-123"})
    assert load_config(tmp_path / "t2" / "config.py")["WIFI_PASSWORD"] == "env-pw-123"
    outputs.append(out + err)
    # a device deploy, and one that fails: the runner's arguments never carry them either (ps shows argv)
    fake = FakeMpremote(tmp_path / "board")
    rc, out, err = run("--board", "esp32", "--app", "examples/telemetry.py", "--device", "/dev/ttyUSB0",
                       "--secrets", str(secrets), runner=fake, env={})
    assert rc == 0, err
    outputs.append(out + err + repr(fake.calls))
    rc, out, err = run("--board", "esp32", "--app", "examples/telemetry.py", "--device", "/dev/ttyUSB0",
                       "--secrets", str(secrets), "--set", "WIFI_PASSWORD=%s" % PASSWORD,
                       runner=FakeMpremote(tmp_path / "b2", version=(1, 20, 0)), env={})
    assert rc == 1
    outputs.append(out + err)
    bad = tmp_path / "bad.toml"
    bad.write_text('[wifi]\nssid = "%s\npassword = "%s"\n' % (SSID, PASSWORD))
    rc, out, err = run("--board", "esp32", "--app", "examples/telemetry.py", "--dry-run", "--secrets", str(bad), env={})
    assert rc == 1 and "not valid TOML" in err
    outputs.append(out + err)
    captured = capsys.readouterr()
    outputs.append(captured.out + captured.err)
    for text in outputs:
        for secret in (SSID, PASSWORD, "broker-pw-xyz"):
            assert secret not in text
    assert "********" in outputs[0]


def test_a_wlan_board_needs_credentials_for_a_device(tmp_path):
    rc, out, err = run("--board", "picow", "--app", "examples/telemetry.py", "--device", "/dev/ttyACM0", env={},
                       runner=FakeMpremote(tmp_path, platform="rp2"))
    assert rc == 1
    assert err.strip() == ("error: no WiFi credentials for picow: set TINYMQTT_WIFI_SSID and TINYMQTT_WIFI_PASSWORD, "
                           "or write secrets.toml ([wifi] ssid, password)")
    rc, out, err = run("--board", "picow", "--app", "examples/telemetry.py", "--target", str(tmp_path / "t"), env={})
    assert rc == 0 and "warning: no WiFi credentials" in err


# ------------------------------------------------------------------------------------------ device (fake mpremote)

class FakeMpremote:
    """A MicroPython board behind mpremote: a folder is its filesystem. The deploy's own probe and prepare
    code really runs (under CPython, against the folder, with the board's version, platform and free space)."""

    def __init__(self, root, version=(1, 27, 0), platform="esp32", free=2_000_000, devices=("/dev/ttyUSB0",),
                 hashlib=True, fail_cp=None, romfs=None):
        self.root = str(root)
        self.romfs = romfs  # bytes in its ROMFS partition; None: firmware without ROMFS
        os.makedirs(self.root, exist_ok=True)
        self.version, self.platform, self.free = version, platform, free
        self.devices, self.hashlib, self.fail_cp = devices, hashlib, fail_cp
        self.calls, self.copied, self.started = [], [], []

    def __call__(self, args, follow=False):
        self.calls.append((list(args), follow))
        if args == ["devs"]:
            return 0, "".join("%s 0001 10c4:ea60 Silicon Labs CP2102\n" % d for d in self.devices)
        assert args[0] == "connect"
        if args[1] not in self.devices:
            return 1, "mpremote: failed to access %s (it may be in use by another program)\n" % args[1]
        rest = args[2:]
        if rest[0] == "resume":
            rest = rest[1:]
        if rest[0] == "exec":
            return 0, self._exec(rest[1])
        if rest[:2] == ["fs", "cp"]:  # one or more copies chained with "+": mpremote stops at the first failure
            out = ""
            for i in range(0, len(rest), 5):
                assert rest[i:i + 2] == ["fs", "cp"] and rest[i + 4:i + 5] in ([], ["+"]), rest
                dest = rest[i + 3][1:]
                if dest == self.fail_cp:
                    return 1, out + "cp %s :%s\nOSError: [Errno 28] ENOSPC\n" % (rest[i + 2], dest)
                shutil.copy(rest[i + 2], os.path.join(self.root, dest))
                self.copied.append(dest)
                out += "cp %s :%s\n" % (rest[i + 2], dest)
            return 0, out
        if rest[:2] == ["romfs", "query"]:
            if self.romfs is None:
                return 0, "ROMFS is not enabled on this device\n"
            return 0, "ROMFS0 partition has size %d bytes (%d blocks of 4096 bytes each)\n" % (self.romfs, self.romfs // 4096)
        if rest[:3] == ["romfs", "--no-mpy", "deploy"]:
            shutil.rmtree(os.path.join(self.root, "rom"), ignore_errors=True)
            shutil.copytree(rest[3], os.path.join(self.root, "rom"))
            self.copied.append("ROMFS")
            return 0, "Image size is %d bytes\nROMFS image deployed\n" % sum(len(open(os.path.join(d, f), "rb").read())
                                                                         for d, _, fs in os.walk(rest[3]) for f in fs)
        if rest[0] == "soft-reset":
            self.started.append((rest[1:], follow))
            return 0, ""
        raise AssertionError("unexpected mpremote command %r" % args)

    def _exec(self, code):
        code = code.replace('ROOT = ""', "ROOT = %r" % self.root, 1)
        if not self.hashlib:
            code = code.replace("import hashlib, binascii", "raise ImportError")
        buf = io.StringIO()
        saved = sys.implementation, sys.platform, os.statvfs
        sys.implementation = types.SimpleNamespace(name="micropython", version=self.version + ("",))
        sys.platform = self.platform
        os.statvfs = lambda p: (4096, 4096, 512, self.free // 4096, self.free // 4096, 0, 0, 0, 0, 255)
        try:
            with contextlib.redirect_stdout(buf):
                exec(code, {"__name__": "__board__"})
        finally:
            sys.implementation, sys.platform, os.statvfs = saved
        return buf.getvalue()

    def files(self):
        return tree_of(self.root)


def device_deploy(fake, *extra, board="esp32", app="examples/telemetry.py", device="/dev/ttyUSB0"):
    argv = ["--board", board, "--app", app] + (["--device", device] if device else []) + list(extra)
    return run(*argv, runner=fake)


def test_device_first_deploy_copies_everything_then_only_changes(tmp_path):
    fake = FakeMpremote(tmp_path / "board")
    rc, out, err = device_deploy(fake)
    assert rc == 0, err
    want = tree_of_target(tmp_path / "want", "--board", "esp32", "--app", "examples/telemetry.py")
    assert fake.files() == want, "the board holds what --target writes"
    assert len(fake.copied) == len(want) and fake.copied[-1] == ".tinymqtt.json"
    assert "/dev/ttyUSB0: MicroPython 1.27.0 on esp32; %d of %d files changed" % (len(want) - 1, len(want) - 1) in out
    assert err.count("\n") == len(want) and "[########################] %d/%d .tinymqtt.json" % (len(want), len(want)) in err
    first_cmd = fake.calls[1][0]
    assert first_cmd[:3] == ["connect", "/dev/ttyUSB0", "exec"], "the probe connects without resume: the app stops"
    assert fake.started == [(["exec", "--no-follow", "import main"], False)], "soft reset, main.py runs"

    fake.copied.clear()
    rc, out, err = device_deploy(fake)
    assert rc == 0 and fake.copied == [".tinymqtt.json"], "nothing changed, nothing copied"
    assert "0 of %d files changed" % (len(want) - 1) in out

    fake.copied.clear()
    rc, out, err = device_deploy(fake, "--set", "PERIOD_MS=1000")
    assert rc == 0 and fake.copied == ["config.py", ".tinymqtt.json"]

    fake.copied.clear()
    rc, out, err = device_deploy(fake, "--set", "PERIOD_MS=1000", app="examples/command.py")
    assert rc == 0 and fake.copied == ["command.mpy", "main.py", ".tinymqtt.json"]
    assert "telemetry.mpy" not in fake.files() and "removing 1 stale" in out


def test_device_romfs_holds_the_library_where_the_firmware_has_one(tmp_path):
    fake = FakeMpremote(tmp_path / "board", romfs=256 * 1024)
    rc, out, err = device_deploy(fake, "--romfs", "--profile", "mqtt311", app="examples/sensor.py")
    assert rc == 0, err
    files = fake.files()
    rom = [f for f in files if f.startswith("rom/")]
    assert rom and all(f.startswith("rom/lib/") for f in rom) and not [f for f in files if f.startswith("lib/")]
    assert "rom/lib/tinymqtt/__init__.mpy" in rom and "rom/lib/tinymqtt_port.mpy" in rom  # (the bundle)
    assert fake.copied[0] == "ROMFS" and "library and port go to the ROMFS partition" in out
    assert {"main.py", "config.py", "sensor.mpy"} <= set(files), "the app and its settings stay on the filesystem"
    fake.copied.clear()
    assert device_deploy(fake, "--romfs", "--profile", "mqtt311", app="examples/sensor.py")[0] == 0
    assert fake.copied == [".tinymqtt.json"], "an unchanged library leaves the image alone"
    fake.copied.clear()  # back to a plain copy: the old image would shadow /lib, so it is emptied
    assert device_deploy(fake, "--profile", "mqtt311", app="examples/sensor.py")[0] == 0
    assert fake.copied[0] == "ROMFS" and not [f for f in fake.files() if f.startswith("rom/")]
    assert "lib/tinymqtt/__init__.mpy" in fake.files()


@pytest.mark.parametrize("romfs, why", [(None, "no ROMFS partition"), (8192, "smaller than")])
def test_device_romfs_falls_back_to_a_plain_copy(tmp_path, romfs, why):
    fake = FakeMpremote(tmp_path / "board", romfs=romfs)
    rc, out, err = device_deploy(fake, "--romfs")
    assert rc == 0, err
    assert why in out and "copying the files instead" in out and "ROMFS" not in fake.copied
    assert "lib/tinymqtt/client.mpy" in fake.files()
    rc, out, err = run("--board", "esp32", "--app", "examples/telemetry.py", "--romfs", "--target", str(tmp_path / "t"))
    assert rc == 1 and "use it with --device, not --target" in err


def tree_of_target(path, *argv):
    rc, _, err = run(*argv, "--target", str(path), "--client-id", "esp32-x")
    assert rc == 0, err
    return tree_of(path)


def test_device_without_hashlib_trusts_the_manifest(tmp_path):
    fake = FakeMpremote(tmp_path, hashlib=False)
    assert device_deploy(fake)[0] == 0
    fake.copied.clear()
    assert device_deploy(fake)[0] == 0 and fake.copied == [".tinymqtt.json"]
    (tmp_path / "lib" / "tinymqtt" / "client.mpy").write_bytes(b"M\x06 damaged")  # a size the manifest does not know
    fake.copied.clear()
    assert device_deploy(fake)[0] == 0 and fake.copied == ["lib/tinymqtt/client.mpy", ".tinymqtt.json"]


def test_device_removes_py_files_that_would_shadow_the_mpy(tmp_path):
    fake = FakeMpremote(tmp_path)
    assert device_deploy(fake, "--source")[0] == 0
    assert "lib/tinymqtt/client.py" in fake.files()
    os.remove(tmp_path / ".tinymqtt.json")  # as if copied by hand: not in any manifest
    rc, out, err = device_deploy(fake)
    assert rc == 0, err
    files = fake.files()
    assert "lib/tinymqtt/client.py" not in files and "lib/tinymqtt/client.mpy" in files
    assert not [f for f in files if f.startswith("lib/") and f.endswith(".py")]


def test_device_follow_streams_main_py(tmp_path):
    fake = FakeMpremote(tmp_path)
    rc, out, err = device_deploy(fake, "--follow")
    assert rc == 0 and fake.started == [(["exec", "import main"], True)]
    assert "running main.py (Ctrl-C stops following)" in out
    fake = FakeMpremote(tmp_path / "b")
    assert device_deploy(fake, "--no-start")[0] == 0 and fake.started == []


@pytest.mark.parametrize("fake_kw, extra, board, device, message", [
    (dict(version=(1, 22, 0)), [], "esp32", "/dev/ttyUSB0",
     "error: /dev/ttyUSB0 runs MicroPython 1.22.0, below the 1.27.0 that board esp32 needs: flash a newer firmware"),
    (dict(platform="rp2"), [], "esp32", "/dev/ttyUSB0",
     "error: /dev/ttyUSB0 is a 'rp2' board, not esp32 (sys.platform 'esp32'): pick the right --board"),
    (dict(free=40_000), [], "esp32", "/dev/ttyUSB0",
     "error: not enough flash on /dev/ttyUSB0: the new files need "),
    (dict(devices=()), [], "esp32", None,
     "error: no device found: mpremote devs lists no serial device (plug the board in, or pass --device PORT)"),
    (dict(devices=("/dev/ttyACM0",)), [], "esp32", "/dev/ttyUSB9",
     "error: no device found at /dev/ttyUSB9 (mpremote devs lists /dev/ttyACM0)"),
    (dict(fail_cp="lib/tinymqtt/client.mpy"), [], "esp32", "/dev/ttyUSB0",
     "error: copying lib/tinymqtt/client.mpy failed on /dev/ttyUSB0: OSError: [Errno 28] ENOSPC"),
])
def test_device_errors_are_one_line(tmp_path, fake_kw, extra, board, device, message):
    fake = FakeMpremote(tmp_path, **fake_kw)
    rc, out, err = device_deploy(fake, *extra, board=board, device=device)
    assert rc == 1
    errors = [l for l in err.splitlines() if not l.startswith("[")]  # progress lines may come first
    assert len(errors) == 1 and errors[0].startswith(message), err
    assert fake.started == []
    if "copying" not in message:
        assert fake.copied == [] and err.count("\n") == 1, "nothing is written after a failed check"


def test_auto_device_takes_the_one_mpremote_lists(tmp_path):
    fake = FakeMpremote(tmp_path, devices=("/dev/ttyACM0",), platform="rp2")
    rc, out, err = device_deploy(fake, board="picow", device=None)
    assert rc == 0, err
    assert all(c[0][1] == "/dev/ttyACM0" for c in fake.calls[1:])


def test_cli_entry_point_runs():
    env = dict(os.environ, PYTHONPATH=REPO, TINYMQTT_WIFI_SSID=SSID, TINYMQTT_WIFI_PASSWORD=PASSWORD)
    p = subprocess.run([sys.executable, "-m", "tools.deploy", "--board", "esp32", "--app", "examples/rpc.py",
                        "--dry-run", "--secrets", os.devnull], cwd=REPO, env=env, capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0, p.stderr
    assert "rpc.mpy" in p.stdout and PASSWORD not in p.stdout + p.stderr and SSID not in p.stdout + p.stderr
    p = subprocess.run([sys.executable, "-m", "tools.deploy", "--board", "nope", "--app", "examples/rpc.py",
                        "--dry-run"], cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 1 and p.stderr.startswith("error: ") and "no board 'nope'" in p.stderr
