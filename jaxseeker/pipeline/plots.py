"""The pipeline report's PNGs, gathered under `runs/<name>/plots/`: SFT (and context extension) loss, RL reward,
evidence and tool calls (or the loss of rejection-sampling fine-tuning), tool-call distribution before and after RL."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path

from jaxseeker.train.metrics import plot_curves, read_metrics

# (PNG under plots/, what it shows) in the order the markdown report lists them.
PLOTS = (
    ("sft_loss.png", "SFT loss (train and held-out) and learning rate per step"),
    ("extend_loss.png", "context extension: SFT loss on rows of the rollouts' context, per step"),
    ("rl_curves.png", "RL reward, accuracy, evidence pages visited and tool calls per episode, per step"),
    (
        "rl_groups.png",
        "RL groups per step: informative (their rollouts disagree, so they train), all solved, all unsolved",
    ),
    (
        "rft_loss.png",
        "RL by rejection-sampling fine-tuning: SFT loss on the policy's own right episodes, per step "
        "(rounds end to end)",
    ),
    ("tool_calls_sft.png", "tool calls per test rollout after SFT"),
    ("tool_calls_rl.png", "tool calls per test rollout after RL"),
)


def rl_metrics(root: Path, stages: Sequence[str]) -> list[dict]:
    """The RL stages' metrics end to end: each later rft round's steps counted on from the round before."""
    rows: list[dict] = []
    for stage in stages:
        offset = rows[-1]["step"] if rows else 0
        rows += [{**row, "step": row["step"] + offset} for row in read_metrics(root / stage / "metrics.jsonl")]
    return rows


def write_plots(root: str | Path, rl_stages: Sequence[str] = ("rl",)) -> list[tuple[str, str]]:
    """Draw (or copy) every plot whose data exists under `root` (RL's under `rl_stages`, rft rounds in order);
    returns the (file, caption) pairs written."""
    root = Path(root)
    out = root / "plots"
    out.mkdir(exist_ok=True)
    drawn = {
        "sft_loss.png": plot_curves(
            read_metrics(root / "sft" / "metrics.jsonl"), ["loss", "eval_loss", "lr"], out / "sft_loss.png", title="SFT"
        ),
        "extend_loss.png": plot_curves(
            read_metrics(root / "extend" / "metrics.jsonl"),
            ["loss", "eval_loss"],
            out / "extend_loss.png",
            title="context extension",
        ),
    }
    rl = rl_metrics(root, rl_stages)
    if any("reward" in row for row in rl):
        drawn["rl_curves.png"] = plot_curves(
            rl, ["reward", "accuracy", "evidence", "tool_calls"], out / "rl_curves.png", title="RL"
        )
        drawn["rl_groups.png"] = plot_curves(
            rl, ["informative_groups", "solved_groups", "unsolved_groups"], out / "rl_groups.png", title="RL groups"
        )
    else:  # rejection-sampling fine-tuning logs an SFT's loss, not rewards
        drawn["rft_loss.png"] = plot_curves(
            rl, ["loss", "eval_loss"], out / "rft_loss.png", title="rejection-sampling fine-tuning"
        )
    for name, stage in (("tool_calls_sft.png", "eval_sft"), ("tool_calls_rl.png", "eval_rl")):
        source = root / stage / "report" / "tool_calls.png"
        drawn[name] = shutil.copy(source, out / name) if source.exists() else None
    return [(name, caption) for name, caption in PLOTS if drawn.get(name)]
