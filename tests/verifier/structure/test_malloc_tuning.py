"""While a network trains, large blocks are served from the heap and kept for the next step, so the kernel does
not zero their pages again at every step; afterwards glibc maps them afresh again, as it does by default.

The allocator is the process's, and a long test session leaves its heap fragmented: a freed block in the middle
of it is reused from glibc's bins whatever the settings. So the measurement runs in a fresh interpreter, whose
heap starts as a worker's does."""

import multiprocessing
import platform
import resource
from concurrent.futures import ProcessPoolExecutor

import pytest

pytestmark = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")

SIZE = 64 << 20  # above glibc's 32 MB mmap ceiling: a mapping of its own by default
PAGES = SIZE // resource.getpagesize()


def _faults_of_a_step() -> int:
    """Page faults taken by allocating and writing a block of SIZE, as a training step does with its scores."""
    import torch

    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    block = torch.ones(SIZE, dtype=torch.uint8)
    del block
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before


def _steps_within_and_after() -> tuple[list[int], list[int]]:
    from verifier.structure import malloc_tuning

    with malloc_tuning.reused_heap():
        within = [_faults_of_a_step() for _ in range(20)]
    after = [_faults_of_a_step() for _ in range(2)]
    return within, after


@pytest.mark.slow
def test_a_large_block_freed_while_training_is_reused_without_new_pages():
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as fresh:
        within, after = fresh.submit(_steps_within_and_after).result(timeout=120)
    # the heap grows to hold the block (aligned allocations may take it several tries), then stops growing
    assert within[-4:] == [pytest.approx(0, abs=PAGES // 20)] * 4, within
    assert after[-1] > PAGES // 2, after  # glibc's defaults again: a fresh mapping, every page faulted
