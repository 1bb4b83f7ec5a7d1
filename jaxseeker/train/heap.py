"""Give freed host memory back to the system between the phases of a run."""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import gc


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
