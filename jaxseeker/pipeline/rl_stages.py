"""The pipeline's RL stages, from the SFT policy: group-relative policy gradient (`rl.method: pg`, a `jaxseeker rl`
recipe) or rejection-sampling fine-tuning (`rl.method: rft`: roll out the pool, keep the right episodes, fine-tune
on them; later rounds `rl_round2` … start from the round before)."""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

from jaxseeker.eval import load_questions
from jaxseeker.eval.runner import run_eval
from jaxseeker.generation import SamplingConfig
from jaxseeker.pipeline.context import PipelineRun, rollout_config
from jaxseeker.pipeline.data_stages import write_jsonl
from jaxseeker.pipeline.eval_stages import policy_engine
from jaxseeker.pipeline.questions import fresh_questions, read_jsonl, read_splits
from jaxseeker.pipeline.train_stages import sft_recipe, sft_summary, start_from
from jaxseeker.train.average import average_hf
from jaxseeker.train.export import export_hf
from jaxseeker.train.rejection import kept_trajectories, rejected_trajectories, rft_counts
from jaxseeker.train.rl import run_rl


def pool_files(run: PipelineRun, out: Path) -> list[Path]:
    """The RL question files: the RL split, and the `rl.train_questions` / `rl.fresh_questions` ones under `out`."""
    r = run.cfg.rl
    files = [run.qa_dir / "rl.jsonl"]
    if r.train_questions:
        files.append(out / "train_questions.jsonl")
    if r.fresh_questions:
        files.append(out / "fresh_questions.jsonl")
    return files


def write_pool(run: PipelineRun, out: Path) -> list[Path]:
    """Write the RL pool's sampled and fresh questions under `out`; returns its files (`pool_files`)."""
    r = run.cfg.rl
    if r.train_questions:  # the RL split is small; training questions add groups (their names SFT saw renamed)
        train = read_jsonl(run.qa_dir / "train.jsonl")
        write_jsonl(out / "train_questions.jsonl", random.Random(0).sample(train, min(r.train_questions, len(train))))
    if r.fresh_questions:  # questions on entities no split holds: RL on what SFT never saw, as the test is
        write_jsonl(
            out / "fresh_questions.jsonl",
            fresh_questions(run.world, run.cfg.qa, r.fresh_questions, read_splits(run.qa_dir), run.progress),
        )
    return pool_files(run, out)


