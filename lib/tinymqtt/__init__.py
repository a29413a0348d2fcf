# tinymqtt: a small MQTT 3.1 / 3.1.1 / 5.0 client whose sans-IO core runs on MicroPython boards and CPython.
# Importing the package loads nothing else, so a board pays only for the modules it imports.
__version__ = "0.1.0"
