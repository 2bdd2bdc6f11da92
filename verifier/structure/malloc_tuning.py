"""Keep the freed memory of large tensors for reuse while a network trains.

Scoring a batch against every entity makes tensors of tens of megabytes (FB15k-237: 1,024 rows × 14,951
entities × 4 bytes = 61 MB), several per training step. glibc's malloc serves any block above its mmap
ceiling (32 MB on 64-bit) with a fresh mapping and returns it to the kernel on free, so every step maps
new pages that the kernel must zero on first touch. With mappings turned off and the top of the heap kept, the
same blocks are reused from the heap and the step spends that time computing.

Only for the duration of a training (`reused_heap`): afterwards glibc's default limits are set again and
the free memory is handed back to the kernel, so a worker that trained does not keep the peak for good.
Large blocks are then mapped afresh again, unless a free block inside the heap already fits one (glibc
serves from its free lists before it maps). Once mallopt is called, glibc stops moving its mapping threshold
as blocks are freed (mallopt(3)); it stays where it was, at most 32 MB. The setting is the process's: other
threads of a worker allocate the same way meanwhile, which changes where their memory comes from, not what
they compute. Elsewhere than glibc (musl, macOS) this does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import platform
from contextlib import contextmanager

# mallopt parameters (malloc.h) and glibc's defaults for them
M_TRIM_THRESHOLD, M_MMAP_MAX = -1, -4
DEFAULT_TRIM_THRESHOLD, DEFAULT_MMAP_MAX = 128 * 1024, 65536
KEPT_TOP = 2**31 - 1  # the largest a C int holds: the heap's top is not given back to the kernel while training


def _glibc():
    if platform.libc_ver()[0] != "glibc":
        return None
    return ctypes.CDLL(ctypes.util.find_library("c"))


@contextmanager
def reused_heap():
    """Within this block, large blocks come from the heap and stay there when freed."""
    libc = _glibc()
    if libc is None:
        yield
        return
    libc.mallopt(M_MMAP_MAX, 0)
    libc.mallopt(M_TRIM_THRESHOLD, KEPT_TOP)
    try:
        yield
    finally:
        libc.mallopt(M_MMAP_MAX, DEFAULT_MMAP_MAX)
        libc.mallopt(M_TRIM_THRESHOLD, DEFAULT_TRIM_THRESHOLD)
        libc.malloc_trim(0)
