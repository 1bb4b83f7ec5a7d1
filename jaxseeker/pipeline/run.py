"""`jaxseeker pipeline`: world → questions (→ a fresh held-out set) → expert trajectories → the policy (a pretrained
model, or from scratch: tokenizer → copy warm-up) → zero-shot eval → SFT (→ context extension) → eval → RL → eval →
export → report.

Everything goes under `runs/<name>/`; each stage's output is reused while its inputs (its fingerprint) are
unchanged, so an interrupted run resumes where it stopped. The stages themselves are in `data_stages`,
`train_stages`, `eval_stages` and `rl_stages`.
"""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path
from typing import Any

from jaxseeker import model
from jaxseeker.data import load_tokenizer
from jaxseeker.eval.report import compare_results
from jaxseeker.pipeline import data_stages, eval_stages, recipes, rl_stages, train_stages
from jaxseeker.pipeline.config import RL_RECIPE_SECTIONS, PipelineConfig
from jaxseeker.pipeline.context import PipelineRun
from jaxseeker.pipeline.data_config import tools_key
from jaxseeker.pipeline.report import write_pipeline_report
from jaxseeker.pipeline.stages import StageRunner, StopAfter, fingerprint
from jaxseeker.tools import build_registry
from jaxseeker.world import open_world


def run_pipeline(
    cfg: PipelineConfig,
    root: str | Path | None = None,
    *,
    progress: bool = True,
    until: str | None = None,
    dry_run: bool = False,
) -> dict:
    """Run (or resume) every stage, or those up to `until`; returns the report dict (also `report.json` and
    `report.md`). With `dry_run`, runs and writes nothing: returns which stages would be reused and which run."""
    if until is not None and until not in cfg.stages():
        raise ValueError(f"until: {until!r} is not a stage of this config; one of {list(cfg.stages())}")
    root = Path(root or f"runs/{cfg.name}")
    runner = StageRunner(root, until=None if until == cfg.stages()[-1] else until, dry_run=dry_run)  # last: all
    if dry_run:
        try:
            _run_stages(PipelineRun(cfg, root, runner, progress, world=None, registry=None), {})
        except StopAfter:
            pass
        return {"name": cfg.name, "reused_stages": runner.reused, "stages_to_run": runner.to_run}
    report: dict[str, Any] = {"name": cfg.name, "config": dataclasses.asdict(cfg)}
    world = open_world(cfg.world)
    report["world"] = {
        "entities": len(world),
        "pages": len(world.corpus),
        "relation_types": len(world.relation_types()),
    }
    run = PipelineRun(cfg, root, runner, progress, world, build_registry(cfg.tools, corpus=world.corpus))
    try:
        _run_stages(run, report)
    except StopAfter as stop:
        report[stop.stage] = stop.metrics
    _compare_evals(root, report, cfg.eval.k)
    report["stage_wall_s"] = runner.timings
    report["reused_stages"] = runner.reused
    return write_pipeline_report(root, report)


def _stage(run: PipelineRun, report: dict, name: str, key: str, fn, *args, resumable: bool = False) -> None:
    """Run (or reuse) stage `name` with fingerprint `key`; its metrics go into `report`."""
    report[name] = run.runner.run(name, key, functools.partial(fn, run, *args), resumable=resumable)


