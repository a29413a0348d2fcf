# tinymqtt's host side, installed by `pip install .` beside the core (lib/tinymqtt, what a board runs) and never
# copied to a board: the `tinymqtt pub|sub` command (main.py; `python -m tinymqtt_cli`), mosquitto_pub and
# mosquitto_sub's flags on the blocking client (args, pub, sub, formats, debug), and the codec's server half
# (server_codec.py) that its -d, the tests' fake broker and the fuzzers import by name. Nothing here is imported
# by the core, and nothing here changes the core.
