# The repo's glue around the tinymqtt_spark package (host/tinymqtt_spark): the fleet pipeline job (pipeline),
# its audit, and a local standalone cluster (cluster). Importing this package puts the repo's lib/, Linux port
# and host/ on sys.path, so the demo runs from a checkout without installing anything; a user's job installs
# the package instead (pip install ".[spark]").
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PATHS = [ROOT, os.path.join(ROOT, "lib"), os.path.join(ROOT, "ports", "linux"), os.path.join(ROOT, "host")]
for _p in reversed(PATHS):
    if _p not in sys.path:
        sys.path.insert(0, _p)
