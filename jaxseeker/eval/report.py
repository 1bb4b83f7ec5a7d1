"""Evaluation outputs: the results JSONL, a markdown summary table and PNG plots.

Plots use matplotlib's object API (`Figure`, rendered by Agg), never pyplot's global state, so
they are safe to draw from any thread and need no display.
"""

from __future__ import annotations

import json
import math
import os
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from jaxseeker.eval.loaders import read_jsonl
from jaxseeker.eval.metrics import TOOL_TYPES, _split, group_rollouts, judgement_table, paired_change, summarize


def write_results(records: Iterable[Mapping[str, Any]], path: str | Path) -> Path:
    """Write judged rollout records as JSONL (one object a line, UTF-8), replacing `path` atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    with partial.open("w", encoding="utf-8") as file:
        for record in records:
            file.write(json.dumps(record, ensure_ascii=False) + "\n")
    os.replace(partial, path)
    return path


def read_results(path: str | Path) -> list[dict[str, Any]]:
    """Read a results JSONL back as `loaders.read_jsonl` does: a bad line raises `LoadError` `FILE:LINE: …`.

    Lines end at line feeds only: `write_results` keeps U+2028 and U+0085 unescaped in strings.
    """
    return read_jsonl(path)


def compare_results(
    before: str | Path | Sequence[str | Path],
    after: str | Path | Sequence[str | Path],
    k: int | None,
    question_ids: Iterable[str] | None = None,
) -> dict[str, Any]:
    """`paired_change` of results files of the same questions (first k rounds of each), overall and `by_level`.

    `before` and `after` are one results file each, or several (evals of one model with different sampling
    seeds): a question's rollouts are then pooled over its files, k from each (None: the fewest rounds any
    question has in any file). `question_ids` restricts every file to those questions.
    """
    wanted = None if question_ids is None else {str(q) for q in question_ids}
    sides = [[side] if isinstance(side, str | Path) else list(side) for side in (before, after)]
    records = [
        [[r for r in read_results(p) if wanted is None or r["question_id"] in wanted] for p in paths] for paths in sides
    ]
    if k is None:
        k = min(min(Counter(str(r["question_id"]) for r in rs).values(), default=1) for side in records for rs in side)
    was, now = (_pooled_table(rs, paths, k) for rs, paths in zip(records, sides, strict=True))
    if set(was) != set(now):
        raise ValueError(f"before and after hold different questions: {len(set(was) ^ set(now))} in one only")
    return _change(was, now, records[0][0], k) | {"rollouts": [k * len(paths) for paths in sides]}


def compare_question_sets(pairs: Sequence[tuple[str | Path, str | Path]], k: int) -> dict[str, Any]:
    """`paired_change` over the questions of several question sets taken together, overall and `by_level`.

    Each pair is the (before, after) results files of one set (e.g. a test split and fresh held-out questions);
    a question id may belong to one set only. The first k rounds of each question count.
    """
    was: dict[str, list[bool]] = {}
    now: dict[str, list[bool]] = {}
    firsts: list[dict[str, Any]] = []
    for before, after in pairs:
        records = [read_results(path) for path in (before, after)]
        tables = [judgement_table(rs, k) for rs in records]
        if set(tables[0]) != set(tables[1]):
            raise ValueError(
                f"{before} and {after} hold different questions: {len(set(tables[0]) ^ set(tables[1]))} in one only"
            )
        shared = set(tables[0]) & set(was)
        if shared:
            raise ValueError(
                f"{before} holds {len(shared)} questions of an earlier set, e.g. {sorted(shared)[0]!r}: "
                "pooled sets must hold distinct questions"
            )
        was |= tables[0]
        now |= tables[1]
        firsts += records[0]
    return _change(was, now, firsts, k)


def _change(
    was: dict[str, list[bool]],
    now: dict[str, list[bool]],
    first: Sequence[Mapping[str, Any]],
    k: int,
) -> dict[str, Any]:
    """`paired_change` of two judgement tables, overall and by the levels of the rollout records `first`."""
    levels = _split(group_rollouts(first, k), "level")  # the levels `summarize` reports, in its order
    by_level = {
        level: paired_change({q: was[q] for q in ids}, {q: now[q] for q in ids}) for level, ids in levels.items()
    }
    return paired_change(was, now) | {"by_level": by_level}


def change_line(change: Mapping[str, Any]) -> str:
    """One line of a `compare_results` / `paired_change` result: questions moved, the pass@1 change, interval, p."""
    return (
        f"{change['gained']} questions gained, {change['lost']} lost, {change['unchanged']} unchanged; pass@1 "
        f"{100 * change['delta_pass_at_1']:+.1f} points (95% CI {100 * change['ci95'][0]:+.1f} to "
        f"{100 * change['ci95'][1]:+.1f}; sign test p = {change['p_value']:.3f}, permutation p = "
        f"{change['p_permutation']:.3f})"
    )


def _pooled_table(
    files: Sequence[Sequence[Mapping[str, Any]]],
    paths: Sequence[str | Path],
    k: int,
) -> dict[str, list[bool]]:
    """The judgement tables of several results files of the same questions, each question's verdicts joined."""
    tables = [judgement_table(records, k) for records in files]
    for path, table in zip(paths[1:], tables[1:], strict=True):
        if set(table) != set(tables[0]):
            raise ValueError(
                f"{path} holds other questions than {paths[0]} ({len(set(table) ^ set(tables[0]))} "
                "in one only); pooled evals must cover the same questions"
            )
    return {q: [v for table in tables for v in table[q]] for q in tables[0]}


