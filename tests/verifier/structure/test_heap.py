"""While a network trains, large blocks are served from the heap and kept for the next step; afterwards glibc
maps them afresh again, as it does by default."""

import ctypes
import platform

import pytest
import torch

from verifier.structure import heap

pytestmark = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")


class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]


def _mapped_bytes() -> int:
    """Bytes glibc currently serves from mappings of their own (mallinfo2's hblkhd)."""
    libc = heap._glibc()
    libc.mallinfo2.restype = MallInfo2
    return libc.mallinfo2().hblkhd


def test_large_blocks_come_from_the_heap_while_training_and_from_mappings_afterwards():
    size = 64 << 20  # above glibc's 32 MB mmap ceiling: always a mapping of its own by default
    before = _mapped_bytes()
    with heap.reused_heap():
        block = torch.empty(size, dtype=torch.uint8)
        assert _mapped_bytes() == before
        del block
    block = torch.empty(size, dtype=torch.uint8)
    assert _mapped_bytes() >= before + size
    del block
