"""Collecting an RL step's groups: the rollout engine, seeded rollouts of the current params on it, DUPO's
question pre-filter (saved as it goes), and the rounds of rollouts until the selection is full (DAPO's dynamic
sampling)."""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import jax
import numpy as np

from jaxseeker import model
from jaxseeker.agent import Episode, RolloutConfig
from jaxseeker.agent.engine import make_engine
from jaxseeker.generation import SamplingConfig
from jaxseeker.parallel import GENERATION_RULES, is_main_process, replica_meshes
from jaxseeker.train.recipe import RecipeError
from jaxseeker.train.rl import selection as sel
from jaxseeker.train.rl.config import ContextStage, EngineConfig, RLConfig, engine_slots
from jaxseeker.train.rl.rollout import shared_rollout
from jaxseeker.train.rl.scoring import Score

if TYPE_CHECKING:
    from jaxseeker.train.rl.loop import RLRun


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
    devices, its share of the slots, its weights `params` handed over from the trainer's layout; its programs
    compiled (or loaded from the persistent compilation cache) two at a time before the first rollout waits on one."""
    tensor = engine_cfg.tensor or jax.local_device_count()
    try:
        mesh, handoff_mesh = replica_meshes(tensor)
    except ValueError as e:
        raise RecipeError(f"engine.tensor: {e}") from None
    replicas = mesh.shape["data"]
    slots = engine_slots(engine_cfg, rl, jax.process_count(), replicas)
    engine = make_engine(
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
        pages=engine_cfg.pages * replicas or None,
    )
    warmed = engine.warm_up()
    if is_main_process():
        print(warmed.line(), file=sys.stderr)
    return engine


def rollout_seed(seed: int, step: int, round_: int) -> int:
    """The engine's sampling seed for one rollout call (new randomness every step and DAPO round)."""
    return (seed * 1_000_003 + step * 1_009 + round_) % 2**31


def roll_out(
    run: RLRun, question_ids: list[int], config: RolloutConfig, n: int, seed: int
) -> tuple[list[list[Episode]], list[list[Score]], dict[str, float]]:
    """`n` scored episodes of each question with the current params, grouped by question: (groups, scores,
    timings). Split over the processes, gathered on every one (`rollout.shared_rollout`)."""
    if hasattr(run.engine, "sampling"):
        run.engine.sampling = dataclasses.replace(run.sampling, seed=seed)
    questions = [run.questions[i] for i in question_ids]
    return shared_rollout(
        run.engine, run.tokenizer, run.registry_for, questions, config, n, run.scorer.score_all, run.ceilings
    )


def stage_rollout_config(run: RLRun, stage: ContextStage) -> RolloutConfig:
    """The rollout section with the stage's context and tool-call limits."""
    return dataclasses.replace(run.rollout, max_context_tokens=stage.max_context, max_tool_calls=stage.max_turns)


PREFILTER = "dupo_filter_progress.json"  # under the checkpoint directory: the DUPO pre-filter's outcomes so far


class PrefilterStopped(Exception):
    """The DUPO pre-filter stopped between two batches of questions because a stop was requested; what it rolled out
    is saved (`PREFILTER`)."""

    def __init__(self, done: int, total: int):
        super().__init__(f"the DUPO pre-filter after {done} of its {total} questions")


def dupo_pool(run: RLRun, stop: Callable[[], bool] | None = None, resume: bool = False) -> list[int]:
    """Question indices to train on: all, or (DUPO) those the starting policy does not solve in all k rollouts.

    The pre-filter rolls the questions out `rl.batch_questions` at a time and saves every batch's outcomes under the
    checkpoint directory (`PREFILTER`): a `stop()` that turns true between two batches raises `PrefilterStopped`,
    and with `resume` it goes on after the batches saved, rolling none of them out again."""
    k = run.rl.dupo_filter_rollouts
    if run.rl.selection != "dupo" or k == 0:
        return list(range(len(run.questions)))
    config = stage_rollout_config(run, run.stages[0])
    n, size = len(run.questions), run.rl.batch_questions
    path, key = run.checkpointer.directory / PREFILTER, {"rollouts_per_question": k, "questions": n, "batch": size}
    saved = json.loads(path.read_text()) if resume and path.exists() else {}
    correct: list[list[float]] = saved["correct"] if saved.get("key") == key else []  # [questions done, k]
    resumed = len(correct)
    for first in range(resumed, n, size):
        ids = list(range(first, min(first + size, n)))
        _, grouped, _ = roll_out(run, ids, config, k, rollout_seed(run.rl.seed, -1, first // size))
        correct += [[float(s.outcome.correct) for s in group] for group in grouped]
        if is_main_process():  # written whole, then renamed: a stop during the write keeps the last batch's
            path.parent.mkdir(parents=True, exist_ok=True)
            partial = path.parent / f"{PREFILTER}.partial"
            partial.write_text(json.dumps({"key": key, "correct": correct}))
            partial.replace(path)
        if stop is not None and len(correct) < n and stop():
            raise PrefilterStopped(len(correct), n)
    keep = sel.dupo_prefilter(np.array(correct).reshape(n, k))
    pool = [int(i) for i in np.flatnonzero(keep)]
    if is_main_process():
        report = {"rollouts_per_question": k, "questions": len(keep), "kept": len(pool), "kept_indices": pool}
        report["resumed_after"] = resumed  # questions whose rollouts a stopped pre-filter had saved
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
    times: dict[str, float] = {}
    need, rounds = b, 0
    while True:
        new, new_scores, new_times = roll_out(
            run, run.sampler.take(need), config, g, rollout_seed(run.rl.seed, step, rounds)
        )
        times = {k: times.get(k, 0.0) + v for k, v in new_times.items()}
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
    if "decode_steps" in times:  # the rows a decode step kept a token of on average: the batch decode really ran at
        times["decode_rows"] = times["decode_tokens"] / max(times["decode_steps"], 1.0)
    return groups, scores, selection, times
