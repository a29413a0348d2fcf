# `tinymqtt pub|sub ...` (also `python -m tinymqtt_cli`): mosquitto_pub / mosquitto_sub with the same flags, on
# the blocking client (CPython only). This file dispatches and turns every failure into one line on stderr and
# mosquitto's exit status: 1 for a command line mosquitto refuses (in its words) and a connection that cannot be
# opened, the CONNACK code for a refused connection, 7 for a connection lost (mosquitto's "The connection was
# lost"), 8 for a TLS failure (a certificate that does not verify, a host name it does not name), 27 for -W, 1 for
# the rest. Credentials are never printed: not in errors, not in debug output.
import ssl
import sys

from tinymqtt.errors import ConnectError, ConnectionLost, MQTTError

USAGE = """usage: tinymqtt pub|sub [options]
  tinymqtt pub   publish, with mosquitto_pub's flags (tinymqtt pub --help)
  tinymqtt sub   subscribe, with mosquitto_sub's flags (tinymqtt sub --help)
The differences from mosquitto's clients are listed in docs/cli.md."""

EXIT_LOST = 7  # MOSQ_ERR_CONN_LOST: what mosquitto_pub exits with when the connection is lost
EXIT_TLS = 8  # MOSQ_ERR_TLS


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv in (["--help"], ["help"]):
        print(USAGE)
        return 0
    if not argv or argv[0] not in ("pub", "sub"):
        print("Error: %s." % ("give a command: pub or sub" if not argv else "unknown command %r (pub or sub; "
                              "tinymqtt --help)" % argv[0]), file=sys.stderr)
        return 1
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
    except cli_args.UsageError as e:
        print(e if str(e).startswith("Error") else "Error: %s" % e, file=sys.stderr)
        return 1
    except ssl.SSLError as e:  # (also ssl.SSLCertVerificationError: a wrong CA, host name or date)
        why = getattr(e, "verify_message", None)
        print("Error: A TLS error occurred: %s" % ("certificate verify failed: " + why if why else e), file=sys.stderr)
        return EXIT_TLS
    except ConnectionLost as e:
        print("Error: %s" % e, file=sys.stderr)
        return EXIT_LOST
    except (MQTTError, OSError) as e:
        print("Error: %s" % e, file=sys.stderr)
        return 1
