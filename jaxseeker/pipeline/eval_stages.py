"""The pipeline's evaluations: a policy's greedy (or sampled) rollouts on every held-out question — the test
split and, with `eval.fresh_questions`, the fresh held-out set — judged by exact match."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from jaxseeker import model
from jaxseeker.agent.engine import make_engine
from jaxseeker.eval.metrics import summarize
from jaxseeker.eval.report import read_results
from jaxseeker.eval.runner import run_eval
from jaxseeker.generation import SamplingConfig
from jaxseeker.pipeline.context import PipelineRun, rollout_config
from jaxseeker.pipeline.questions import read_jsonl

FRESH_PREFIX = "heldout-"  # the ids of the fresh held-out questions (`pipeline.questions.fresh_questions`)


def held_out(run: PipelineRun) -> list[dict]:
    """The questions every eval stage asks: the test split, then the fresh held-out set if there is one."""
    fresh = read_jsonl(run.root / "qa_fresh" / "test.jsonl") if run.cfg.eval.fresh_questions else []
    return read_jsonl(run.qa_dir / "test.jsonl") + fresh


def policy_engine(run: PipelineRun, model_dir: Path, sampling: SamplingConfig):
    """A generation engine over the policy under `model_dir` with the eval section's slots and context."""
    cfg_m, params = model.load_hf(model_dir)
    return make_engine(
        params, cfg_m, run.tokenizer, slots=run.cfg.eval.slots, max_len=run.cfg.eval.max_context, sampling=sampling
    )


def eval_stage(run: PipelineRun, model_dir: Path, out: Path) -> dict[str, Any]:
    """Evaluate the policy under `model_dir` on the held-out questions (`eval.k` rollouts each); the summary, with
    pass@1 per level and per question set (`test`, `fresh`)."""
    e = run.cfg.eval
    engine = policy_engine(run, model_dir, SamplingConfig(temperature=e.temperature, top_p=e.top_p))
    summary = run_eval(
        engine,
        run.tokenizer,
        run.registry,
        held_out(run),
        out,
        k=e.k,
        config=rollout_config(run.cfg),
        progress=run.progress,
    )
    records = read_results(out / "results.jsonl")
    by_set = {
        name: [r for r in records if str(r["question_id"]).startswith(FRESH_PREFIX) == (name == "fresh")]
        for name in ("test", "fresh")
    }
    return {
        key: summary[key]
        for key in ("pass_at_1", "pass_at_k", "invalid_rate", "termination", "tool_calls", "questions")
    } | {
        "by_level": {lvl: _brief(s) for lvl, s in summary["by_level"].items()},
        "by_set": {name: _brief(summarize(rs, e.k)) for name, rs in by_set.items() if rs},
    }


def sampled_stage(run: PipelineRun, model_dir: Path, out: Path) -> dict[str, Any]:
    """Sample `eval.sampled_k` rollouts a test question at `eval.sampled_temperature` from the policy under
    `model_dir` (seed 0 for every policy): sampled pass@1 and pass@k, what the policy can reach beyond its greedy
    answer (pass@k minus greedy pass@1 is the room RL has to sharpen into)."""
    e = run.cfg.eval
    sampling = SamplingConfig(temperature=e.sampled_temperature, seed=0)
    engine = policy_engine(run, model_dir, sampling)
    summary = run_eval(
        engine,
        run.tokenizer,
        run.registry,
        read_jsonl(run.qa_dir / "test.jsonl"),
        out,
        k=e.sampled_k,
        config=rollout_config(run.cfg),
        progress=run.progress,
    )
    return {"k": e.sampled_k, "temperature": e.sampled_temperature} | {
        key: summary[key] for key in ("pass_at_1", "pass_at_k", "invalid_rate", "questions")
    }


def _brief(summary: dict[str, Any]) -> dict[str, Any]:
    return {"pass_at_1": summary["pass_at_1"], "pass_at_k": summary["pass_at_k"], "questions": summary["questions"]}
