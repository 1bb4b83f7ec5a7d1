"""The pipeline's `report.json` and `report.md`: every stage's figures, before/after RL, wall time per stage."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from jaxseeker.pipeline.plots import write_plots
from jaxseeker.pipeline.stages import read_marker
from jaxseeker.train.metrics import read_metrics


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.1f}%"


def _loss(x: float | None) -> str:
    return "—" if x is None else f"{x:.4f}"


def _soup(stage: dict[str, Any]) -> str:
    """What a training stage's summary says of its model soup (`seeds` fine-tunes), for its report line."""
    n = stage.get("seeds", 1)
    return f"; the policy is the weight mean of {n} fine-tunes on their own data orders" if n > 1 else ""


def _truncated(sft: dict[str, Any]) -> str:
    """The SFT line's note on trajectory draws cut at the policy's seq_len (their ends never trained), if any."""
    if not sft.get("truncated"):
        return ""
    return f"; {sft['truncated']} trajectory draws cut at {sft.get('seq_len')} tokens (their ends never trained)"


def rl_stages(report: dict[str, Any]) -> list[str]:
    """The report's RL stages in order: `rl`, then the later rft rounds `rl_round2` …"""
    later = sorted((k for k in report if k.startswith("rl_round")), key=lambda k: int(k.removeprefix("rl_round")))
    return (["rl"] if "rl" in report else []) + later


def markdown(report: dict[str, Any], plots: list[tuple[str, str]] = ()) -> str:
    """A short markdown summary of a pipeline report, with the plots (file under `plots/`, caption) it shows."""
    lines = [f"# jaxseeker pipeline: {report['name']}", ""]
    w, qa = report.get("world", {}), report.get("qa", {})
    fresh = report.get("qa_fresh")
    lines += [
        f"World: {w.get('entities')} entities, {w.get('pages')} pages, {w.get('relation_types')} relation types.",
        f"Questions: train {qa.get('train')}, RL {qa.get('rl')}, test {qa.get('test')} "
        f"(dropped for entity leakage: {qa.get('dropped_for_leakage')})"
        + (f"; fresh held-out {fresh['test']}, on entities no split and no RL question holds" if fresh else "")
        + ".",
        f"Expert trajectories kept: {report.get('expert', {}).get('trajectories')}.",
        f"SFT: final loss {_loss(report.get('sft', {}).get('final_loss'))}, "
        f"eval loss {_loss(report.get('sft', {}).get('eval_loss'))}"
        + _truncated(report.get("sft", {}))
        + _soup(report.get("sft", {}))
        + ".",
    ]
    if "extend" in report:
        e = report["extend"]
        lines.append(
            f"Context extension (rows of {e.get('seq_len')} tokens): final loss {_loss(e.get('final_loss'))}, "
            f"eval loss {_loss(e.get('eval_loss'))}" + _truncated(e) + "."
        )
    for round_, stage in enumerate(rl_stages(report), start=1):
        rft = report[stage].get("rft")
        if rft:
            which = "" if round_ == 1 else f", round {round_} (from round {round_ - 1}'s policy)"
            lines.append(
                f"RL by rejection-sampling fine-tuning{which}: {rft['right']} of {rft['episodes']} rollouts "
                f"right, {rft['kept']} kept ({rft['kept_questions']} of {rft['questions']} questions)"
                + (
                    f", the loops of {rft['rejected_turns']} malformed turns of {rft['rejected']} episodes made "
                    "unlikely"
                    if rft.get("rejected")
                    else ""
                )
                + (f", with {rft['replayed']} expert trajectories replayed" if rft.get("replayed") else "")
                + _soup(report[stage])
                + f"; final loss {_loss(report[stage].get('final_loss'))}, "
                f"eval loss {_loss(report[stage].get('eval_loss'))}."
            )
    lines.append("")
    average = report.get("average") or {}
    averaged = f"RL averaged with SFT ({1 - average.get('ratio', 0.5):g}·SFT + {average.get('ratio', 0.5):g}·RL)"
    rows = [
        (name, report[key])
        for name, key in (
            ("zero-shot", "eval_base"),
            ("after SFT", "eval_sft"),
            ("after RL", "eval_rl"),
            (averaged, "eval_average"),
        )
        if report.get(key)
    ]
    if rows:
        levels = sorted({lvl for _, r in rows for lvl in r.get("by_level", {})})
        sets = [name for name in ("test", "fresh") if any(name in r.get("by_set", {}) for _, r in rows)]
        lines.append(
            f"Held-out questions: {rows[0][1].get('questions')}"
            + (f" ({', '.join(sets)})" if len(sets) > 1 else "")
            + "."
        )
        lines.append("")
        lines.append(
            "| policy | pass@1 | pass@k | invalid | "
            + " | ".join(f"{name} pass@1" for name in sets)
            + (" | " if sets else "")
            + " | ".join(f"L{lvl} pass@1" for lvl in levels)
            + " |"
        )
        lines.append("|---" * (4 + len(sets) + len(levels)) + "|")
        for name, r in rows:
            cells = [_pct(r.get("pass_at_1")), _pct(r.get("pass_at_k")), _pct(r.get("invalid_rate"))]
            cells += [_pct(r.get("by_set", {}).get(s, {}).get("pass_at_1")) for s in sets]
            cells += [_pct(r.get("by_level", {}).get(lvl, {}).get("pass_at_1")) for lvl in levels]
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
        lines.append("")
    lines += sampled_lines(report, averaged)
    for key, what in (
        ("sft_change", "SFT (against the zero-shot policy)"),
        ("rl_change", "RL (against the SFT policy)"),
        ("average_change", f"{averaged} (against the SFT policy)"),
        ("sampled_rl_change", "RL's sampled pass@1 (against the SFT policy's, the same test questions and samples)"),
        ("sampled_average_change", f"{averaged}'s sampled pass@1 (against the SFT policy's)"),
    ):
        change = report.get(key)
        if change:
            held_out = "test" if key.startswith("sampled") else "held-out"
            lines += [
                f"{what} changed {change['gained'] + change['lost']} of {change['questions']} {held_out} "
                f"questions: {change['gained']} gained, {change['lost']} lost (pass@1 "
                f"{100 * change['delta_pass_at_1']:+.1f} points, 95% CI {100 * change['ci95'][0]:+.1f} to "
                f"{100 * change['ci95'][1]:+.1f}; sign test p = {change['p_value']:.2g}, permutation p = "
                f"{change['p_permutation']:.2g}).",
                "",
            ]
    lines.append("| stage | wall s |")
    lines.append("|---|---|")
    for stage, s in report.get("stage_wall_s", {}).items():
        lines.append(f"| {stage} | {s:.1f} |")
    lines.append(f"| total | {sum(report.get('stage_wall_s', {}).values()):.1f} |")
    for name, caption in plots:
        lines += ["", f"![{caption}](plots/{name})", f"*{caption}*"]
    return "\n".join(lines) + "\n"


