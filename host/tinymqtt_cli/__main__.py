# `python -m tinymqtt pub|sub ...`: the same command line as the installed `tinymqtt` script (CPython only).
import sys

from tinymqtt.cli import main

sys.exit(main())
