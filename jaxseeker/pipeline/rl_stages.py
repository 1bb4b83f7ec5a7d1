"""The pipeline's RL stages, from the SFT policy: group-relative policy gradient (`rl.method: pg`, the `jaxseeker rl`
recipe of the rl section) or rejection-sampling fine-tuning (`rl.method: rft`: roll out the pool, keep the right
episodes, fine-tune on them with the `jaxseeker sft` recipe of the rft section; later rounds `rl_round2` … start from
the round before). Each writes the recipe it trains with as `recipe.yaml` in its directory."""

from __future__ import annotations

import random
from pathlib import Path

import jax

from jaxseeker.eval import load_questions
from jaxseeker.eval.runner import run_eval
from jaxseeker.generation import SamplingConfig
from jaxseeker.pipeline.context import PipelineRun, rollout_config
from jaxseeker.pipeline.data_stages import write_jsonl
from jaxseeker.pipeline.eval_stages import policy_engine
from jaxseeker.pipeline.questions import fresh_questions, read_jsonl, read_splits
from jaxseeker.pipeline.recipes import rl_config, rl_recipe, sft_config, stage_seed, write_recipe
from jaxseeker.pipeline.train_stages import model_section, soup_summary, stage_recipe
from jaxseeker.planning.fit import plan_rl
from jaxseeker.train.average import wise_ft
from jaxseeker.train.export import export_hf
from jaxseeker.train.rl.loop import run_rl
from jaxseeker.train.rl.rejection import kept_trajectories, rejected_trajectories, rft_counts


def rl_model_section(run: PipelineRun, hf: Path) -> dict:
    """The RL stage's `model` section: the policy's (`model_section`) with `rl.model`'s keys laid on, so the RL stage
    may train LoRA adapters (`rl.model.lora`) whatever the SFT stage trained, or fully (`rl.model.lora.rank: 0`)."""
    return model_section(run.cfg, hf) | run.cfg.rl.model_keys()


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
    """RL by rejection-sampling fine-tuning, round `round_` from the policy under `start`: roll out the pool
    (`rl.rl.group_size` rollouts a question at `rl.sampling.temperature`), keep the right episodes, fine-tune that
    policy on them with the rft section's recipe (with `rft.data.unlikelihood_weight`, away from the loops of the
    malformed turns too); with `rl.rft_seeds` > 1, the policy is the weight mean of that many fine-tunes (a model
    soup)."""
    r = run.cfg.rl
    rollouts, sampling = rl_config(run.cfg)
    questions = [q for path in pool for q in load_questions(path)]  # ids for rows without one
    sampling = SamplingConfig(
        temperature=sampling.temperature, top_p=run.cfg.eval.top_p, seed=rollouts.seed + round_ - 1
    )
    engine = policy_engine(run, start / "hf", sampling)
    run_eval(
        engine,
        run.tokenizer,
        run.registry,
        questions,
        out / "rollouts",
        k=rollouts.group_size,
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
    unlikelihood = sft_config(run.cfg, "rft")[0].unlikelihood_weight
    rejected = rejected_trajectories(records) if unlikelihood else []
    if rejected:
        write_jsonl(out / "rejected.jsonl", rejected)
        run.runner.log(f"[{out.name}] rft makes the loops of {len(rejected)} episodes' malformed turns unlikely")
    train_files = (out / "trajectories.jsonl",) + ((out / "rejected.jsonl",) if rejected else ())
    replay = replay_trajectories(run, round_, out) if r.rft_replay else []
    if replay:
        train_files += (out / "replay.jsonl",)

    def recipe(fine_tune: Path, member: int) -> dict:
        seed, model = stage_seed(run.cfg, "rft", round_, member), rl_model_section(run, start / "hf")
        return stage_recipe(run, "rft", fine_tune, model, seed=seed, train_files=train_files)

    counts = {"rft": rft_counts(records, kept, rejected) | {"replayed": len(replay)}}
    return soup_summary(run, out, recipe, r.rft_seeds, "rft.data.seq_len") | counts


def replay_trajectories(run: PipelineRun, round_: int, out: Path) -> list[dict]:
    """`rl.rft_replay` of the expert's SFT trajectories, a sample seeded by the round, written to `out/replay.jsonl`."""
    expert = read_jsonl(run.root / "expert" / "trajectories.jsonl")
    seed = stage_seed(run.cfg, "rft", round_)
    replay = random.Random(seed).sample(expert, min(run.cfg.rl.rft_replay, len(expert)))
    write_jsonl(out / "replay.jsonl", replay)
    run.runner.log(f"[{out.name}] rft replays {len(replay)} of the expert's {len(expert)} SFT trajectories")
    return replay


def pg_stage(run: PipelineRun, start: Path, out: Path) -> dict:
    """Group-relative policy gradient from the policy under `start`: the rl section's `jaxseeker rl` recipe."""
    recipe = rl_recipe(
        run.cfg,
        name=f"{run.cfg.name}-rl",
        model=rl_model_section(run, start / "hf"),
        questions=write_pool(run, out),
        out_dir=out,
    )
    recipe, peak = plan_rl(recipe)  # the remat and micro-batch tokens that fit this machine, written down
    write_recipe(out, recipe)
    summary = run_rl(recipe, resume=True, progress=run.progress)
    export_hf(out, out / "hf")
    keys = ("first_reward", "final_reward", "final_accuracy", "mean_step_s", "questions")
    return {k: summary.get(k) for k in keys} | plan_memory(peak)


def plan_memory(peak: float) -> dict:
    """The plan's peak for the stage's marker, where the devices' memory is the host's (CPU) and so can be set
    against the resident memory the marker records: `plan_peak_gib`, the peak per device times the local devices."""
    if jax.local_devices()[0].platform != "cpu":
        return {}
    return {"plan_peak_gib": peak * jax.local_device_count() / 2**30}


def average_stage(run: PipelineRun, start: Path, tuned: Path, out: Path) -> dict:
    """WiSE-FT: `out/hf` is (1 - rl.average)·the policy under `start` + rl.average·the RL policy under `tuned`."""
    ratio = run.cfg.rl.average
    wise_ft(start / "hf", tuned / "hf", out / "hf", ratio)
    run.runner.log(f"[{out.name}] the policy is {1 - ratio:g}·{start.name} + {ratio:g}·{tuned.name} (WiSE-FT)")
    return {"ratio": ratio, "start": start.name, "tuned": tuned.name}
