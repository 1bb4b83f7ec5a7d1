"""The update half of an RL step: the selected episodes → (KL-shaped) rewards → group advantages → the episodes that
can change the policy → mini-batch rows → micro-batches of `rl.update_tokens` tokens → `epochs` passes of optimizer
steps.

What enters the update, and why each choice is exact:
- Old log-probs are the engine's (the sampling policy's, reported with each token) unless `rl.recompute_old_logp`:
  the engine sampled with the weights the update starts from, so they are the old log-probs of every mini-batch up
  to numerical mismatch, and no extra forward is spent. Recomputed (TIS and the KL in the reward need the trainer's),
  their mean distance to the engine's is logged as `logp_mismatch`.
- An episode with advantage exactly 0 changes nothing under the built-in objectives without a KL or entropy term
  (its every token's loss and gradient are 0), so it never reaches the update; neither does one without a trained
  token (overlong-filtered). The normaliser of each mini-batch (`losses.aggregation_count`: tokens for token-mean,
  episodes for the seq-means) still counts them, through the micro-batches' `loss_scale`, so loss, gradients and
  new params are those of the whole mini-batch.
- The mini-batches are a seeded split of all the step's episodes, as if none were dropped; each mini-batch's
  remaining episodes fill rows as long as the step's longest episode rounded up to `ROW_BUCKET` tokens (at most the
  stage's context), one episode per row, or with `rl.pack` the whole context filled with as many episodes as fit
  (`step.packed_episode_rows`). The rows go through the update `update_tokens // row length` at a time (one
  compiled shape), their gradients summed into one optimizer step (`train.rl.step.accumulated_update`).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np

from jaxseeker import losses
from jaxseeker.agent import Episode
from jaxseeker.losses.aggregate import count_is_fixed
from jaxseeker.losses.registry import objective_aggregation
from jaxseeker.parallel import batch_shards, global_array, host_array
from jaxseeker.parallel.rules import replicated
from jaxseeker.train.rl import shaping
from jaxseeker.train.rl.config import ROW_BUCKET
from jaxseeker.train.rl.scoring import episode_advantages
from jaxseeker.train.rl.step import RLStep, episode_rows, make_rl_step, packed_episode_rows

INPUT_KEYS = ("tokens", "targets", "loss_mask", "segment_ids", "positions")  # what the log-prob pass reads
UPDATE_KEYS = (*INPUT_KEYS, "advantages", "old_logp")


def row_length(episodes: list[Episode], max_context: int) -> int:
    """Tokens per update row: the longest episode's inputs rounded up to a multiple of `ROW_BUCKET`, at most
    `max_context` (padding every row to the stage's whole context would cost its memory and time for nothing)."""
    longest = max(len(e.token_ids) for e in episodes) - 1
    return min(max_context, -(-longest // ROW_BUCKET) * ROW_BUCKET)


def zero_advantage_is_inert(run: Any) -> bool:
    """Whether an episode with advantage 0 changes nothing: a built-in objective (its per-token loss is 0 at A = 0,
    whatever the ratio) and no KL or entropy term in the loss (those act on every trained token)."""
    step = run.step_cfg
    return step.objective in losses.POLICY_OBJECTIVES and step.kl_coef == 0 and step.entropy_coef == 0


def trained_tokens(episodes: Sequence[Episode], filtered: np.ndarray) -> np.ndarray:
    """`[episodes]` tokens the update trains on (0 for an overlong-filtered episode)."""
    return np.array([0 if f else int(np.sum(np.asarray(e.loss_mask)[1:] != 0)) for e, f in zip(episodes, filtered)])


def mini_batch_parts(run: Any, n: int, step: int) -> list[np.ndarray]:
    """The episode indices of each mini-batch: a seeded shuffle of the step's `n` episodes split `mini_batches`
    ways."""
    size = n // run.rl.mini_batches
    order = np.random.default_rng([run.rl.seed, step, 1]).permutation(n)
    return [order[m * size : (m + 1) * size] for m in range(run.rl.mini_batches)]


def host_rows(
    run: Any, episodes: list[Episode], members: np.ndarray, seq: int, old: list[np.ndarray], extra: dict
) -> dict[str, np.ndarray]:
    """The `[rows, seq]` host rows of `episodes[members]` (packed with `rl.pack`), `old_logp` from `old` and the
    `extra` per-episode arrays under their keys; `episode` holds 1 + the index into `episodes`."""
    rows_fn = functools.partial(packed_episode_rows, row_multiple=1) if run.rl.pack else episode_rows
    rows = rows_fn(
        [episodes[i].token_ids for i in members],
        [episodes[i].loss_mask for i in members],
        [old[i] for i in members],
        np.zeros(len(members)),
        seq,
        extra={k: [v[i] for i in members] for k, v in extra.items()},
    )
    rows["episode"] = np.where(rows["episode"] > 0, members[np.maximum(rows["episode"] - 1, 0)] + 1, 0)
    return rows


def micro_split(rows: dict[str, np.ndarray], micro_rows: int, n_micro: int) -> dict[str, np.ndarray]:
    """`rows` padded with empty rows to `n_micro · micro_rows` and split: `[n_micro, micro_rows, seq]`."""
    n = len(rows["tokens"])
    if n > n_micro * micro_rows:
        raise ValueError(f"{n} rows do not fit {n_micro} micro-batches of {micro_rows} rows")
    pad = n_micro * micro_rows - n
    return {k: np.pad(v, ((0, pad), (0, 0))).reshape(n_micro, micro_rows, -1) for k, v in rows.items()}


def episode_values(rows: dict[str, np.ndarray], values: np.ndarray, episodes: list[Episode]) -> dict[int, np.ndarray]:
    """Per-token `values` `[rows, seq]` of the episodes in `rows`, back in each episode's token order (index t holds
    the value of token t, 0 at the first)."""
    out: dict[int, np.ndarray] = {}
    r, t = np.nonzero(rows["episode"])
    index = rows["episode"][r, t] - 1
    for i in np.unique(index):
        out[int(i)] = np.zeros(len(episodes[i].token_ids), np.float32)
    for i, pos, v in zip(index, rows["positions"][r, t], values[r, t]):
        out[int(i)][pos + 1] = v
    return out


def forward_logprobs(
    run: Any, fns: RLStep, params: Any, episodes: list[Episode], members: np.ndarray, seq: int, micro_rows: int
) -> dict[int, np.ndarray]:
    """The training forward's log-probs of `episodes[members]` (`RLStep.logprobs`, `micro_rows` rows at a time),
    each in its episode's token order."""
    engine = [np.asarray(e.logprobs, np.float32) for e in episodes]
    rows = host_rows(run, episodes, members, seq, engine, {})
    n_micro = -(-len(rows["tokens"]) // micro_rows)
    micro = micro_split(rows, micro_rows, n_micro)
    out = []
    for m in range(n_micro):
        inputs = {k: global_array(micro[k][m], fns.batch_sharding) for k in INPUT_KEYS}  # every process: all rows
        out.append(host_array(fns.logprobs(params, inputs)))  # [micro_rows, seq]
    return episode_values(rows, np.concatenate(out)[: len(rows["tokens"])], episodes)


def update(run: Any, state: Any, episodes: list[Episode], rewards: np.ndarray, max_context: int, step: int):
    """Train on the selected episodes (`[B·G]`, groups contiguous) with their rewards `[B, G]` (module docstring);
    returns the new state and the update's metrics."""
    rl = run.rl
    n = len(episodes)
    seq = max_context if rl.pack else row_length(episodes, max_context)
    parts = mini_batch_parts(run, n, step)
    shards = batch_shards(run.mesh, run.rules)
    largest = max(len(p) for p in parts)  # rows of a mini-batch at most: one episode each
    micro_rows = min(largest, max(1, rl.update_tokens // seq)) if rl.update_tokens else largest
    micro_rows = -(-micro_rows // shards) * shards
    n_micro = -(-largest // micro_rows)
    fns = make_rl_step(
        run.cfg, run.step_cfg, run.opt_cfg, mesh=run.mesh, rows=micro_rows, seq=seq, rules=run.rules, lora=run.lora
    ).with_base(run.base)
    agg, norm = objective_aggregation(losses.get_policy_objective(rl.objective), rl.objective_kwargs)
    filtered = shaping.overlong_episodes(episodes) if rl.overlong_filter else np.zeros(n, bool)
    tokens = trained_tokens(episodes, filtered)
    engine = [np.asarray(e.logprobs, np.float32) for e in episodes]
    metrics: dict[str, float] = {"overlong_filtered": float(filtered.mean())}

    t = time.perf_counter()
    everyone = np.arange(n)
    old, ref = list(engine), {}
    reference = run.ref_params is not None
    if rl.kl_reward_coef > 0:  # the KL in the reward needs every episode's old and reference log-probs first
        old_by = forward_logprobs(run, fns, state.params, episodes, everyone, seq, micro_rows)
        ref = forward_logprobs(run, fns, run.ref_params, episodes, everyone, seq, micro_rows)
        kl_sums, counts = np.zeros(n), np.zeros(n)
        for i, lp in old_by.items():
            mask = (np.asarray(episodes[i].loss_mask) != 0) & (np.arange(len(lp)) > 0)
            per_token = np.asarray(losses.kl_per_token(lp[mask], ref[i][mask], estimator=rl.kl_reward_estimator))
            kl_sums[i], counts[i] = float(np.sum(per_token)), float(mask.sum())
        old = [old_by.get(i, engine[i]) for i in range(n)]
        rewards = shaping.kl_shaped_rewards(rewards, kl_sums, run.kl_reward_coef)
        metrics.update(
            kl_reward=float(np.mean(kl_sums[counts > 0] / counts[counts > 0])) if counts.any() else 0.0,
            kl_reward_coef=run.kl_reward_coef,
        )
    advantages = episode_advantages(rl, rewards)  # [B·G]
    keep = tokens > 0
    if zero_advantage_is_inert(run):
        keep &= advantages != 0
    kept = everyone[keep]
    if rl.recompute_old_logp and rl.kl_reward_coef == 0:
        old_by = forward_logprobs(run, fns, state.params, episodes, kept, seq, micro_rows)
        old = [old_by.get(i, engine[i]) for i in range(n)]
    if reference and not ref:
        ref = forward_logprobs(run, fns, run.ref_params, episodes, kept, seq, micro_rows)
    metrics["old_logp_s"] = time.perf_counter() - t

    extra = {"sampler_logp": engine} | ({"ref_logp": [ref.get(i, engine[i]) for i in range(n)]} if ref else {})
    counts_all = [None if c is None else float(c) for c in (_count(tokens[p], agg, norm) for p in parts)]
    scales = shaping.loss_scales(counts_all, run.opt_cfg.grad_accum)
    batches, mismatch, tis, used_rows, fill = [], [], [], 0, []
    scalar = replicated(run.mesh)
    for part, total, scale in zip(parts, counts_all, scales):
        members = part[keep[part]]
        rows = host_rows(run, episodes, members, seq, old, extra)
        rows["advantages"] = np.where(rows["episode"] > 0, advantages[np.maximum(rows["episode"] - 1, 0)], 0.0)
        rows["advantages"] = rows["advantages"].astype(np.float32)
        trained = rows["loss_mask"] != 0
        if rl.recompute_old_logp:  # the trainer's old log-probs against the engine's
            mismatch.append(np.abs(rows["old_logp"] - rows["sampler_logp"])[trained])
        if rl.tis_cap is not None:
            weights, tis_metrics = shaping.tis_weights(rows["old_logp"], rows["sampler_logp"], trained, rl.tis_cap)
            rows["advantages"] = (rows["advantages"] * weights).astype(np.float32)
            tis.append(tis_metrics)
        used_rows += len(rows["tokens"])
        fill.append(rows["segment_ids"] != 0)
        micro = micro_split(rows, micro_rows, n_micro)
        micro_counts = [
            losses.aggregation_count(micro["loss_mask"][j], agg, micro["segment_ids"][j], norm=norm)
            for j in range(n_micro)
        ]
        micro_scale = np.array(
            [scale if c is None else (scale * float(c) / total if total else 0.0) for c in micro_counts], np.float32
        )
        keys = UPDATE_KEYS + (("ref_logp",) if run.step_cfg.kl_coef > 0 else ())
        batch = {k: global_array(micro[k], fns.micro_sharding) for k in keys}
        batch["loss_scale"] = global_array(micro_scale, scalar)
        batches.append(batch)
    jax.block_until_ready(batches)

    t = time.perf_counter()
    outs = []
    for _ in range(rl.epochs):
        for batch in batches:
            state, out = fns.update(state, batch)
            outs.append(out)
    outs = jax.device_get(outs)
    metrics["update_s"] = time.perf_counter() - t
    metrics.update(
        {
            k: float(np.max([o[k] for o in outs]) if k.endswith("_max") else np.mean([o[k] for o in outs]))
            for k in outs[0]
        }
    )
    if mismatch:
        mismatch = np.concatenate(mismatch)
        metrics["logp_mismatch"] = float(np.mean(mismatch)) if mismatch.size else 0.0
        metrics["logp_mismatch_max"] = float(np.max(mismatch)) if mismatch.size else 0.0
    for key in ("tis_weight_mean", "tis_clip_frac"):
        if tis:
            metrics[key] = float(np.mean([m[key] for m in tis]))
    fill = np.concatenate(fill) if used_rows else np.zeros((0, seq), bool)
    metrics.update(
        row_fill=float(fill.mean()) if fill.size else 0.0,
        update_rows=float(used_rows),
        micro_rows=float(micro_rows),
        dropped_episodes=float(1.0 - keep.mean()),
    )
    return state, metrics


def _count(tokens: np.ndarray, agg: str, norm: float | None) -> float | None:
    """What the aggregation divides a mini-batch's loss by, from its episodes' trained tokens (as
    `losses.aggregation_count` counts them on its rows): tokens (token-mean), episodes with a trained token (the
    seq-means), None when `norm` fixes the count."""
    if count_is_fixed(agg, norm):
        return None
    return float(np.sum(tokens)) if agg == "token-mean" else float(np.sum(tokens > 0))
