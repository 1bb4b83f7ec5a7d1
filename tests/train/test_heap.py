"""`trim_heap` returns memory a phase freed to the system: what glibc keeps resident after a free stops counting."""

import numpy as np
import pytest

from jaxseeker.train.heap import _malloc_trim, trim_heap

MIB = 2**20


def _resident() -> int:
    """This process's resident set in bytes (Linux)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


@pytest.mark.skipif(_malloc_trim() is None, reason="no glibc malloc_trim")
def test_freed_heap_leaves_the_resident_set():
    blocks = [np.ones(16 * 1024, np.float32) for _ in range(4096)]  # 256 MiB in 64 KiB blocks, below mmap's threshold
    sentinel = np.ones(16 * 1024, np.float32)  # above them on the heap: freeing them leaves no free top to shrink
    del blocks
    held = _resident()
    trim_heap()
    assert held - _resident() > 200 * MIB  # the 256 MiB freed, less what the allocator keeps in use
    assert sentinel.sum() == 16 * 1024
