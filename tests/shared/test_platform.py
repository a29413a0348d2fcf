# Facts about the platform the codec relies on, checked on CPython and on real MicroPython alike: writing
# into a preallocated bytearray (struct.pack_into, memoryview slice assignment) allocates nothing, and the
# alloc helpers do catch an allocation.
import struct

from tests.shared.alloc import IS_MICROPYTHON, bytes_per_call, micropython_only, no_alloc

BUF = bytearray(16)
MV = memoryview(BUF)
DATA = b"\x01\x02\x03"


def _pack():
    struct.pack_into(">HB", BUF, 0, 0x1234, 7)


def _copy(a, b):
    MV[a:b] = DATA


def test_struct_pack_into_allocates_nothing():
    no_alloc(_pack)
    assert bytes(BUF[:3]) == b"\x12\x34\x07"


def test_memoryview_slice_assign_allocates_nothing():
    no_alloc(_copy, 4, 7)
    assert bytes(BUF[4:7]) == DATA


def test_no_alloc_returns_the_result():
    assert no_alloc(len, BUF) == 16


def test_no_alloc_catches_an_allocation():
    micropython_only("CPython has no heap_lock()")
    try:
        no_alloc(lambda: [1, 2, 3])
    except AssertionError as e:
        assert "allocated" in str(e)
    else:
        raise AssertionError("no_alloc did not notice a list being built")


def test_bytes_per_call():
    n = bytes_per_call(_pack, 50)
    if IS_MICROPYTHON:
        assert n == 0, n
        assert bytes_per_call(lambda: [1, 2, 3], 50) > 0
    else:
        assert n is None
