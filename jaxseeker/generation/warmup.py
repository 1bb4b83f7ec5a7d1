"""Compile an engine's programs before its first request, and count what XLA compiles.

The engine's calls run a fixed set of programs: one decode per rows bucket, one prefill per power-of-two rows bucket
and the copy of a shared prompt's last page (`Engine` docstring). `warm_up` lowers and compiles each of them on the
engine's own weights and cache (nothing runs, nothing is written); a later call with the same shapes finds the program
compiled.
With jax's persistent compilation cache on (the CLI turns it on: `cli.compilation_cache`), a program compiled by an
earlier process is loaded from it instead, which `Counts.loaded` counts.
"""

from __future__ import annotations

import dataclasses
import os
import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

import jax
import numpy as np

from jaxseeker.generation import layout, steps

if TYPE_CHECKING:
    from jaxseeker.generation.engine import Engine

# jax times each program it compiles or loads from the persistent cache under _COMPILED (the event wraps both), and
# counts the loaded ones under _LOADED: the programs XLA compiled are the difference.
_COMPILED = "/jax/core/compile/backend_compile_duration"
_LOADED = "/jax/compilation_cache/cache_hits"
_counts = {_COMPILED: 0, _LOADED: 0}


def _on_event(event: str, *args, **kwargs) -> None:
    if event in _counts:
        _counts[event] += 1


jax.monitoring.register_event_listener(_on_event)
jax.monitoring.register_event_duration_secs_listener(_on_event)


@dataclasses.dataclass(frozen=True)
class Counts:
    """Programs XLA compiled and programs loaded from the persistent compilation cache (this process, or a span)."""

    compiled: int
    loaded: int

    def __sub__(self, other: Counts) -> Counts:
        return Counts(self.compiled - other.compiled, self.loaded - other.loaded)


def counts() -> Counts:
    """The process's programs compiled and loaded so far (every jitted function and op, not the engine's alone)."""
    return Counts(_counts[_COMPILED] - _counts[_LOADED], _counts[_LOADED])


@dataclasses.dataclass(frozen=True)
class WarmUp:
    """What `warm_up` did: the engine's programs, of which XLA compiled / loaded how many, and its wall."""

    programs: int
    counts: Counts
    seconds: float

    def line(self) -> str:
        """One log line."""
        return (
            f"engine warm-up: {self.programs} programs in {self.seconds:.1f} s ({self.counts.compiled} compiled, "
            f"{self.counts.loaded} from the persistent compilation cache)"
        )


def warm_up(engine: Engine, rows: int | None = None) -> WarmUp:
    """Compile (or load) every decode and prefill program `engine` runs with its own sampling for calls of at most
    `rows` rows (default: every slot; a workload of fewer requests never runs the larger buckets), and the page
    copy. Requests with their own sampling (`submit(sampling=)`) use a decode program of their own, compiled on
    first use."""
    if engine._params is None:
        raise RuntimeError("Engine.warm_up: the engine is unloaded; give it weights with set_params first")
    start, before = time.perf_counter(), counts()
    rows = engine.slots if rows is None else min(max(rows, 1), engine.slots)
    programs = [*_decode_programs(engine, rows), *_prefill_programs(engine, rows)]
    programs.append(layout.copy_page.lower(engine._cache, np.int32(0), np.int32(0), np.int32(0)))
    # XLA compiles (and loads from the persistent cache) outside the GIL, one program a thread: one a core at once.
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        list(pool.map(lambda program: program.compile(), programs))
    return WarmUp(len(programs), counts() - before, time.perf_counter() - start)


def _used(buckets: list[int], rows: int) -> list[int]:
    """The buckets a call of at most `rows` rows may run in: each up to the first that holds `rows`."""
    return [b for b in buckets if b <= next(c for c in buckets if c >= rows)]


def _decode_programs(engine: Engine, rows: int) -> list:
    """The lowered decode call of each rows bucket calls of at most `rows` rows use (one, every slot in order, where
    the slots are split over a mesh's devices)."""
    ends = np.zeros(engine.slots, np.int32)
    lowered = []
    for n in [engine.slots] if engine.rows_split else _used(engine._decode_buckets, rows):
        zeros = np.zeros(n, np.int32)
        order = None if engine.rows_split else np.arange(n, dtype=np.int32)
        lowered.append(
            steps.decode.lower(
                engine._params,
                engine._cache,
                order,
                zeros,
                ends,
                engine._pages.table,
                zeros,
                zeros,
                zeros,
                np.int32(engine.sampling.seed),
                None,
                sampling=engine.sampling.static,
                **engine._options(n, every=order is None),
            )
        )
    return lowered


def _prefill_programs(engine: Engine, rows: int) -> list:
    """The lowered prefill call of each rows bucket calls of at most `rows` rows use."""
    ends = np.zeros(engine.slots, np.int32)
    return [
        steps.prefill.lower(
            engine._prefill_params(),
            engine._cache,
            np.arange(n, dtype=np.int32),
            np.zeros((n, engine.prefill_chunk), np.int32),
            np.zeros(n, np.int32),
            ends,
            engine._pages.table,
            **engine._options(),
        )
        for n in _used(engine._prefill_buckets, rows)
    ]
