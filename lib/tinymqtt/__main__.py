import sys

from tinymqtt.cli import main

sys.exit(main())