def _run_stages(run: PipelineRun, report: dict[str, Any]) -> None:
    """The stages in order, each reused when its fingerprint is done."""
    cfg, root = run.cfg, run.root
    p = cfg.policy
    qa_key = fingerprint(fingerprint(cfg.world.key()), cfg.qa.key())
    _stage(run, report, "qa", qa_key, data_stages.qa_stage)
    fresh_key = fingerprint(qa_key, cfg.eval.fresh_questions, cfg.rl.fresh_questions)
    if cfg.eval.fresh_questions:
        _stage(run, report, "qa_fresh", fresh_key, data_stages.qa_fresh_stage)
    if p.init:  # a pretrained policy brings its tokenizer and chat template
        run.init_dir = model.resolve_model(p.init, dry_run=run.runner.dry_run)  # a dry run imports no GGUF
        run.tokenizer = None if run.runner.dry_run else load_tokenizer(run.init_dir)
        policy_key = fingerprint(str(run.init_dir))
    else:
        policy_key = fingerprint(p.vocab_size)
    expert_key = fingerprint(qa_key, cfg.expert.key(), tools_key(cfg.tools), cfg.eval.limits(), policy_key)
    _stage(run, report, "expert", expert_key, data_stages.expert_stage)
    if p.init:
        start_key = policy_key
    else:
        separators = ["drop_thousands_separators"] if p.drop_thousands_separators else []
        start_key = fingerprint(expert_key, p.vocab_size, p.tokenizer_split, *separators)
        _stage(run, report, "tokenizer", start_key, data_stages.tokenizer_stage)
        run.tokenizer = None if run.runner.dry_run else load_tokenizer(root / "tokenizer")
        if p.copy_warmup_steps:
            data, optimizer, _ = recipes.sft_config(cfg, "sft")  # the warm-up's learning rate and rows are the SFT's
            start_key = fingerprint(
                start_key,
                train_stages.scratch_shape(cfg),
                p.copy_warmup_steps,
                p.copy_warmup_target_loss,
                p.copy_warmup_layers,
                optimizer.lr,
                p.copy_warmup_rows or data.batch_size,
                p.copy_warmup_digit_rate,
                p.copy_warmup_gap,
            )
            _stage(run, report, "warmup", start_key, train_stages.warmup_stage, resumable=True)
    eval_key = fingerprint(cfg.eval.rollouts(), fresh_key)
    if p.init and cfg.eval.zero_shot:
        _stage(
            run,
            report,
            "eval_base",
            fingerprint(policy_key, eval_key, tools_key(cfg.tools)),  # later evals take the tools through the expert
            eval_stages.eval_stage,
            run.init_dir,
            resumable=True,
        )
    policy = {k: v for k, v in dataclasses.asdict(p).items() if k != "copy_warmup_rows"}  # the warm-up's own key
    sft_key = fingerprint(start_key, expert_key, policy, recipes.stage_sections(cfg, "sft"))
    _stage(run, report, "sft", sft_key, train_stages.sft_stage, resumable=True)
    policy_dir, policy_key = root / "sft", sft_key
    if cfg.extend.given():
        policy_key = fingerprint(sft_key, recipes.stage_sections(cfg, "extend"))
        _stage(run, report, "extend", policy_key, train_stages.extend_stage, resumable=True)
        policy_dir = root / "extend"
    _stage(
        run,
        report,
        "eval_sft",
        fingerprint(policy_key, eval_key),
        eval_stages.eval_stage,
        policy_dir / "hf",
        resumable=True,
    )
    sampled_key = fingerprint(cfg.eval.rollouts(), cfg.eval.sampled_k, cfg.eval.sampled_temperature, qa_key)
    if cfg.eval.sampled_k:
        _stage(
            run,
            report,
            "sample_sft",
            fingerprint(policy_key, sampled_key),
            eval_stages.sampled_stage,
            policy_dir / "hf",
            resumable=True,
        )
    r = cfg.rl
    pool = {k: v for k, v in dataclasses.asdict(r).items() if k not in (*RL_RECIPE_SECTIONS, "rft_rounds", "average")}
    if r.method == "rft":  # the rollouts' group size, seed and temperature, and the fine-tune's recipe
        rollouts, sampling = recipes.rl_config(cfg)
        reads = [rollouts.group_size, rollouts.seed, sampling.temperature, recipes.stage_sections(cfg, "rft")]
    else:
        reads = [r.recipe_sections()]
    rl_key = fingerprint(policy_key, pool, *reads, cfg.eval.limits())
    if r.method == "rft":
        _stage(run, report, "rl", rl_key, _first_rft_round, policy_dir, resumable=True)
    else:
        _stage(run, report, "rl", rl_key, rl_stages.pg_stage, policy_dir, resumable=True)
    rl_dir = root / "rl"
    for round_, name in enumerate(r.stages()[1:], start=2):  # later rft rounds, each from the last one's policy
        rl_key = fingerprint(rl_key, round_)
        _stage(
            run,
            report,
            name,
            rl_key,
            rl_stages.rft_stage,
            rl_dir,
            round_,
            rl_stages.pool_files(run, root / "rl"),
            resumable=True,
        )
        rl_dir = root / name
    _stage(run, report, "eval_rl", fingerprint(rl_key, eval_key), eval_stages.eval_stage, rl_dir / "hf", resumable=True)
    if cfg.eval.sampled_k:
        key = fingerprint(rl_key, sampled_key)
        _stage(run, report, "sample_rl", key, eval_stages.sampled_stage, rl_dir / "hf", resumable=True)
    if r.average is not None:  # WiSE-FT: the RL policy's weight mean with its start
        average_key = fingerprint(rl_key, r.average)
        _stage(run, report, "average", average_key, rl_stages.average_stage, policy_dir, rl_dir)
        average_dir = root / "average" / "hf"
        key = fingerprint(average_key, eval_key)
        _stage(run, report, "eval_average", key, eval_stages.eval_stage, average_dir, resumable=True)
        if cfg.eval.sampled_k:
            key = fingerprint(average_key, sampled_key)
            _stage(run, report, "sample_average", key, eval_stages.sampled_stage, average_dir, resumable=True)


def _compare_evals(root: Path, report: dict[str, Any], k: int) -> None:
    """Each policy against the one before it, question by question, where both evals ran (a run stopped after
    `eval_sft` still reports SFT against the zero-shot policy)."""
    for name, before, after, rounds in (
        ("sft_change", "eval_base", "eval_sft", k),
        ("rl_change", "eval_sft", "eval_rl", k),
        ("average_change", "eval_sft", "eval_average", k),
        ("sampled_rl_change", "sample_sft", "sample_rl", None),  # every sample of a test question, paired
        ("sampled_average_change", "sample_sft", "sample_average", None),
    ):
        if report.get(before) and report.get(after):
            report[name] = compare_results(root / before / "results.jsonl", root / after / "results.jsonl", rounds)


def _first_rft_round(run: PipelineRun, start: Path, out: Path) -> dict:
    """The first rft round: writes the RL pool under `out`, then rolls it out from the policy under `start`."""
    return rl_stages.rft_stage(run, start, 1, rl_stages.write_pool(run, out), out)
