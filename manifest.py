# Freezes tinymqtt into MicroPython firmware (its bytecode then runs from flash; the heap keeps only objects).
# In your board's manifest:  include("PATH/TO/tinymqtt/manifest.py", profile="mqtt311", port="esp32")
# profile: a [profile.NAME] of boards.toml (default full); port: a ports/ folder, frozen as tinymqtt_port
# with its support modules (default: none, bring your own); opt: mpy-cross -O level (default 3, as deploy
# compiles for boards: no line-number tables). The file lists are the mip metadata that tools/mip writes
# from boards.toml (lib/package.json, lib/NAME.json, ports/NAME/package.json).
# No metadata() here: through include() it would set the including board's own metadata (every file it
# freezes would get tinymqtt's __version__, and a board that calls metadata() itself would fail).
import json
import os

options.defaults(profile="full", port="", opt=3)

with open("lib/package.json" if options.profile == "full" else "lib/%s.json" % options.profile) as f:
    package("tinymqtt", files=[dest[len("tinymqtt/"):] for dest, _ in json.load(f)["urls"]], base_path="lib",
            opt=options.opt)
if options.port:
    with open("ports/%s/package.json" % options.port) as f:
        for dest, src in json.load(f)["urls"]:  # src is relative to the port's folder
            path = os.path.normpath(os.path.join("ports", options.port, src))
            module(dest, base_path=os.path.dirname(path), opt=options.opt)
