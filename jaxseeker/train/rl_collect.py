"""Collecting an RL step's groups: the rollout engine, seeded rollouts of the current params on it, DUPO's
question pre-filter, and the rounds of rollouts until the selection is full (DAPO's dynamic sampling)."""

from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING, Any

import jax
import numpy as np

from jaxseeker import model
from jaxseeker.agent import Episode, RolloutConfig
from jaxseeker.agent.command import make_engine
from jaxseeker.generation import SamplingConfig
from jaxseeker.parallel import GENERATION_RULES, is_main_process, replica_meshes
from jaxseeker.train import selection as sel
from jaxseeker.train.recipe import RecipeError
from jaxseeker.train.rl_config import ContextStage, EngineConfig, RLConfig, engine_slots
from jaxseeker.train.rl_rollout import shared_rollout
from jaxseeker.train.rl_scoring import Score

if TYPE_CHECKING:
    from jaxseeker.train.rl import RLRun


def rollout_engine(
    engine_cfg: EngineConfig,
    rl: RLConfig,
    cfg: model.ModelConfig,
    tokenizer: Any,
    params: Any,
    sampling: SamplingConfig,
    max_len: int,
) -> Any:
    """This process's rollout engine: replicas of `engine.tensor` devices (default all of the host's) on its own
    devices, its share of the slots, its weights `params` handed over from the trainer's layout."""
    tensor = engine_cfg.tensor or jax.local_device_count()
    try:
        mesh, handoff_mesh = replica_meshes(tensor)
    except ValueError as e:
        raise RecipeError(f"engine.tensor: {e}") from None
    replicas = mesh.shape["data"]
    slots = engine_slots(engine_cfg, rl, jax.process_count(), replicas)
    return make_engine(
        params,
        cfg,
        tokenizer,
        slots=slots,
        max_len=max_len,
        sampling=sampling,
        steps_per_call=engine_cfg.steps_per_call,
        mesh=mesh,
        rules=GENERATION_RULES,
        dtype=engine_cfg.dtype,
        handoff_mesh=handoff_mesh,
        stacked_prefill=engine_cfg.stacked_prefill,
    )


def rollout_seed(seed: int, step: int, round_: int) -> int:
    """The engine's sampling seed for one rollout call (new randomness every step and DAPO round)."""
    return (seed * 1_000_003 + step * 1_009 + round_) % 2**31


def roll_out(
    run: RLRun, question_ids: list[int], config: RolloutConfig, n: int, seed: int
) -> tuple[list[list[Episode]], list[list[Score]], dict[str, float]]:
    """`n` scored episodes of each question with the current params, grouped by question: (groups, scores,
    timings). Split over the processes, gathered on every one (`rl_rollout.shared_rollout`)."""
    if hasattr(run.engine, "sampling"):
        run.engine.sampling = dataclasses.replace(run.sampling, seed=seed)
    questions = [run.questions[i] for i in question_ids]
    return shared_rollout(run.engine, run.tokenizer, run.registry_for, questions, config, n, run.scorer.score_all)


def stage_rollout_config(run: RLRun, stage: ContextStage) -> RolloutConfig:
    """The rollout section with the stage's context and tool-call limits."""
    return dataclasses.replace(run.rollout, max_context_tokens=stage.max_context, max_tool_calls=stage.max_turns)


def dupo_pool(run: RLRun) -> list[int]:
    """Question indices to train on: all, or (DUPO) those the starting policy does not solve in all k rollouts."""
    k = run.rl.dupo_filter_rollouts
    if run.rl.selection != "dupo" or k == 0:
        return list(range(len(run.questions)))
    config = stage_rollout_config(run, run.stages[0])
    groups, grouped, _ = roll_out(run, list(range(len(run.questions))), config, k, rollout_seed(run.rl.seed, -1, 0))
    scores = [s for group in grouped for s in group]
    correct = np.array([float(s.outcome.correct) for s in scores]).reshape(len(groups), k)  # [questions, k]
    keep = sel.dupo_prefilter(correct)
    pool = [int(i) for i in np.flatnonzero(keep)]
    if is_main_process():
        report = {"rollouts_per_question": k, "questions": len(keep), "kept": len(pool), "kept_indices": pool}
        (run.out_dir / "dupo_filter.json").write_text(json.dumps(report, indent=2))
    if not pool:
        raise RuntimeError(
            f"DUPO pre-filter: the starting policy solved all {len(keep)} questions in all {k} "
            "rollouts; nothing is left to train on"
        )
    return pool


def collect(run: RLRun, step: int, config: RolloutConfig) -> tuple[list, list, sel.Selection, dict]:
    """Roll out and score groups until the selection is full: (groups, scores, selection, timings)."""
    b, g = run.rl.batch_questions, run.rl.group_size
    rng = np.random.default_rng([run.rl.seed, step])
    groups, scores = [], []
    times = {"rollout_s": 0.0, "engine_s": 0.0, "tool_wait_s": 0.0, "reward_s": 0.0, "gather_s": 0.0}
    need, rounds = b, 0
    while True:
        new, new_scores, new_times = roll_out(
            run, run.sampler.take(need), config, g, rollout_seed(run.rl.seed, step, rounds)
        )
        times = {k: v + new_times[k] for k, v in times.items()}
        groups += new
        scores += new_scores
        selection = sel.select(run.rl.selection, sel.filter_signal(scores, run.rl.filter_metric), b, rng)
        rounds += 1
        need = sel.dapo_shortfall(selection, b) if run.rl.selection == "dapo" else 0
        if not need or rounds > run.rl.dapo_max_rounds:
            break
    if need:  # DAPO ran out of rounds: copies of the informative groups fill the rest, as DUPO does
        filled = sel.fill_by_duplication(selection.groups, b, rng)
        selection = sel.Selection(filled, selection.n_informative, len(filled) - len(selection.groups))
    times["rounds"] = rounds
    return groups, scores, selection, times
