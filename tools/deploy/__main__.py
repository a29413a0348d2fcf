# python -m tools.deploy --board BOARD [--profile NAME] --app APP.py (--device PORT | --target DIR | --dry-run) [options]
# Errors are one line on stderr and exit code 1; secrets never reach the output.
import argparse
import ast
import os
import sys

from tools import boards as boards_mod
from tools.deploy import (DeployError, DeviceError, build, config_values, deploy_device, load_secrets,
                          plan_text, write_target)


def _value(text):
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def parse_args(argv):
    ap = argparse.ArgumentParser(prog="python -m tools.deploy", description="Compile and copy an app to a board.")
    ap.add_argument("--board", required=True, help="a board in boards.toml")
    ap.add_argument("--profile", default=None, help="a [profile.NAME] file set in boards.toml (default: full)")
    ap.add_argument("--app", required=True, help="the program to run (becomes main.py's module)")
    where = ap.add_mutually_exclusive_group()
    where.add_argument("--device", help="serial port for mpremote (default: the first one mpremote finds)")
    where.add_argument("--target", metavar="DIR", help="write the board's file tree into DIR instead")
    ap.add_argument("--dry-run", action="store_true", help="print the plan and touch nothing")
    ap.add_argument("--broker", default="127.0.0.1", metavar="HOST[:PORT]", help="written into config.py")
    ap.add_argument("--client-id", help="MQTT client id (default: stable per board and device)")
    ap.add_argument("--ca", metavar="FILE", help="CA certificate for TLS: copied to the board, config.CA_FILE")
    ap.add_argument("--file", action="append", default=[], metavar="LOCAL[:DEST]", help="another file to copy")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="another config.py value")
    ap.add_argument("--secrets", metavar="FILE", help="secrets file (default: secrets.toml, git-ignored)")
    ap.add_argument("--source", action="store_true", help="copy .py sources instead of compiling to .mpy")
    ap.add_argument("--romfs", action="store_true", help="library and port into the device's ROMFS partition "
                    "(MicroPython 1.25+: bytecode runs from flash), a plain copy where it has none")
    ap.add_argument("--follow", action="store_true", help="soft-reset, run main.py and show its output")
    ap.add_argument("--no-start", action="store_true", help="leave the board stopped after copying")
    ap.add_argument("--boards", default=boards_mod.DEFAULT_PATH, help=argparse.SUPPRESS)
    return ap.parse_args(argv)


def main(argv=None, runner=None, env=None, out=None, err=None):
    out, err = out or sys.stdout, err or sys.stderr
    a = parse_args(argv)
    try:
        board = boards_mod.get(a.board, a.boards, a.profile)
        if a.romfs and a.target:
            raise DeployError("--romfs writes a device's ROMFS partition: use it with --device, not --target")
        host, _, port = a.broker.partition(":")
        if port and not port.isdigit():
            raise DeployError("--broker %s: expected HOST or HOST:PORT" % a.broker)
        extra = {}
        for item in a.set:
            key, eq, value = item.partition("=")
            if not eq or not key.isidentifier() or not key.isupper():
                raise DeployError("--set %s: expected KEY=VALUE with an UPPER_CASE key" % key)
            extra[key] = _value(value)
        files = []
        for item in a.file:
            local, _, dest = item.partition(":")
            files.append((local, dest or os.path.basename(local)))
        if a.ca:
            dest = "ca" + (os.path.splitext(a.ca)[1] or ".pem")
            files.append((a.ca, dest))
            extra.setdefault("CA_FILE", dest)
        for local, _ in files:
            if not os.path.isfile(local):
                raise DeployError("no file at %s" % local)
        secrets = load_secrets(env, a.secrets)
        if board.wlan and not (secrets.get("WIFI_SSID")):
            msg = ("no WiFi credentials for %s: set TINYMQTT_WIFI_SSID and TINYMQTT_WIFI_PASSWORD, or write "
                   "secrets.toml ([wifi] ssid, password)" % board.name)
            if a.target is None and not a.dry_run:
                raise DeployError(msg)
            print("warning: " + msg, file=err)
        if not board.wlan:
            secrets = {k: v for k, v in secrets.items() if not k.startswith("WIFI_")}
        seed = os.path.abspath(a.target) if a.target else (a.device or "auto")
        values = config_values(board, host or "127.0.0.1", int(port or 1883), a.client_id, secrets, extra, seed)
        tree = build(board, a.app, values, a.source, files)
        where = ("folder %s" % a.target) if a.target else ("device %s" % (a.device or "auto"))
        if a.dry_run:
            print(plan_text(board, tree, values, where), file=out)
            print("dry run: nothing written" + ("" if a.target else "; on the device only changed files would be "
                                                "copied, then main.py started"), file=out)
            return 0
        if a.target:
            write_target(tree, a.target, err)
            print("%s: wrote %d files (%d B) for %s, profile %s" % (
                a.target, len(tree), sum(len(f.data) for f in tree), board.name, board.profile), file=out)
            return 0
        deploy_device(board, tree, a.device, runner, a.follow, not a.no_start, out, err, romfs=a.romfs)
        return 0
    except (DeployError, DeviceError, boards_mod.BoardError) as e:
        print("error: %s" % e, file=err)
        return 1


if __name__ == "__main__":
    sys.exit(main())
