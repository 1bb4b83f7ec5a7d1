"""The clipped token-level policy-gradient objective of DAPO / DUPO / WebSeer (PPO surrogate).

Hyper-parameters (eps_low, eps_high, agg, clip_c, negative_weight) are Python values: static under jit;
`segment_ids` (the episodes of packed rows) is an array.
"""

import jax
import jax.numpy as jnp

from jaxseeker.losses.masked import masked_mean, segment_count, segment_sum

AGGREGATIONS = ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm")


def aggregate(per_token: jax.Array, mask: jax.Array, agg: str, segment_ids: jax.Array | None = None) -> jax.Array:
    """Reduce a `[batch, seq]` per-token loss to a scalar with one of `AGGREGATIONS`.

    token-mean:              sum_i sum_t m_it l_it / sum_i sum_t m_it      (DAPO: 1 / sum_i |o_i|)
    seq-mean-token-mean:     mean_i [ sum_t m_it l_it / sum_t m_it ]        (GRPO: 1/G sum_i 1/|o_i|)
    seq-mean-token-sum-norm: mean_i [ sum_t m_it l_it ] / L                 (Dr. GRPO, L = padded seq length)
    A sequence i is a segment of `segment_ids` (`[batch, seq]`, 1, 2, … per episode of a packed row, 0 = padding;
    None: one sequence per row). Sequences without any kept token are left out of the sequence means.
    """
    if agg == "token-mean":
        return masked_mean(per_token, mask)
    if agg not in AGGREGATIONS:
        raise ValueError(f"unknown agg {agg!r}; allowed values: {', '.join(AGGREGATIONS)}")
    seq_sum = segment_sum(per_token, mask, segment_ids)  # [batch, segments]
    seq_len = segment_count(mask, segment_ids)  # [batch, segments]
    if agg == "seq-mean-token-mean":
        per_seq = seq_sum / jnp.maximum(seq_len, 1.0)  # [batch, segments]
    else:
        per_seq = seq_sum / per_token.shape[-1]  # [batch, segments]
    return masked_mean(per_seq, seq_len > 0)


