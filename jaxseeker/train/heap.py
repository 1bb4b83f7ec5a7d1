"""The process's host memory: what it holds now, and giving what a phase freed back to the system before the next."""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import gc
import re
from pathlib import Path


@functools.cache
def _malloc_trim():
    """glibc's `malloc_trim`, or None where the C library has none (musl, macOS)."""
    libc = ctypes.util.find_library("c")
    return getattr(ctypes.CDLL(libc), "malloc_trim", None) if libc else None


def trim_heap() -> None:
    """Collect unreachable objects and return the freed heap to the system: XLA:CPU's buffers come from glibc's
    malloc, which keeps what a phase freed resident (its mmap threshold rises after large frees), so without a trim
    one phase's peak (an RL update's activations) stacks on the next (the rollouts' KV cache)."""
    gc.collect()
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


def resident_gib(field: str = "VmRSS") -> float | None:
    """`field` of /proc/self/status (`VmRSS`: resident now, `VmHWM`: its high-water mark) in GiB; None off Linux."""
    try:
        found = re.search(rf"^{field}:\s+(\d+) kB", Path("/proc/self/status").read_text(), re.M)
    except OSError:
        return None
    return round(int(found.group(1)) / 2**20, 2) if found else None
