# `tinymqtt pub|sub ...` (also `python -m tinymqtt_cli`): mosquitto_pub / mosquitto_sub with the same flags, on
# the blocking client (CPython only). This file dispatches and turns every failure into one line on stderr
# and mosquitto's exit status: the CONNACK code for a refused connection, 27 for -W, 1 for the rest.
# Credentials are never printed: not in errors, not in debug output.
import sys

from tinymqtt.errors import ConnectError, MQTTError

USAGE = "usage: tinymqtt pub|sub [options]  (flags as mosquitto_pub / mosquitto_sub; --help for each)"


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] not in ("pub", "sub"):
        print(USAGE, file=sys.stderr)
        return 2
    from tinymqtt_cli import args as cli_args
    if argv[0] == "pub":
        from tinymqtt_cli.pub import run
    else:
        from tinymqtt_cli.sub import run
    from tinymqtt_cli.sub import TimedOut
    try:
        return run(argv[1:])
    except TimedOut:
        print("Timed out", file=sys.stderr)
        return 27
    except ConnectError as e:
        print("Error: %s" % e, file=sys.stderr)
        return getattr(e, "exit_code", 1)
    except (MQTTError, OSError, cli_args.UsageError) as e:
        print("Error: %s" % e, file=sys.stderr)
        return 1
