# Short error text for boards (boards.toml `short_errors`): before mpy-cross, the message argument of every
# `raise` in the library, and of every error it builds to hand on (a call of an errors.py class), becomes the
# packet its text names ("PUBLISH"), or else the number of that message in the library's table of messages, a
# small int (`python -m tools.deploy.shorten` prints the table: number, module, line, the full text). A small
# int costs a board nothing, a string its bytes twice (flash and the heap it is interned in), and a number below
# 48 one byte of code where a line number takes three: the modules of profile mqtt311 are numbered first. The
# reason code, the exception class (its side: local or remote) and every other argument stay; line numbers stay
# exact. The source itself never changes: this is a build step, like -O dropping asserts, and CPython keeps the
# readable text. A message outside the library's files (a snippet) becomes its line number.
import ast
import os
import re
import sys

LIB = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "lib", "tinymqtt")
# The order the modules' messages are numbered in: the core every board loads first (its numbers take one byte),
# MQTT 5 last; a module not named here comes after these, by name.
ORDER = ("errors", "wire", "topic", "checks", "packets", "inflight", "retry", "session", "driver", "client", "app_acks", "aio",
         "session5", "aliases", "props")

PACKETS = re.compile(r"\b(CONNECT|CONNACK|PUBLISH|PUBACK|PUBREC|PUBREL|PUBCOMP|SUBSCRIBE|SUBACK|UNSUBSCRIBE|UNSUBACK|"
                     r"PINGREQ|PINGRESP|DISCONNECT|AUTH)\b")


def _is_message(node):
    """A str literal, a "..." % args, or an f-string: the text of an error."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        return _is_message(node.left)
    return isinstance(node, ast.JoinedStr)


def _offsets(text):
    starts, pos = [0], 0
    for line in text.splitlines(True):
        pos += len(line.encode())
        starts.append(pos)
    return starts


# The library's error classes (errors.py) and its helper that makes one: a call to one of these anywhere builds an
# error whose message is text, also when it is not raised where it is made (`self._close(ConnectionLost(...))`).
ERRORS = {"MQTTError", "RemoteProtocolError", "LocalProtocolError", "ConnectError", "ConnectionLost",
          "NotDelivered", "protocol_error"}


def _error_call(node):
    """A raise of a call, or a call of one of the library's error classes wherever it stands: its arguments
    hold the message."""
    if isinstance(node, ast.Raise):
        return node.exc if isinstance(node.exc, ast.Call) else None
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ERRORS:
        return node
    return None


def _messages(text):
    """[(message node, its text, the packet it names or None)] of every error call's message, in source order."""
    spans = []
    for node in ast.walk(ast.parse(text)):
        # Only the error call's own arguments: a string inside a nested call (getattr(e, "reason")) is code.
        call = _error_call(node)
        if call is not None:
            for arg in call.args:
                if _is_message(arg) and arg not in spans:  # (raise E(...): the raise and the call both name it)
                    spans.append(arg)
    out = []
    for arg in sorted(spans, key=lambda a: (a.lineno, a.col_offset)):
        seg = ast.get_source_segment(text, arg)
        packet = PACKETS.search(seg)
        out.append((arg, seg, packet.group(1) if packet else None))
    return out


_TABLE = {}


def table():
    """[(number, module, line, text)]: every library message that names no packet, numbered from 1 in ORDER."""
    if not _TABLE:
        names = [f[:-3] for f in os.listdir(LIB) if f.endswith(".py") and not f.startswith(("cli", "__"))]
        names = [m for m in ORDER if m in names] + sorted(m for m in names if m not in ORDER)
        rows = []
        for mod in names:
            with open(os.path.join(LIB, mod + ".py"), encoding="utf-8") as f:
                for arg, seg, packet in _messages(f.read()):
                    if packet is None:
                        rows.append((len(rows) + 1, mod, arg.lineno, arg.col_offset, seg))
        _TABLE["rows"] = rows
    return [(n, mod, line, seg) for n, mod, line, _, seg in _TABLE["rows"]]


def shorten(text, name):
    """The source with each raise's message replaced by its packet name or its number in table() (same line
    count); name: the module's, e.g. "packets" (a message table() does not hold at that place: its line)."""
    table()
    # (by place and text: a text that is not the library's file gets no other message's number)
    number = {(line, col, seg): n for n, mod, line, col, seg in _TABLE["rows"] if mod == name}
    data = text.encode()
    starts = _offsets(text)
    for arg, seg, packet in reversed(_messages(text)):  # from the end: offsets hold
        a = starts[arg.lineno - 1] + arg.col_offset
        b = starts[arg.end_lineno - 1] + arg.end_col_offset
        place = '"%s"' % packet if packet else "%d" % number.get((arg.lineno, arg.col_offset, seg), arg.lineno)
        short = (place + "\n" * (arg.end_lineno - arg.lineno)).encode()
        data = data[:a] + short + data[b:]
    return data.decode()


def main(out=sys.stdout):
    """Prints the table a board's short error reads from: `17 (0x81)` is message 17 here."""
    for n, mod, line, seg in table():
        print("%3d  %s.py:%d  %s" % (n, mod, line, " ".join(seg.split())), file=out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
