# The files Spark's Parquet sink has committed: the names its log (`out/_spark_metadata/<batch>`, one JSON line
# per file after a version line) lists. A file in `out` that no log entry names is a stray of a batch that never
# committed (a driver killed mid-batch), and its rows were written again by the batch that did.
import json
import os


def committed_files(out):
    """Base names of the Parquet files in `out` that the sink's log committed."""
    names = set()
    log = os.path.join(out, "_spark_metadata")
    for f in os.listdir(log):
        if f.startswith(".") or f.endswith(".tmp"):  # checksum files, a log entry being written
            continue
        with open(os.path.join(log, f)) as fh:
            names.update(os.path.basename(json.loads(line)["path"]) for line in fh if line.startswith("{"))
    return names
