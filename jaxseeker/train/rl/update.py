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
  (`rows.packed_episode_rows`). The rows go through the update `update_tokens // row length` at a time (one
  compiled shape), their gradients summed into one optimizer step (`train.rl.step.accumulated_update`).

A stop requested during the update (a preemption's notice) ends it between two optimizer micro-steps with its
`Progress`, which `resume_update` completes exactly (`train.rl.midstep` saves and restores both).
"""

from __future__ import annotations

import dataclasses
import functools
import io
import json
import time
from collections.abc import Callable, Sequence
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
from jaxseeker.train.rl.rows import episode_rows, packed_episode_rows
from jaxseeker.train.rl.scoring import episode_advantages
from jaxseeker.train.rl.step import RLStep, make_rl_step

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


@dataclasses.dataclass
class Progress:
    """Where an update stands: `done` of its optimizer micro-steps (epochs × mini-batches, in order) applied, the host
    arrays of every mini-batch (`[micro-batches, rows, seq]` each, and its `loss_scale`), the outputs of those
    applied, the update's metrics known before its first step, and the RL step's own (`step_metrics`, set by the
    loop). Everything a resumed run needs to apply the rest exactly (`resume_update`): the rows carry the old and
    reference log-probs and advantages computed from the params the update started from."""

    done: int
    batches: list[dict[str, np.ndarray]]
    outs: list[dict[str, float]]
    metrics: dict[str, float]
    step_metrics: dict[str, float] = dataclasses.field(default_factory=dict)

    def save(self, directory: Any) -> None:
        """Write to `directory` (a `pathlib` or `etils.epath` path, gs:// included): progress.json and batches.npz."""
        arrays = {f"{m}.{k}": v for m, batch in enumerate(self.batches) for k, v in batch.items()}
        buffer = io.BytesIO()
        np.savez(buffer, **arrays)
        (directory / "batches.npz").write_bytes(buffer.getvalue())
        meta = {"done": self.done, "mini_batches": len(self.batches), "outs": self.outs}
        meta |= {"metrics": self.metrics, "step_metrics": self.step_metrics}
        (directory / "progress.json").write_text(json.dumps(meta))

    @classmethod
    def load(cls, directory: Any) -> Progress:
        """What `save` wrote to `directory`."""
        meta = json.loads((directory / "progress.json").read_text())
        with np.load(io.BytesIO((directory / "batches.npz").read_bytes())) as arrays:
            batches = [
                {k.split(".", 1)[1]: arrays[k] for k in arrays.files if k.split(".", 1)[0] == str(m)}
                for m in range(meta["mini_batches"])
            ]
        return cls(meta["done"], batches, meta["outs"], meta["metrics"], meta["step_metrics"])


class UpdateStopped(Exception):
    """An update stopped between two optimizer micro-steps because a stop was requested: `state` has the `progress`
    applied."""

    def __init__(self, state: Any, progress: Progress):
        super().__init__(f"update stopped after {progress.done} of its optimizer micro-steps")
        self.state, self.progress = state, progress


def update(
    run: Any,
    state: Any,
    episodes: list[Episode],
    rewards: np.ndarray,
    max_context: int,
    step: int,
    stop: Callable[[], bool] | None = None,
):
    """Train on the selected episodes (`[B·G]`, groups contiguous) with their rewards `[B, G]` (module docstring);
    returns the new state and the update's metrics. When `stop()` turns true between two optimizer micro-steps
    (a mini-batch each), raises `UpdateStopped` with the state so far and its `Progress`."""
    rl = run.rl
    n = len(episodes)
    seq = max_context if rl.pack else row_length(episodes, max_context)
    parts = mini_batch_parts(run, n, step)
    shards = batch_shards(run.mesh, run.rules)
    largest = max(len(p) for p in parts)  # rows of a mini-batch at most: one episode each
    micro_rows = min(largest, max(1, rl.update_tokens // seq)) if rl.update_tokens else largest
    micro_rows = -(-micro_rows // shards) * shards
    n_micro = -(-largest // micro_rows)
    fns = _step_fns(run, micro_rows, seq)
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
        batches.append({**{k: micro[k] for k in keys}, "loss_scale": micro_scale})
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
        update_real_tokens=float(fill.sum()),  # the episodes' tokens in those rows, padding not counted
        micro_rows=float(micro_rows),
        dropped_episodes=float(1.0 - keep.mean()),
    )
    return _apply(run, state, fns, Progress(0, batches, [], metrics), stop)


def _step_fns(run: Any, rows: int, seq: int) -> RLStep:
    """The run's compiled update and old-log-prob pass for micro-batches of `rows` × `seq`, bound to its base."""
    return make_rl_step(
        run.cfg,
        run.step_cfg,
        run.opt_cfg,
        mesh=run.mesh,
        rows=rows,
        seq=seq,
        rules=run.rules,
        lora=run.lora,
        compiler_options=run.rl.compiler_options,
    ).with_base(run.base)


def resume_update(run: Any, state: Any, progress: Progress, stop: Callable[[], bool] | None = None):
    """Apply the optimizer micro-steps of a stopped update that `progress` has not (`state`: the one it stopped
    with); returns the new state and the whole update's metrics, as `update` would have."""
    _, micro_rows, seq = progress.batches[0]["tokens"].shape  # [micro-batches, rows, seq]
    fns = _step_fns(run, micro_rows, seq)
    return _apply(run, state, fns, progress, stop)


def _apply(run: Any, state: Any, fns: RLStep, progress: Progress, stop: Callable[[], bool] | None):
    """The optimizer micro-steps of `progress` not yet applied, `rl.epochs` passes over its mini-batches (module
    docstring of `update`)."""
    scalar = replicated(run.mesh)
    batches = [
        {k: global_array(v, scalar if k == "loss_scale" else fns.micro_sharding) for k, v in batch.items()}
        for batch in progress.batches
    ]
    jax.block_until_ready(batches)
    order = [batch for _ in range(run.rl.epochs) for batch in batches]
    t = time.perf_counter()
    outs: list[Any] = list(progress.outs)
    for i in range(progress.done, len(order)):
        state, out = fns.update(state, order[i])
        outs.append(out)
        if stop is not None and i + 1 < len(order) and stop():
            done = [{k: float(v) for k, v in o.items()} for o in jax.device_get(outs)]
            raise UpdateStopped(state, dataclasses.replace(progress, done=i + 1, outs=done))
    outs = jax.device_get(outs)
    metrics = dict(progress.metrics)
    metrics["update_s"] = time.perf_counter() - t
    metrics.update(
        {
            k: max(values) if k.endswith("_max") else float(np.mean(values))
            for k in outs[0]
            for values in [[float(o[k]) for o in outs]]  # in float64: the same from saved outputs as from live ones
        }
    )
    return state, metrics


def _count(tokens: np.ndarray, agg: str, norm: float | None) -> float | None:
    """What the aggregation divides a mini-batch's loss by, from its episodes' trained tokens (as
    `losses.aggregation_count` counts them on its rows): tokens (token-mean), episodes with a trained token (the
    seq-means), None when `norm` fixes the count."""
    if count_is_fixed(agg, norm):
        return None
    return float(np.sum(tokens)) if agg == "token-mean" else float(np.sum(tokens > 0))
