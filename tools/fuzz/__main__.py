# python -m tools.fuzz decoder|session [-runs=N] [other libFuzzer flags] [CORPUS_DIR ...]
# python -m tools.fuzz seeds            (re)writes the seed corpus in tools/fuzz/corpus/
# Coverage-guided fuzzing with atheris (pip install atheris==3.0.0) of the targets in tools/fuzz/__init__.py.
# Without corpus dirs it reads the repo's seeds and writes what it finds to a temporary dir, so the repo's
# corpus stays small; name a dir first to keep the new inputs there. A crash leaves crash-<sha1> in the current
# dir (or -artifact_prefix=DIR/) and exits non-zero; replay one with `python -m tools.fuzz TARGET crash-<sha1>`.
# `-runs N` is accepted as well as libFuzzer's own `-runs=N`.
import os
import sys
import tempfile

from tools.fuzz import TARGETS, CORPUS, write_seeds, _paths


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in TARGETS + ("seeds",):
        print("usage: python -m tools.fuzz decoder|session [-runs=N] [libFuzzer flags] [CORPUS_DIR ...]\n"
              "       python -m tools.fuzz seeds", file=sys.stderr)
        return 2
    target, rest = argv[0], argv[1:]
    if target == "seeds":
        print("seed corpus written to", write_seeds())
        return 0
    flags, paths, i = [], [], 0
    while i < len(rest):
        a = rest[i]
        if a.startswith("-") and "=" not in a and i + 1 < len(rest) and not rest[i + 1].startswith("-"):
            flags.append("%s=%s" % (a, rest[i + 1]))  # "-runs 5000" -> "-runs=5000"
            i += 2
            continue
        (flags if a.startswith("-") else paths).append(a)
        i += 1
    if not paths:
        paths = [tempfile.mkdtemp(prefix="tinymqtt-fuzz-%s-" % target), os.path.join(CORPUS, target)]
    try:
        import atheris
    except ImportError:
        print("atheris is not installed: pip install atheris==3.0.0", file=sys.stderr)
        return 2
    _paths()
    with atheris.instrument_imports(include=["tinymqtt"]):
        import tinymqtt.errors, tinymqtt.wire, tinymqtt.props, tinymqtt.packets  # noqa: E401,F401
        import tinymqtt.topic, tinymqtt.inflight, tinymqtt.aliases, tinymqtt.session  # noqa: E401,F401
    import tools.fuzz as t
    fn = getattr(t, target)
    atheris.Setup([sys.argv[0]] + flags + paths, fn)
    atheris.Fuzz()
    return 0


if __name__ == "__main__":
    sys.exit(main())