def summary_table(summary: Mapping[str, Any]) -> str:
    """Markdown tables of a `summarize` result: accuracy, then behaviour, overall / per level / per tag."""
    k = summary["k"]
    accuracy = [
        f"| group | questions | pass@1 | pass@{k} | avg@{k} | cons@{k} | best pass@1 | invalid | judge failures |",
        "|:--|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    behaviour = [
        "| group | " + " | ".join(TOOL_TYPES) + " | tools total | evidence | answer len | think len | termination |",
        "|:--|" + "--:|" * (len(TOOL_TYPES) + 4) + ":--|",
    ]
    for name, block in _groups(summary):
        accuracy.append(
            f"| {name} | {block['questions']} | {_pct(block['pass_at_1'])} | {_pct(block['pass_at_k'])} "
            f"| {_pct(block['avg_at_k'])} | {_pct(block['cons_at_k'])} | {_pct(block['best_pass_at_1'])} "
            f"| {_pct(block['invalid_rate'])} | {block['judge_failures']} ({_pct(block['judge_failure_rate'])}) |"
        )
        calls = block["tool_calls"]
        mix = " · ".join(f"{reason} {_pct(share)}" for reason, share in block["termination"].items())
        behaviour.append(
            f"| {name} | "
            + " | ".join(f"{calls[t]:.2f}" for t in TOOL_TYPES)
            + f" | {calls['total']:.2f} | {_pct(block['evidence'])} | {block['answer_len']:.1f}"
            + f" | {block['think_len']:.1f} | {mix} |"
        )
    title = f"## Evaluation: k={k}, {summary['questions']} questions, {summary['rollouts']} rollouts"
    return "\n".join([title, "", *accuracy, "", *behaviour]) + "\n"


