# `python -m tinymqtt_cli pub|sub ...`: the same command line as the installed `tinymqtt` script (CPython only).
import sys

from tinymqtt_cli.main import main

sys.exit(main())