def rft_stage(run: PipelineRun, start: Path, round_: int, pool: list[Path], out: Path) -> dict:
    """RL by rejection-sampling fine-tuning, round `round_` from the policy under `start`: roll out the pool, keep
    the right episodes, fine-tune that policy on them (and, with `rft_unlikelihood`, away from the loops of the
    malformed turns); with `rft_seeds` > 1, the policy is the weight mean of that many fine-tunes (a model soup)."""
    r, p = run.cfg.rl, run.cfg.policy
    questions = [q for path in pool for q in load_questions(path)]  # ids for rows without one
    engine = policy_engine(
        run, start / "hf", SamplingConfig(temperature=r.temperature, top_p=run.cfg.eval.top_p, seed=r.seed + round_ - 1)
    )
    run_eval(
        engine,
        run.tokenizer,
        run.registry,
        questions,
        out / "rollouts",
        k=r.group_size,
        config=rollout_config(run.cfg),
        progress=run.progress,
    )
    records = read_jsonl(out / "rollouts" / "results.jsonl")
    kept = kept_trajectories(records, r.rft_per_question)
    if not kept:
        raise RuntimeError(
            f"rl.method rft (round {round_}): none of the {len(records)} rollouts of {len(questions)} "
            "questions was right, well formed and ended by its answer; nothing to fine-tune on"
        )
    write_jsonl(out / "trajectories.jsonl", kept)
    run.runner.log(f"[{out.name}] rft keeps {len(kept)} right episodes of {len(records)}")
    rejected = rejected_trajectories(records) if r.rft_unlikelihood else []
    if rejected:
        write_jsonl(out / "rejected.jsonl", rejected)
        run.runner.log(f"[{out.name}] rft makes the loops of {len(rejected)} episodes' malformed turns unlikely")
    seq_len = run.cfg.eval.max_context  # rows hold every episode whole

    def recipe(fine_tune: Path, seed: int) -> dict:
        return sft_recipe(
            run,
            fine_tune,
            start_from(run, start / "hf"),
            seq_len=seq_len,
            batch_size=max(1, p.batch_size * p.seq_len // seq_len),
            steps=r.steps,
            lr=r.lr,
            min_lr=r.lr,
            warmup_steps=max(1, r.steps // 30),
            seed=seed,
            train_files=(out / "trajectories.jsonl",) + ((out / "rejected.jsonl",) if rejected else ()),
            unlikelihood=r.rft_unlikelihood if rejected else 0.0,
        )

    counts = {"rft": rft_counts(records, kept, rejected)}
    if r.rft_seeds == 1:
        return sft_summary(run, out, recipe(out, 1 + round_), "eval.max_context") | counts
    # A model soup: fine-tune 1 runs in `out` itself, fine-tune k >= 2 under seeds/k, each on its own data order;
    # fine-tune k's export is seeds/k/hf and the policy, out/hf, is their weight mean.
    seeds = [out / "seeds" / str(k) for k in range(1, r.rft_seeds + 1)]
    summaries = [
        sft_summary(run, fine_tune, recipe(fine_tune, 1 + round_ + 10 * k), "eval.max_context", hf=seed / "hf")
        for k, (fine_tune, seed) in enumerate(zip([out] + seeds[1:], seeds))
    ]
    average_hf([seed / "hf" for seed in seeds], out / "hf")
    run.runner.log(f"[{out.name}] the policy is the weight mean of {len(seeds)} fine-tunes (seeds/*/hf)")
    return summaries[0] | counts | {"seeds": len(seeds), "seed_final_losses": [s["final_loss"] for s in summaries]}


def pg_stage(run: PipelineRun, start: Path, out: Path) -> dict:
    """Group-relative policy gradient from the policy under `start` (a `jaxseeker rl` recipe, packed rows)."""
    cfg, r = run.cfg, run.cfg.rl
    rc = rollout_config(cfg)
    tools = cfg.tools.config()
    recipe = {
        "name": f"{cfg.name}-rl",
        "model": start_from(run, start / "hf"),
        "optimizer": {
            "lr": r.lr,
            "min_lr": r.lr,
            "warmup_steps": 0,
            "weight_decay": 0.0,
            "clip_norm": 1.0,
            "eps": r.adam_eps,
        },
        "rl": {
            "questions": [str(path) for path in write_pool(run, out)],
            "steps": r.steps,
            "batch_questions": r.questions_per_step,
            "group_size": r.group_size,
            "selection": r.selection,
            "dupo_filter_rollouts": r.group_size,
            "chunk_size": 256,
            "pack": True,
            "seed": r.seed,
            "epochs": r.epochs,
            "checkpoint_every": max(1, r.steps // 2),
            "out_dir": str(out),
            "kl_coef": r.kl_coef,
            "advantage": r.advantage,
            # DAPO / DUPO keep the groups whose answers are neither all right nor all wrong; the evidence reward's
            # partial credit makes a group of wrong answers informative too
            "filter_metric": "reward" if r.reward == "evidence" else "correct",
            "objective_kwargs": {"negative_weight": r.negative_weight},
        },
        "rollout": {
            "max_context_tokens": rc.max_context_tokens,
            "max_tokens_per_turn": rc.max_tokens_per_turn,
            "answer_reserve_tokens": rc.answer_reserve_tokens,
            "max_tool_calls": rc.max_tool_calls,
            "date": rc.date,
            "prompt": rc.prompt,
        },
        "engine": {"min_window": 512},
        "sampling": {"temperature": r.temperature},
        "tools": {
            "enabled": list(tools.enabled),
            "top_k": tools.top_k,
            "visit": dataclasses.asdict(tools.visit),
            "title_first": tools.title_first,
        },
        "world": cfg.world.spec(),
        "reward": {"fn": r.reward, "judge": "em"},
    }
    summary = run_rl(recipe, resume=True, progress=run.progress)
    export_hf(out, out / "hf")
    return {k: summary.get(k) for k in ("first_reward", "final_reward", "final_accuracy", "mean_step_s", "questions")}