def sampled_lines(report: dict[str, Any], averaged: str) -> list[str]:
    """The report's lines on what RL can learn and did: the RL pool's sampled accuracy at its first and last pass,
    and each policy's sampled pass@1 and pass@k on the test questions beside its greedy pass@1 (pass@k minus greedy
    is the sharpening room: what sampling finds that the greedy answer misses)."""
    lines = []
    pool = report.get("rl_pool")
    if pool:
        lines += [
            f"RL pool, sampled accuracy: {_pct(pool['first_pass_accuracy'])} on the first pass over its questions, "
            f"{_pct(pool['last_pass_accuracy'])} on the last (pass {pool['passes']}); "
            f"{pool['informative_groups']:.1f} informative groups a step of {pool['groups']:.1f}.",
            "",
        ]
        if "rollout_roofline_s" in pool:
            lines += [
                f"RL rollouts: {pool['rollout_s']:.1f} s, {pool['rollout_s'] / pool['rollout_roofline_s']:.2f}x their "
                f"roofline ({pool['rollout_roofline_s']:.1f} s); {pool['decode_steps']:.0f} decode steps of "
                f"{pool['decode_tokens'] / max(pool['decode_steps'], 1):.1f} rows on average (an RL step waits for "
                "its longest episode).",
                "",
            ]
    memory = report.get("rl_memory")
    if memory:
        lines += [
            f"RL memory: peak {memory['peak_rss_gib']:.2f} GiB resident, {memory['of_plan']:.2f}x the plan's "
            f"{memory['plan_peak_gib']:.2f} GiB and the {memory['start_rss_gib']:.2f} GiB the process held when the "
            "stage began.",
            "",
        ]
    rows = [
        (name, report[greedy], report[sampled])
        for name, greedy, sampled in (
            ("after SFT", "eval_sft", "sample_sft"),
            ("after RL", "eval_rl", "sample_rl"),
            (averaged, "eval_average", "sample_average"),
        )
        if report.get(greedy) and report.get(sampled)
    ]
    if rows:
        s = rows[0][2]
        lines += [
            f"Sampled on the {s['questions']} test questions ({s['k']} samples each at temperature "
            f"{s['temperature']:g}):",
            "",
            f"| policy | greedy pass@1 | sampled pass@1 | pass@{s['k']} | sharpening room (pass@{s['k']} − greedy) |",
            "|---|---|---|---|---|",
        ]
        for name, greedy, sampled in rows:
            g = greedy.get("by_set", {}).get("test", {}).get("pass_at_1", greedy.get("pass_at_1"))
            room = None if g is None else sampled["pass_at_k"] - g
            lines.append(
                f"| {name} | {_pct(g)} | {_pct(sampled['pass_at_1'])} | {_pct(sampled['pass_at_k'])} | "
                + ("—" if room is None else f"{100 * room:+.1f} points")
                + " |"
            )
        lines.append("")
    return lines


