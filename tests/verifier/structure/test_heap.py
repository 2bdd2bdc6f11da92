"""While a network trains, large blocks are served from the heap and kept for the next step, so the kernel does
not zero their pages again at every step; afterwards glibc maps them afresh again, as it does by default."""

import platform
import resource

import pytest
import torch

from verifier.structure import heap

pytestmark = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")

SIZE = 64 << 20  # above glibc's 32 MB mmap ceiling: a mapping of its own by default
PAGES = SIZE // resource.getpagesize()


def _faults_of_a_step() -> int:
    """Page faults taken by allocating and writing a block of SIZE, as a training step does with its scores."""
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    block = torch.ones(SIZE, dtype=torch.uint8)
    del block
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before


def test_a_large_block_freed_while_training_is_reused_without_new_pages():
    with heap.reused_heap():
        # the heap grows to hold the block (aligned allocations may take it several tries), then stops growing
        steps = [_faults_of_a_step() for _ in range(20)]
        assert steps[-4:] == [pytest.approx(0, abs=PAGES // 20)] * 4, steps
    _faults_of_a_step()
    assert _faults_of_a_step() > PAGES // 2  # glibc's defaults again: a fresh mapping, every page faulted
