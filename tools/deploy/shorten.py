# Short error text for boards (boards.toml `short_errors`): before mpy-cross, the message argument of every
# `raise` in the library, and of every error it builds to hand on (a call of an errors.py class), becomes the
# packet its text names ("PUBLISH"), or else its line number, an int (the line where the full text stands). A
# small int costs a board nothing, a string its bytes twice (flash and the heap it is interned in). The reason
# code, the exception class (its side: local or remote) and every other argument stay; line numbers stay exact,
# so a traceback names the module and the line. The source itself never changes: this is a build step, like -O
# dropping asserts, and CPython keeps the readable text.
import ast
import re

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


def shorten(text, name):
    """The source with each raise's message replaced by its packet name or line (same line count); name: the
    module's, e.g. "packets" (kept for callers; the traceback names the module)."""
    tree = ast.parse(text)
    spans = []
    for node in ast.walk(tree):
        # Only the error call's own arguments: a string inside a nested call (getattr(e, "reason")) is code.
        call = _error_call(node)
        if call is not None:
            for arg in call.args:
                if _is_message(arg) and arg not in spans:  # (raise E(...): the raise and the call both name it)
                    spans.append(arg)
    data = text.encode()
    starts = _offsets(text)
    for arg in sorted(spans, key=lambda a: (a.lineno, a.col_offset), reverse=True):  # from the end: offsets hold
        a = starts[arg.lineno - 1] + arg.col_offset
        b = starts[arg.end_lineno - 1] + arg.end_col_offset
        packet = PACKETS.search(data[a:b].decode())
        place = '"%s"' % packet.group(1) if packet else "%d" % arg.lineno
        short = (place + "\n" * (arg.end_lineno - arg.lineno)).encode()
        data = data[:a] + short + data[b:]
    return data.decode()
