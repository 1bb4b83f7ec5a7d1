"""Stage bookkeeping for the pipeline: each stage's output directory is reused when its inputs are unchanged."""

from __future__ import annotations

import hashlib
import json
import resource
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from jaxseeker.train.heap import resident_gib, trim_heap
from jaxseeker.train.interrupt import Stopped, requested


def fingerprint(*parts: Any) -> str:
    """A short hash of JSON-able inputs (a stage's config section and its upstream fingerprints)."""
    raw = json.dumps(parts, sort_keys=True, default=str).encode()
    return hashlib.sha256(raw).hexdigest()[:16]


def _peak_rss_gib() -> float:
    """The process's peak resident memory so far in GiB (Linux reports `ru_maxrss` in KiB)."""
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2)


def _reset_peak_rss() -> bool:
    """Start a new high-water mark of resident memory (Linux: `/proc/self/clear_refs`), so a stage measures its own
    peak rather than the largest stage's before it; False where the kernel does not allow it."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def _memory_marks(start: float | None, own_peak: bool) -> dict:
    """A stage's memory for its marker, so its peak can be set against `jaxseeker plan`'s: `start_rss_gib`, what the
    process held when it began (the world, the data, the runtime: none of it in the plan), and `peak_rss_gib`, its
    own peak where `own_peak` (`peak_since: "stage"`) or else the process's so far (`"process"`)."""
    peak = resident_gib("VmHWM") if own_peak else None
    marks = {"peak_rss_gib": peak or _peak_rss_gib(), "peak_since": "stage" if peak else "process"}
    return marks if start is None else {"start_rss_gib": start, **marks}


def release_memory() -> None:
    """Give back what a finished stage held before the next one starts: unreachable arrays, the compiled programs
    (a later stage compiles or loads its own from the persistent cache) and the freed heap (`train.heap`)."""
    import jax  # here: the stage bookkeeping itself runs without JAX (`--dry-run`)

    jax.clear_caches()
    trim_heap()


class StopAfter(Exception):
    """Raised by `StageRunner.run` once the stage it was told to stop after is done; carries its metrics."""

    def __init__(self, stage: str, metrics: dict):
        super().__init__(stage)
        self.stage, self.metrics = stage, metrics


class StageRunner:
    """Runs stages under `root/<stage>/`, skipping those whose `done.json` holds the same fingerprint; with
    `until`, raises `StopAfter` once that stage is done, and `Stopped` instead of starting a stage once a stop
    signal was recorded (`train.interrupt.requested`). With `dry_run` it runs nothing and writes nothing: it
    records which stages a run would reuse (`reused`) and which it would run or resume (`to_run`)."""

    def __init__(
        self,
        root: str | Path,
        *,
        log: Callable[[str], None] = print,
        until: str | None = None,
        dry_run: bool = False,
    ):
        self.root = Path(root)
        self.until = until
        self.dry_run = dry_run
        if not dry_run:
            self.root.mkdir(parents=True, exist_ok=True)
        self.log = log
        self.timings: dict[str, float] = {}
        self.reused: list[str] = []
        self.to_run: list[str] = []

    def run(self, name: str, key: str, fn: Callable[[Path], dict], *, resumable: bool = False) -> dict:
        """`fn(out_dir) -> metrics` unless a finished run with fingerprint `key` is there; returns the metrics
        (raises `StopAfter` with them if `name` is the runner's `until`).
        Any other output is wiped first, except an unfinished one of a `resumable` stage that was started with
        the same `key` (it continues from its checkpoints; one started with other inputs cannot)."""
        out = self.root / name
        marker, started = out / "done.json", out / "started.json"
        done = read_marker(marker)
        if done.get("key") == key and "metrics" in done:
            self.log(f"[{name}] reused ({out})")
            self.reused.append(name)
            self.timings[name] = done.get("wall_s", 0.0)
            return self._stop_after(name, done["metrics"])
        resume = resumable and "metrics" not in done and read_marker(started).get("key") == key  # killed part-way
        if self.dry_run:
            self.log(f"[{name}] would {'resume' if resume else 'run'}")
            self.to_run.append(name)
            return self._stop_after(name, {})
        stop = requested()  # a stop that came while a stage's loop ended anyway (in its last step)
        if stop is not None:
            raise Stopped(stop, f" before stage {name}; the stages before it are saved")
        if out.exists() and not resume:
            shutil.rmtree(out)
        out.mkdir(parents=True, exist_ok=True)
        _write_marker(started, {"key": key})
        self.log(f"[{name}] {'resuming' if resume else 'running'}")
        start, own_peak = resident_gib("VmRSS"), _reset_peak_rss()
        t = time.perf_counter()
        metrics = fn(out)
        wall = round(time.perf_counter() - t, 2)
        self.timings[name] = wall
        _write_marker(marker, {"key": key, "metrics": metrics, "wall_s": wall, **_memory_marks(start, own_peak)})
        release_memory()
        self.log(f"[{name}] done in {wall:.1f} s")
        return self._stop_after(name, metrics)

    def _stop_after(self, name: str, metrics: dict) -> dict:
        if name == self.until:
            if not self.dry_run:
                self.log(f"[{name}] stopping here (until {name}); a later run without it goes on from here")
            raise StopAfter(name, metrics)
        return metrics


def read_marker(path: Path) -> dict:
    """A stage's `done.json` / `started.json`, or {} when it is missing or damaged (the stage then runs anew)."""
    try:
        marker = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return {}
    return marker if isinstance(marker, dict) else {}


def _write_marker(path: Path, marker: dict) -> None:
    """Write `marker` whole or not at all (a temporary file renamed over `path`), so a kill leaves no torn marker."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(marker, indent=2, default=str), encoding="utf-8")
    tmp.replace(path)
