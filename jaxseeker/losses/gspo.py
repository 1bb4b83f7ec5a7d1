"""GSPO: the clipped objective with one importance ratio per sequence (Qwen's recipe for MoE RL).

Hyper-parameters are Python values (static under jit); `segment_ids` (the episodes of packed rows) is an array.
"""

import jax
import jax.numpy as jnp

from jaxseeker.losses.aggregate import aggregate, check_aggregation
from jaxseeker.losses.masked import masked_mean, segment_count, segment_mean
from jaxseeker.losses.policy import check_shapes


def per_token_segment_values(per_segment: jax.Array, segment_ids: jax.Array | None) -> jax.Array:
    """Each token's own segment's value: `[rows, seq]` laid out as `segment_sum`'s → `[rows, seq]` (padding reads
    segment 1's value; mask it)."""
    if segment_ids is None:
        return jnp.broadcast_to(per_segment[:, :1], per_segment.shape)  # [rows, seq]: one segment per row
    slot = jnp.clip(segment_ids - 1, 0, per_segment.shape[1] - 1)  # [rows, seq]
    return jnp.take_along_axis(per_segment, slot, axis=1)  # [rows, seq]


def gspo_loss(
    logp: jax.Array,
    old_logp: jax.Array,
    advantages: jax.Array,
    mask: jax.Array,
    *,
    eps_low: float = 3e-4,
    eps_high: float = 4e-4,
    agg: str = "seq-mean-token-mean",
    norm: float | None = None,
    log_ratio_clamp: float = 10.0,
    segment_ids: jax.Array | None = None,
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """Negative GSPO-token surrogate (Zheng et al., "Group Sequence Policy Optimization", arXiv 2507.18071).

    log s_i  = (1 / |y_i|) sum_t m_it (logp_it - old_logp_it)          one ratio per sequence (episode)
    s_it     = sg[s_i] * pi(y_it) / sg[pi(y_it)]                       value s_i, gradient of log pi(y_it)
    l_it     = -min(s_it A_it, clip(s_it, 1 - eps_low, 1 + eps_high) A_it)
    loss     = aggregate(l, mask, agg, segment_ids, norm=norm)
    With the default seq-mean-token-mean and one advantage per sequence this is GSPO's
    -1/G sum_i min(s_i A_i, clip(s_i, 1 - eps_low, 1 + eps_high) A_i), value and gradient; per-token advantages
    (the RL loop's importance-weighted ones) weigh each token's term. The paper's clip range is
    (3e-4, 4e-4): a sequence ratio is a geometric mean, far closer to 1 than a token's. log s_it is clipped to
    ±`log_ratio_clamp` (verl: 10). A sequence is a segment of `segment_ids` (1, 2, … per episode of a packed
    row, 0 = padding; None: one per row), so packing changes nothing.

    Returns:
      (loss, metrics): `clip_frac_low` / `clip_frac_high` (sequences, over kept tokens, whose clip zeroes the
      gradient), `log_ratio_clamp_frac`, `ratio_mean` / `ratio_max` (of s_i over sequences) and `approx_kl`
      (token-level k3 estimate of KL(old || new)).
    """
    advantages = check_shapes(logp, old_logp, advantages, mask, segment_ids)
    check_aggregation(agg, norm)
    if not 0.0 <= eps_low < 1.0 or eps_high < 0.0:
        raise ValueError(f"need 0 <= eps_low < 1 and eps_high >= 0, got eps_low={eps_low}, eps_high={eps_high}")
    if not log_ratio_clamp > 0.0:
        raise ValueError(f"log_ratio_clamp must be > 0, got {log_ratio_clamp}")

    dtype = jnp.promote_types(logp.dtype, jnp.float32)
    logp = logp.astype(dtype)
    old_logp = jax.lax.stop_gradient(old_logp.astype(dtype))
    advantages = jax.lax.stop_gradient(jnp.broadcast_to(advantages.astype(dtype), logp.shape))  # [batch, seq]
    keep = mask != 0  # [batch, seq]
    token_log_ratio = jnp.where(keep, logp - old_logp, 0.0)  # [batch, seq]
    seq_log_ratio = segment_mean(jax.lax.stop_gradient(token_log_ratio), mask, segment_ids)  # [batch, segments]
    log_s = per_token_segment_values(seq_log_ratio, segment_ids)  # [batch, seq]
    raw = jnp.where(keep, logp - jax.lax.stop_gradient(logp) + log_s, 0.0)  # [batch, seq]: value log s_i
    log_ratio = jnp.clip(raw, -log_ratio_clamp, log_ratio_clamp)
    ratio = jnp.exp(log_ratio)  # [batch, seq]
    clipped_ratio = jnp.clip(ratio, 1.0 - eps_low, 1.0 + eps_high)
    per_token = jnp.maximum(-advantages * ratio, -advantages * clipped_ratio)  # [batch, seq]
    loss = aggregate(per_token, mask, agg, segment_ids, norm=norm)

    has_tokens = segment_count(mask, segment_ids) > 0  # [batch, segments]
    seq_ratio = jnp.exp(jnp.clip(seq_log_ratio, -log_ratio_clamp, log_ratio_clamp))  # [batch, segments]
    ratio_sg = jax.lax.stop_gradient(ratio)
    metrics = {
        "clip_frac_low": masked_mean(((ratio_sg < 1.0 - eps_low) & (advantages < 0)).astype(dtype), mask),
        "clip_frac_high": masked_mean(((ratio_sg > 1.0 + eps_high) & (advantages > 0)).astype(dtype), mask),
        "log_ratio_clamp_frac": masked_mean((keep & (jnp.abs(raw) > log_ratio_clamp)).astype(dtype), mask),
        "ratio_mean": masked_mean(seq_ratio, has_tokens),
        "ratio_max": jnp.max(jnp.where(has_tokens, seq_ratio, 0.0)),
        "approx_kl": masked_mean(jnp.expm1(token_log_ratio) - token_log_ratio, mask),
    }
    return loss, jax.lax.stop_gradient(metrics)