def pool_accuracy(root: Path, stage: str = "rl") -> dict[str, Any] | None:
    """The RL pool's sampled accuracy at the first and the last pass over its questions (each step's `accuracy`,
    weighted by its groups, over the steps of that pass), the mean informative groups a step, and the rollouts'
    seconds, roofline and decode steps and tokens summed over the steps (where the engine counted them); None
    without policy-gradient metrics."""
    rows = [r for r in read_metrics(root / stage / "metrics.jsonl") if "pool_pass" in r and "accuracy" in r]
    if not rows:
        return None
    last = max(r["pool_pass"] for r in rows)

    def accuracy(passed: int) -> float:
        steps = [r for r in rows if r["pool_pass"] == passed]
        return sum(r["accuracy"] * r.get("groups", 1) for r in steps) / sum(r.get("groups", 1) for r in steps)

    pool = {
        "first_pass_accuracy": accuracy(1),
        "last_pass_accuracy": accuracy(last),
        "passes": int(last),
        "informative_groups": sum(r.get("informative_groups", 0) for r in rows) / len(rows),
        "groups": sum(r.get("groups", 0) for r in rows) / len(rows),
    }
    if all("rollout_roofline_s" in r for r in rows):  # the rollouts' wall against the roofline of the engine's work
        pool |= {
            k: sum(r[k] for r in rows) for k in ("rollout_s", "rollout_roofline_s", "decode_steps", "decode_tokens")
        }
    return pool


def stage_memory(root: Path, stage: str = "rl") -> dict[str, float] | None:
    """A stage's own peak resident memory (its `done.json`) against its plan: `of_plan`, the peak over the plan's
    peak plus what the process held when the stage began; None without a plan or a peak of the stage's own."""
    done = read_marker(root / stage / "done.json")
    plan = (done.get("metrics") or {}).get("plan_peak_gib")
    if plan is None or done.get("peak_since") != "stage" or done.get("start_rss_gib") is None:
        return None
    held, peak = done["start_rss_gib"], done["peak_rss_gib"]
    return {"peak_rss_gib": peak, "plan_peak_gib": plan, "start_rss_gib": held, "of_plan": peak / (plan + held)}


def write_pipeline_report(root: str | Path, report: dict[str, Any]) -> dict[str, Any]:
    """Write the PNGs under `plots/`, `report.json` and `report.md` of `root`; returns the report with its plots."""
    root = Path(root)
    plots = write_plots(root, rl_stages(report))
    pool = pool_accuracy(root) if "rl" in report else None
    memory = stage_memory(root) if "rl" in report else None
    report = {**report, "plots": [f"plots/{name}" for name, _ in plots]} | ({"rl_pool": pool} if pool else {})
    report |= {"rl_memory": memory} if memory else {}
    (root / "report.json").write_text(json.dumps(report, indent=2, default=str))
    (root / "report.md").write_text(markdown(report, plots))
    return report
