# Assertions the shared tests have in common, plain enough for MicroPython: raises() checks that fn(*args)
# raises exactly cls with the given MQTT reason code (a subclass or another code fails) and returns it.


def raises(cls, reason, fn, *args):
    try:
        fn(*args)
    except cls as e:
        assert type(e) is cls, "expected %s, got %s" % (cls.__name__, type(e).__name__)
        assert e.reason == reason, "expected reason 0x%02X, got 0x%02X (%s)" % (reason, e.reason, e.msg)
        return e
    except Exception as e:
        raise AssertionError("expected %s 0x%02X, got %s: %r" % (cls.__name__, reason, type(e).__name__, e))
    raise AssertionError("expected %s 0x%02X, nothing raised" % (cls.__name__, reason))
