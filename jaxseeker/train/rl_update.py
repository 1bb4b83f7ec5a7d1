"""The update half of an RL step: the selected episodes → mini-batch rows → old (and reference) log-probs →
KL-shaped rewards → group advantages → importance weights, overlong filter, accumulation weights → `epochs`
passes of optimizer steps.

The old log-probs of every mini-batch come first: the KL in the reward needs them (and the reference's) for all
the episodes of a group before any advantage exists. Rows are as long as the step's longest episode rounded up to
`ROW_BUCKET` tokens (at most the stage's context), one episode per row; with `rl.pack`, the whole context, filled
with as many episodes as fit (`rl_step.packed_episode_rows`).
"""

from __future__ import annotations

import functools
import math
import time
from typing import Any

import jax
import numpy as np

from jaxseeker import losses
from jaxseeker.agent import Episode
from jaxseeker.losses.registry import objective_aggregation
from jaxseeker.parallel import batch_shards, global_array, host_array
from jaxseeker.parallel.rules import replicated
from jaxseeker.train import rl_shaping as shaping
from jaxseeker.train.rl_config import PACKED_ROW_MULTIPLE, ROW_BUCKET
from jaxseeker.train.rl_scoring import episode_advantages
from jaxseeker.train.rl_step import episode_rows, make_rl_step, packed_episode_rows

INPUT_KEYS = ("tokens", "targets", "loss_mask", "segment_ids", "positions")  # what the log-prob pass reads


