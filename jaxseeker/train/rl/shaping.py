"""Host-side corrections between the rollouts and the update, pure numpy: KL in the reward (fixed or adaptive
coefficient), truncated importance sampling against the sampler/trainer mismatch, overlong filtering, and the
weights of the micro-batches of one optimizer update under gradient accumulation."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

OVERLONG_TERMINATIONS = ("max_context", "max_tool_calls")  # episodes the context or the tool-call limit cut
LOG_RATIO_CLAMP = 20.0  # as the policy loss's: exp stays finite


def episode_token_sums(
    values: np.ndarray, mask: np.ndarray, episode: np.ndarray, n_episodes: int
) -> tuple[np.ndarray, np.ndarray]:
    """(sum of `values` over each episode's kept tokens, their count), each `[n_episodes]` float64, from rows
    `[rows, seq]` whose `episode` holds 1 + the episode's index (0 = padding)."""
    keep = (np.asarray(mask) != 0) & (np.asarray(episode) > 0)
    index = np.asarray(episode)[keep] - 1
    sums = np.bincount(index, weights=np.asarray(values, np.float64)[keep], minlength=n_episodes)
    return sums, np.bincount(index, minlength=n_episodes).astype(np.float64)


def kl_shaped_rewards(rewards: np.ndarray, kl_sums: np.ndarray, coef: float) -> np.ndarray:
    """R_i − β Σ_t KL_it: the per-token KL penalty of each episode summed into its outcome reward, as the
    group-relative advantages see it (verl's `use_kl_in_reward`: token rewards minus β·kl, summed per response).
    rewards `[B, G]`, kl_sums `[B·G]` (Σ_t k(old_logp_t, ref_logp_t) over the episode's policy tokens)."""
    rewards = np.asarray(rewards, np.float64)
    return rewards - coef * np.asarray(kl_sums, np.float64).reshape(rewards.shape)


def adaptive_kl_coef(coef: float, kl: float, *, target: float, horizon: int, n_steps: int) -> float:
    """The next β of the adaptive KL controller (Ziegler et al. arXiv 1909.08593; verl's `kl_ctrl.type: adaptive`):
    β · (1 + clip(KL / target − 1, −0.2, 0.2) · n_steps / horizon), with KL the step's mean over episodes of their
    per-token mean KL and n_steps its episodes."""
    error = float(np.clip(kl / target - 1.0, -0.2, 0.2))
    return coef * (1.0 + error * n_steps / horizon)


def tis_weights(
    old_logp: np.ndarray, sampler_logp: np.ndarray, mask: np.ndarray, cap: float
) -> tuple[np.ndarray, dict[str, float]]:
    """Truncated importance sampling (verl's TIS / `rollout_is: token`, Tunix's `sampler_is: token`): per token
    w_t = min(π_old(y_t) / π_sampler(y_t), cap), π_old the trainer's recomputed log-probs and π_sampler the
    engine's; 1 off the mask. `[rows, seq]` weights and their metrics `tis_weight_mean` / `tis_clip_frac` (kept
    tokens whose ratio exceeded the cap). The loop multiplies each token's advantage by w_t, which for the
    built-in objectives (positively homogeneous in A) weighs the token's loss by w_t."""
    keep = np.asarray(mask) != 0
    log_ratio = np.clip(
        np.asarray(old_logp, np.float64) - np.asarray(sampler_logp, np.float64), -LOG_RATIO_CLAMP, LOG_RATIO_CLAMP
    )
    ratio = np.where(keep, np.exp(log_ratio), 1.0)
    weights = np.minimum(ratio, cap)
    n = max(int(keep.sum()), 1)
    return weights, {
        "tis_weight_mean": float(weights[keep].sum() / n),
        "tis_clip_frac": float((keep & (ratio > cap)).sum() / n),
    }


def overlong_episodes(episodes: Sequence[Any]) -> np.ndarray:
    """`[episodes]` bool: cut by the context or the tool-call limit (DAPO's overlong filtering trains on none of
    their tokens; they keep their place in their group's statistics)."""
    return np.array([e.termination in OVERLONG_TERMINATIONS for e in episodes], dtype=bool)


def loss_scales(counts: Sequence[float | None], grad_accum: int) -> list[float]:
    """The weight of each mini-batch's loss when every `grad_accum` consecutive ones make one optimizer update
    whose gradient is their mean (optax.MultiSteps): grad_accum · count_j / Σ_update count, so that the update
    divides by the whole update's count (tokens for token-mean: DAPO's 1 / Σ_i |o_i| over all of them) rather
    than averaging per-micro-batch means; grad_accum when the aggregation's count is fixed (`norm`: None counts).
    counts: `losses.aggregation_count` of each mini-batch, in order."""
    if grad_accum < 1 or len(counts) % grad_accum:
        raise ValueError(f"{len(counts)} mini-batches do not split into updates of grad_accum={grad_accum}")
    scales = []
    for start in range(0, len(counts), grad_accum):
        group = counts[start : start + grad_accum]
        if any(c is None for c in group):
            scales += [float(grad_accum)] * len(group)
            continue
        total = float(sum(group))
        scales += [grad_accum * float(c) / total if total > 0 else 0.0 for c in group]
    return scales
