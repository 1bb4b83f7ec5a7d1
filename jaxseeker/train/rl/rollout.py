"""The rollouts of an RL step split over the processes of a multi-host run, scored, and gathered on every process.

A call rolls out `n` episodes of each of a list of questions (one group per question). Process p takes the
contiguous share `process_share(len(questions))` of the groups (a group stays on one host: its advantages
are relative to each other), runs them through the host-side rollout loop on its own engine, scores them
(so remote judge calls are split too), and `all_gather_objects` gives every process all the groups in
the order of the list, with their scores. What follows (selection, advantages, metrics, the update rows)
then runs identically on every process.

The result does not depend on the process count: the engine keys each token's randomness by (seed, request
id, token index), and a process rolling out groups `first, first + 1, …` sends the engine the request ids
those groups get when one process rolls out all of them (`agent.rollout(first_group=first)`). Each
episode's `meta["process"]` records the process that rolled it out.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from typing import Any

import jax

from jaxseeker.agent import Episode, Question, RolloutConfig, rollout
from jaxseeker.generation import roofline
from jaxseeker.parallel import all_gather_objects, process_share
from jaxseeker.train.rl.scoring import Score

TIMES = ("rollout_s", "engine_s", "tool_wait_s", "reward_s")  # per process; the step reports the slowest
# the engine's tally (`roofline.Tally`) of the rollouts, summed over processes
WORK = ("prefill_tokens", "prefill_contexts", "decode_tokens", "decode_contexts", "decode_steps")


def shared_rollout(
    engine: Any,
    tokenizer: Any,
    registry: Any,
    questions: Sequence[Question],
    config: RolloutConfig,
    n: int,
    score: Callable[[list[Episode]], list[Score]],
    ceilings: tuple[float, float] | None = None,
) -> tuple[list[list[Episode]], list[list[Score]], dict[str, float]]:
    """(groups, their scores, timings): `n` scored episodes of every question, grouped in question order; this
    process rolls out and scores its share, every process gets all (collective, module docstring).

    `registry`: the rollout loop's (a ToolRegistry or Question → ToolRegistry); `score`: episodes → scores, in
    order. Timings: `TIMES`, each the largest over processes, and `gather_s` (this process's wait in the exchange).
    With an engine that counts its work (`Engine.tally`), also `WORK`, the counts of its calls summed over processes;
    with `ceilings` (matmul FLOP/s, bytes/s, `roofline.measure`) too, `rollout_roofline_s`: the least time the
    rollouts could take, FLOPs at the matmul ceiling plus bytes at the bandwidth (the best of `ceilings` and a
    measure after the rollouts; the largest over processes).
    """
    share = process_share(len(questions))
    groups: list[list[Episode]] = []
    scores: list[list[Score]] = []
    times = dict.fromkeys(TIMES, 0.0)
    tally = getattr(engine, "tally", None)
    before = {k: getattr(tally, k) for k in WORK} if tally is not None else {}
    if len(share):
        t = time.perf_counter()
        result = rollout(
            engine,
            tokenizer,
            registry,
            [questions[i] for i in share],
            config,
            n_per_question=n,
            progress=False,
            first_group=share.start,
        )
        times.update(rollout_s=time.perf_counter() - t, engine_s=result.stats.step_s, tool_wait_s=result.stats.idle_s)
        for e in result.episodes:  # ordered by group, then sample
            e.meta["process"] = jax.process_index()
        t = time.perf_counter()
        flat = score(result.episodes)
        times["reward_s"] = time.perf_counter() - t
        groups = [result.episodes[g * n : (g + 1) * n] for g in range(len(share))]
        scores = [flat[g * n : (g + 1) * n] for g in range(len(share))]
    work = {k: float(getattr(tally, k) - v) for k, v in before.items()}
    if work and ceilings is not None:
        counts = dataclasses.replace(tally, **{k: int(v) for k, v in work.items()})
        times["rollout_roofline_s"] = counts.workload().seconds(*roofline.best(ceilings, roofline.measure(n=1024)))
    t = time.perf_counter()
    parts = all_gather_objects((groups, scores, times, work))
    gather_s = time.perf_counter() - t
    all_groups = [g for part_groups, _, _, _ in parts for g in part_groups]
    all_scores = [s for _, part_scores, _, _ in parts for s in part_scores]
    slowest = {k: max(part_times[k] for _, _, part_times, _ in parts) for k in times}
    summed = {k: sum(part_work[k] for *_, part_work in parts) for k in work}
    return all_groups, all_scores, {**slowest, **summed, "gather_s": gather_s}
