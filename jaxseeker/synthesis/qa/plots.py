"""PNG plots of `QAStats`: questions per level, hops, obfuscations, and the solver pass rate per level."""

from __future__ import annotations

from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from jaxseeker.synthesis.qa.stats import QAStats


def _bar(path: Path, counts: dict, title: str, xlabel: str, ylabel: str, percent: bool = False) -> Path:
    fig = Figure(figsize=(5, 3.2), dpi=100)
    FigureCanvasAgg(fig)  # the Agg canvas: no display, no pyplot state
    ax = fig.add_subplot()
    keys = [str(k) for k in counts]
    values = [v * 100 if percent else v for v in counts.values()]
    ax.bar(keys, values, color="#4c72b0")
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if percent:
        ax.set_ylim(0, 100)
    for x, v in zip(keys, values, strict=True):
        ax.annotate(f"{v:.0f}{'%' if percent else ''}", (x, v), ha="center", va="bottom", fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    return path


def plot_stats(stats: QAStats, out_dir: str | Path, prefix: str = "qa") -> list[Path]:
    """Write levels / obfuscations / hops / solver-pass PNGs (the last two when known) to `out_dir`; their paths."""
    d = Path(out_dir)
    d.mkdir(parents=True, exist_ok=True)
    paths = [
        _bar(d / f"{prefix}_levels.png", stats.by_level, "questions per level", "level", "questions"),
        _bar(d / f"{prefix}_obfuscations.png", stats.obfuscations, "obfuscations used", "kind", "times"),
    ]
    if stats.by_hops:
        paths.append(_bar(d / f"{prefix}_hops.png", stats.by_hops, "hops per question", "hops", "questions"))
    if stats.solver_pass:
        paths.append(
            _bar(
                d / f"{prefix}_solver_pass.png",
                stats.solver_pass,
                "reference solver pass rate",
                "level",
                "pass rate (%)",
                percent=True,
            )
        )
    return paths
