# The fleet -> mosquitto -> Spark pipeline: an MQTT source for Spark Structured Streaming on tinymqtt
# (mqtt_source), the spool and MQTT link behind it (spool, link), the pipeline job, the audit and the
# scale-out ingest processes, a local standalone cluster (cluster). Importing this package puts the repo's lib/
# and Linux port on sys.path (inside the zip shipped to a cluster's executors too: zipimport reads subpaths).
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PATHS = [ROOT, os.path.join(ROOT, "lib"), os.path.join(ROOT, "ports", "linux")]
for _p in reversed(PATHS):
    if _p not in sys.path:
        sys.path.insert(0, _p)
