# Compiles out the hooks into optional modules that a build leaves out. A library module that calls into an
# optional module guards the call with its flag, `_MQTT5 = const(1)`, as `if _MQTT5 and ...:`; deploy writes
# `const(0)` where the board's file set lacks the module, and MicroPython's compiler drops every such block (it
# folds a const-false first operand of `and`). The sources, CPython and the --source tree keep every flag at 1 (a
# missing module: an ImportError, handled at run time). A profile stays a file set: the flags follow from it.
import re

# flag -> the module whose absence turns it off
FLAGS = {
    "_MQTT5": "tinymqtt/props.py",  # MQTT 5: session5, props, aliases travel together (boards.toml: full's bundle)
    "_APP_ACKS": "tinymqtt/app_acks.py",  # messages the application acknowledges itself
    "_RETRY": "tinymqtt/retry.py",  # the MQTT 3.x retry timer (retry_ms)
    "_HANDLERS": "tinymqtt/handlers.py",  # per-subscription handlers, subscribe(handler=...)
    "_STREAM": "tinymqtt/stream.py",  # streamed messages, subscribe(chunks=True) and max_stream_size
    "_GROW": "tinymqtt/grow.py",  # CPython's growing buffers: never on a board
}

# Off in every board build: checks of our own invariants (each outbound move has its row in inflight.py's table).
BOARD_OFF = ["_FLOW_CHECKS"]


def off(lib):
    """The flags a build whose library files are lib (paths under lib/) turns off."""
    return [flag for flag, module in FLAGS.items() if module not in lib]


def specialize(text, lib):
    """text with `FLAG = const(1)` written `const(0)` for each flag the file set lib turns off, and BOARD_OFF's."""
    for flag in off(lib) + BOARD_OFF:
        text = re.sub(r"^%s = const\(1\)" % flag, "%s = const(0)" % flag, text, flags=re.M)
    return text