def plot_pass_at_1_by_level(summary: Mapping[str, Any], path: str | Path) -> Path:
    """Bar chart of pass@1 and pass@k, overall and per level, saved as PNG."""
    groups = [("all", summary)] + [(f"level {name}", block) for name, block in summary["by_level"].items()]
    x = np.arange(len(groups))  # [groups]
    fig = Figure(figsize=(max(4.0, 1.2 * len(groups) + 2), 3.5), layout="constrained")
    ax = fig.subplots()
    width = 0.38
    for offset, key, label in ((-width / 2, "pass_at_1", "pass@1"), (width / 2, "pass_at_k", f"pass@{summary['k']}")):
        values = [100 * block[key] for _, block in groups]
        bars = ax.bar(x + offset, values, width, label=label)
        ax.bar_label(bars, fmt="%.0f", fontsize=8)
    ax.set_xticks(x, [name for name, _ in groups])
    ax.set_ylabel("% of questions")
    ax.set_ylim(0, 105)
    ax.set_title("Accuracy by level")
    ax.legend()
    return _save(fig, path)


def plot_tool_calls(records: Sequence[Mapping[str, Any]], path: str | Path) -> Path:
    """Histogram of tool calls per rollout, one series per tool type, saved as PNG."""
    types = list(TOOL_TYPES) + sorted({t for r in records for t in r["tool_calls"]} - set(TOOL_TYPES))
    counts = [np.array([r["tool_calls"].get(t, 0) for r in records]) for t in types]  # [types][rollouts]
    top = max(int(c.max()) for c in counts)
    step = max(1, math.ceil((top + 1) / 40))  # at most ~40 bins, each a whole number of calls wide
    fig = Figure(figsize=(6, 3.5), layout="constrained")
    ax = fig.subplots()
    ax.hist(counts, bins=np.arange(0, top + step + 1, step) - 0.5, label=types)
    ax.set_xlabel("calls per rollout")
    ax.set_ylabel("rollouts")
    ax.set_title("Tool calls per rollout")
    ax.legend()
    return _save(fig, path)


def plot_termination_mix(summary: Mapping[str, Any], path: str | Path) -> Path:
    """Horizontal bars: the share of rollouts per termination reason, saved as PNG."""
    mix = summary["termination"]
    fig = Figure(figsize=(6, 0.5 * len(mix) + 1.5), layout="constrained")
    ax = fig.subplots()
    bars = ax.barh(list(mix), [100 * share for share in mix.values()])
    ax.bar_label(bars, fmt="%.1f%%", fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, 110)
    ax.set_xlabel("% of rollouts")
    ax.set_title("How rollouts ended")
    return _save(fig, path)


REPORT_FILES = (
    "results.jsonl",
    "summary.json",
    "summary.md",
    "pass_at_1_by_level.png",
    "tool_calls.png",
    "termination.png",
)


def write_report(records: Sequence[Mapping[str, Any]], k: int, out_dir: str | Path) -> dict[str, Any]:
    """Write the `REPORT_FILES` under `out_dir` and return the `summarize` result they show."""
    out_dir = Path(out_dir)
    summary = summarize(records, k)
    scored = [rollout for rollouts in group_rollouts(records, k).values() for rollout in rollouts]
    write_results(records, out_dir / "results.jsonl")
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    (out_dir / "summary.md").write_text(summary_table(summary), encoding="utf-8")
    plot_pass_at_1_by_level(summary, out_dir / "pass_at_1_by_level.png")
    plot_tool_calls(scored, out_dir / "tool_calls.png")
    plot_termination_mix(summary, out_dir / "termination.png")
    return summary


def _groups(summary: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    """(row name, metrics) for the overall row, each level and each tag."""
    rows: list[tuple[str, Mapping[str, Any]]] = [("all", summary)]
    rows += [(f"level {name}", block) for name, block in summary.get("by_level", {}).items()]
    rows += [(f"tag {name}", block) for name, block in summary.get("by_tag", {}).items()]
    return rows


def _pct(fraction: float | None) -> str:
    """A fraction as a percentage with one decimal ("–" for None: not measured)."""
    return "–" if fraction is None else f"{100 * fraction:.1f}%"


def _save(fig: Figure, path: str | Path) -> Path:
    """Render `fig` to a PNG at `path` (parents created)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    return path