def policy_loss(
    logp: jax.Array,
    old_logp: jax.Array,
    advantages: jax.Array,
    mask: jax.Array,
    *,
    eps_low: float = 0.2,
    eps_high: float = 0.28,
    agg: str = "token-mean",
    clip_c: float | None = None,
    negative_weight: float = 1.0,
    segment_ids: jax.Array | None = None,
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """Negative clipped surrogate, minimised by the optimizer.

    r_t = exp(logp_t - old_logp_t)
    l_t = -min(r_t * A, clip(r_t, 1 - eps_low, 1 + eps_high) * A)       (PPO; asymmetric "clip-higher"
          of DAPO arXiv 2503.14476, used by WebSailor's DUPO and WebSeer)
    with `clip_c` (> 1, dual-clip PPO, Ye et al. arXiv 1912.09729): where A < 0, l_t = min(l_t, -clip_c * A),
    bounding the loss when r_t is far above 1 on a negative advantage.
    `negative_weight` scales l_t where A < 0 (1: the surrogate as is; 0: positive-sample reinforcement only, the
    PSR of Zhu et al. arXiv 2506.01347, which found it raises pass@1 while learning from failures alone keeps
    pass@k); the aggregation's denominators are unchanged.
    The loss is `aggregate(l, mask, agg, segment_ids)`, exact on packed rows for every `agg`; masked tokens
    (prompt, observations, padding) contribute nothing to it or to its gradient.

    Args:
      logp: `[batch, seq]` log-probs of the sampled tokens under the current policy (differentiated).
      old_logp: `[batch, seq]` log-probs under the policy that sampled them (not differentiated).
      advantages: `[batch]` per sequence or `[batch, seq]` per token.
      mask: `[batch, seq]`, non-zero on tokens the policy wrote.
      segment_ids: `[batch, seq]` episode ids within a row (the RL step passes its batch's); None: one per row.
    Returns:
      (loss, metrics): `clip_frac_low` / `clip_frac_high` (kept tokens where the lower / upper clip
      is active, i.e. zeroes the gradient), `dual_clip_frac`, `ratio_mean`, `ratio_max`, and
      `approx_kl` = mean (r - 1) - log r, the k3 estimate of KL(old || new).
    """
    if logp.shape != old_logp.shape or logp.shape != mask.shape or logp.ndim != 2:
        raise ValueError(
            f"logp {tuple(logp.shape)}, old_logp {tuple(old_logp.shape)} and mask {tuple(mask.shape)} "
            "must all be [batch, seq]"
        )
    if segment_ids is not None and segment_ids.shape != logp.shape:
        raise ValueError(f"segment_ids has shape {tuple(segment_ids.shape)}, expected {tuple(logp.shape)} like logp")
    if advantages.ndim == 1 and advantages.shape[0] == logp.shape[0]:
        advantages = advantages[:, None]  # [batch, 1]
    elif advantages.shape != logp.shape:
        raise ValueError(f"advantages has shape {tuple(advantages.shape)}, expected [batch] or [batch, seq]")
    if agg not in AGGREGATIONS:
        raise ValueError(f"unknown agg {agg!r}; allowed values: {', '.join(AGGREGATIONS)}")
    if not 0.0 <= eps_low < 1.0 or eps_high < 0.0:
        raise ValueError(f"need 0 <= eps_low < 1 and eps_high >= 0, got eps_low={eps_low}, eps_high={eps_high}")
    if clip_c is not None and clip_c <= 1.0:
        raise ValueError(f"clip_c must be > 1 (dual clip) or None, got {clip_c}")
    if negative_weight < 0.0:
        raise ValueError(f"negative_weight must be >= 0, got {negative_weight}")

    dtype = jnp.promote_types(logp.dtype, jnp.float32)  # at least float32
    logp = logp.astype(dtype)
    old_logp = jax.lax.stop_gradient(old_logp.astype(dtype))
    advantages = jax.lax.stop_gradient(advantages.astype(dtype))
    keep = mask != 0  # [batch, seq]
    log_ratio = jnp.where(keep, logp - old_logp, 0.0)  # [batch, seq]; 0 at masked tokens keeps exp finite
    ratio = jnp.exp(log_ratio)  # [batch, seq]
    clipped_ratio = jnp.clip(ratio, 1.0 - eps_low, 1.0 + eps_high)  # [batch, seq]
    per_token = jnp.maximum(-advantages * ratio, -advantages * clipped_ratio)  # [batch, seq]
    dual_clipped = jnp.zeros_like(keep)
    if clip_c is not None:
        dual_bound = -advantages * clip_c  # [batch, seq] or [batch, 1]
        dual_clipped = (advantages < 0) & (per_token > dual_bound)  # [batch, seq]
        per_token = jnp.where(advantages < 0, jnp.minimum(per_token, dual_bound), per_token)
    if negative_weight != 1.0:
        per_token = jnp.where(advantages < 0, negative_weight * per_token, per_token)  # [batch, seq]
    loss = aggregate(per_token, mask, agg, segment_ids)

    ratio_sg = jax.lax.stop_gradient(ratio)
    adv_full = jnp.broadcast_to(advantages, ratio.shape)  # [batch, seq]
    log_ratio_sg = jax.lax.stop_gradient(log_ratio)
    metrics = {
        "clip_frac_low": masked_mean(((ratio_sg < 1.0 - eps_low) & (adv_full < 0)).astype(dtype), mask),
        "clip_frac_high": masked_mean(((ratio_sg > 1.0 + eps_high) & (adv_full > 0)).astype(dtype), mask),
        "dual_clip_frac": masked_mean(dual_clipped.astype(dtype), mask),
        "ratio_mean": masked_mean(ratio_sg, mask),
        "ratio_max": jnp.max(jnp.where(keep, ratio_sg, 0.0)),
        "approx_kl": masked_mean(ratio_sg - 1.0 - log_ratio_sg, mask),
    }
    return loss, metrics
