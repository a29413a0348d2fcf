# How busy this machine's CPUs are, from /proc/stat (Linux): the bench reports it beside its figures, because on a
# shared machine other work moves every rate.


def snapshot():
    """(all jiffies, idle + iowait jiffies) of this machine's CPUs so far; None where /proc/stat is missing."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        return sum(v), v[3] + v[4]
    except (OSError, ValueError, IndexError):
        return None


def busy_between(before, after):
    """Share of all CPUs busy between two snapshot()s (everything on the machine); None if either is None."""
    if before is None or after is None:
        return None
    return 1 - (after[1] - before[1]) / max(after[0] - before[0], 1)
