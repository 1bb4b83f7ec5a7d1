"""Training metrics: JSONL, TensorBoard event files and PNG curves, written by process 0 only."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from jaxseeker.jsonl import drop_torn_tail, json_lines


class MetricsWriter:
    """Append step metrics to `metrics.jsonl` and TensorBoard event files under `out_dir`."""

    def __init__(
        self, out_dir: str | Path, *, enabled: bool = True, tensorboard: bool = True, resumed_from: int | None = None
    ):
        """resumed_from: the step this run starts after (its checkpoint's; 0 for a new run). Rows an earlier run
        logged past it are dropped (from `metrics.jsonl`, and from TensorBoard via `purge_step`): this run logs
        those steps again. None: append to what is there."""
        self.enabled = enabled
        self.path = Path(out_dir) / "metrics.jsonl"
        self._tb = None
        if enabled:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if self.path.exists():
                drop_torn_tail(self.path)  # a row a killed run was writing; the steps after its checkpoint rerun
                if resumed_from is not None:
                    kept = [row for row in read_metrics(self.path) if row["step"] <= resumed_from]
                    tmp = self.path.with_suffix(".jsonl.tmp")
                    tmp.write_text("".join(json.dumps(row) + "\n" for row in kept))
                    tmp.replace(self.path)
            if tensorboard:
                from tensorboardX import SummaryWriter

                purge = None if resumed_from is None else resumed_from + 1
                # tensorboardX names an event file by the second it opens it and overwrites a file of that name:
                # the nanosecond suffix keeps the file of a run that ended within that second (and keeps the
                # files' name order, which is the order TensorBoard reads them in, chronological).
                self._tb = SummaryWriter(
                    str(Path(out_dir) / "tensorboard"), purge_step=purge, filename_suffix=f".{time.time_ns()}"
                )

    def write(self, step: int, metrics: Mapping[str, float], prefix: str = "") -> None:
        """Record `metrics` at `step` (scalars only)."""
        if not self.enabled:
            return
        row = {"step": int(step), **{prefix + k: float(v) for k, v in metrics.items()}}
        with self.path.open("a") as f:
            f.write(json.dumps(row) + "\n")
        if self._tb is not None:
            for k, v in row.items():
                if k != "step":
                    self._tb.add_scalar(k, v, step)

    def close(self) -> None:
        """Flush event files."""
        if self._tb is not None:
            self._tb.close()


def read_metrics(path: str | Path) -> list[dict]:
    """Rows of a `metrics.jsonl` (`data.records.json_lines`: a bad line is named)."""
    path = Path(path)
    if not path.exists():
        return []
    return [obj for _, obj in json_lines(path, allow_nan=True)]  # a diverged step logs a NaN loss


def plot_curves(rows: Sequence[Mapping], keys: Sequence[str], out_png: str | Path, title: str = "") -> Path | None:
    """A PNG with one panel per metric in `keys` against step (rows lacking a key are skipped)."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    keys = [k for k in keys if any(k in r for r in rows)]
    if not keys:
        return None
    fig = Figure(figsize=(4.5 * len(keys), 3.2))
    for i, key in enumerate(keys):
        ax = fig.add_subplot(1, len(keys), i + 1)
        pts = np.array([(r["step"], r[key]) for r in rows if key in r])
        ax.plot(pts[:, 0], pts[:, 1], marker="." if len(pts) < 50 else None)
        ax.set_xlabel("step")
        ax.set_title(key)
        ax.grid(alpha=0.3)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(out_png, dpi=100)
    return Path(out_png)