def row_length(episodes: list[Episode], max_context: int) -> int:
    """Tokens per update row: the longest episode's inputs rounded up to a multiple of `ROW_BUCKET`, at most
    `max_context` (padding every row to the stage's whole context would cost its memory and time for nothing)."""
    longest = max(len(e.token_ids) for e in episodes) - 1
    return min(max_context, -(-longest // ROW_BUCKET) * ROW_BUCKET)


def mini_batch_rows(run: Any, episodes: list[Episode], seq: int, step: int) -> list[dict[str, np.ndarray]]:
    """The host rows of each mini-batch (a seeded shuffle of the episodes split `mini_batches` ways): one row per
    episode, or with `rl.pack` packed rows, every mini-batch padded to the same row count (one compiled shape).
    Each mini-batch's `episode` holds 1 + the index into `episodes`; `advantages` are filled in later."""
    size = len(episodes) // run.rl.mini_batches
    order = np.random.default_rng([run.rl.seed, step, 1]).permutation(len(episodes))
    parts = [order[m * size : (m + 1) * size] for m in range(run.rl.mini_batches)]
    rows_fn = episode_rows
    if run.rl.pack:
        multiple = math.lcm(PACKED_ROW_MULTIPLE, batch_shards(run.mesh, run.rules))  # few row counts, few compiles
        rows_fn = functools.partial(packed_episode_rows, row_multiple=multiple)
    host = []
    for part in parts:
        rows = rows_fn(
            [episodes[i].token_ids for i in part],
            [episodes[i].loss_mask for i in part],
            [episodes[i].logprobs for i in part],
            np.zeros(len(part)),
            seq,
        )
        rows["episode"] = np.where(rows["episode"] > 0, part[np.maximum(rows["episode"] - 1, 0)] + 1, 0)
        host.append(rows)
    n_rows = max(len(h["tokens"]) for h in host)
    return [{k: np.pad(v, ((0, n_rows - len(v)), (0, 0))) for k, v in h.items()} for h in host]


def update(run: Any, state: Any, episodes: list[Episode], rewards: np.ndarray, max_context: int, step: int):
    """Train on the selected episodes (`[B·G]`, groups contiguous) with their rewards `[B, G]` (module docstring);
    returns the new state and the update's metrics."""
    rl = run.rl
    seq = max_context if rl.pack else row_length(episodes, max_context)
    hosts = mini_batch_rows(run, episodes, seq, step)
    rows = len(hosts[0]["tokens"])
    fns = make_rl_step(
        run.cfg, run.step_cfg, run.opt_cfg, mesh=run.mesh, rows=rows, seq=seq, rules=run.rules, lora=run.lora
    ).with_base(run.base)
    t = time.perf_counter()
    old, ref = [], []
    for host in hosts:
        inputs = {k: global_array(host[k], fns.batch_sharding) for k in INPUT_KEYS}  # every process has all rows
        old.append(fns.logprobs(state.params, inputs))  # [rows, seq]
        ref.append(fns.logprobs(run.ref_params, inputs) if run.ref_params is not None else None)
    old_host = [host_array(x) for x in old]
    metrics: dict[str, float] = {"old_logp_s": time.perf_counter() - t}

    if rl.kl_reward_coef > 0:
        kl_sums, counts = np.zeros(len(episodes)), np.zeros(len(episodes))
        for host, old_h, ref_j in zip(hosts, old_host, ref):
            per_token = np.asarray(losses.kl_per_token(old_h, host_array(ref_j), estimator=rl.kl_reward_estimator))
            sums, n = shaping.episode_token_sums(per_token, host["loss_mask"], host["episode"], len(episodes))
            kl_sums, counts = kl_sums + sums, counts + n
        rewards = shaping.kl_shaped_rewards(rewards, kl_sums, run.kl_reward_coef)
        metrics.update(
            kl_reward=float(np.mean(kl_sums[counts > 0] / counts[counts > 0])) if counts.any() else 0.0,
            kl_reward_coef=run.kl_reward_coef,
        )
    advantages = episode_advantages(rl, rewards)  # [B·G]
    filtered = shaping.overlong_episodes(episodes) if rl.overlong_filter else np.zeros(len(episodes), bool)
    metrics["overlong_filtered"] = float(filtered.mean())

    agg, norm = objective_aggregation(losses.get_policy_objective(rl.objective), rl.objective_kwargs)
    batches, mismatch, tis = [], [], []
    for host, old_h in zip(hosts, old_host):
        episode = host["episode"]
        index = np.maximum(episode - 1, 0)
        host["loss_mask"] = np.where((episode > 0) & ~filtered[index], host["loss_mask"], 0)
        host["advantages"] = np.where(episode > 0, advantages[index], 0.0).astype(np.float32)
        keep = host["loss_mask"] != 0
        mismatch.append(np.abs(old_h - host["old_logp"])[keep])  # the engine's log-probs against the trainer's
        if rl.tis_cap is not None:
            weights, tis_metrics = shaping.tis_weights(old_h, host["old_logp"], host["loss_mask"], rl.tis_cap)
            host["advantages"] = (host["advantages"] * weights).astype(np.float32)
            tis.append(tis_metrics)
    counts = [losses.aggregation_count(h["loss_mask"], agg, h["segment_ids"], norm=norm) for h in hosts]
    scales = shaping.loss_scales([None if c is None else float(c) for c in counts], run.opt_cfg.grad_accum)
    scalar = replicated(run.mesh)
    for host, old_j, ref_j, scale in zip(hosts, old, ref, scales):
        batch = {k: global_array(host[k], fns.batch_sharding) for k in (*INPUT_KEYS, "advantages")}
        batch.update(old_logp=old_j, loss_scale=global_array(np.float32(scale), scalar))
        if run.step_cfg.kl_coef > 0:
            batch["ref_logp"] = ref_j
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
        {k: float(np.max([o[k] for o in outs]) if k == "ratio_max" else np.mean([o[k] for o in outs])) for k in outs[0]}
    )
    mismatch = np.concatenate(mismatch)
    metrics["logp_mismatch"] = float(np.mean(mismatch)) if mismatch.size else 0.0
    for key in ("tis_weight_mean", "tis_clip_frac"):
        if tis:
            metrics[key] = float(np.mean([m[key] for m in tis]))
    metrics["row_fill"] = float(np.mean([np.mean(h["segment_ids"] != 0) for h in hosts]))
    metrics["update_rows"] = float(rows)
    return state, metrics
