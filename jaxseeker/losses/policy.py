"""The clipped token-level policy-gradient objective of DAPO / DUPO / WebSeer (PPO surrogate).

Hyper-parameters (eps_low, eps_high, agg, norm, clip_c, negative_weight, log_ratio_clamp) are Python values: static
under jit; `segment_ids` (the episodes of packed rows) is an array.
"""

import jax
import jax.numpy as jnp

from jaxseeker.losses.aggregate import aggregate, check_aggregation
from jaxseeker.losses.masked import masked_mean


def check_shapes(
    logp: jax.Array, old_logp: jax.Array, advantages: jax.Array, mask: jax.Array, segment_ids: jax.Array | None
) -> jax.Array:
    """Raise ValueError on arrays an objective cannot take; return the advantages as `[batch, 1]` or
    `[batch, seq]`."""
    if logp.shape != old_logp.shape or logp.shape != mask.shape or logp.ndim != 2:
        raise ValueError(
            f"logp {tuple(logp.shape)}, old_logp {tuple(old_logp.shape)} and mask {tuple(mask.shape)} "
            "must all be [batch, seq]"
        )
    if segment_ids is not None and segment_ids.shape != logp.shape:
        raise ValueError(f"segment_ids has shape {tuple(segment_ids.shape)}, expected {tuple(logp.shape)} like logp")
    if advantages.ndim == 1 and advantages.shape[0] == logp.shape[0]:
        return advantages[:, None]  # [batch, 1]
    if advantages.shape != logp.shape:
        raise ValueError(f"advantages has shape {tuple(advantages.shape)}, expected [batch] or [batch, seq]")
    return advantages


def clamped_log_ratio(
    logp: jax.Array, old_logp: jax.Array, keep: jax.Array, clamp: float
) -> tuple[jax.Array, jax.Array]:
    """(log r clipped to [-clamp, clamp], 0 at masked tokens; where the clip fired) `[batch, seq]` each.

    exp(log r) overflows float32 above ~88.7: one such token with A < 0 and no dual clip would make the loss and
    its gradient infinite. The clip (verl: 20) zeroes the gradient of the tokens it touches."""
    raw = jnp.where(keep, logp - old_logp, 0.0)  # [batch, seq]; 0 at masked tokens keeps exp finite
    return jnp.clip(raw, -clamp, clamp), keep & (jnp.abs(jax.lax.stop_gradient(raw)) > clamp)


def policy_loss(
    logp: jax.Array,
    old_logp: jax.Array,
    advantages: jax.Array,
    mask: jax.Array,
    *,
    eps_low: float = 0.2,
    eps_high: float = 0.28,
    agg: str = "token-mean",
    norm: float | None = None,
    clip_c: float | None = None,
    negative_weight: float = 1.0,
    log_ratio_clamp: float = 20.0,
    segment_ids: jax.Array | None = None,
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """Negative clipped surrogate, minimised by the optimizer.

    r_t = exp(clip(logp_t - old_logp_t, -log_ratio_clamp, log_ratio_clamp))
    l_t = -min(r_t * A, clip(r_t, 1 - eps_low, 1 + eps_high) * A)       (PPO; asymmetric "clip-higher"
          of DAPO arXiv 2503.14476, used by WebSailor's DUPO and WebSeer)
    with `clip_c` (> 1, dual-clip PPO, Ye et al. arXiv 1912.09729): where A < 0, l_t = min(l_t, -clip_c * A),
    bounding the loss when r_t is far above 1 on a negative advantage.
    `negative_weight` scales l_t where A < 0 (1: the surrogate as is; 0: positive-sample reinforcement only, the
    PSR of Zhu et al. arXiv 2506.01347, which found it raises pass@1 while learning from failures alone keeps
    pass@k); the aggregation's denominators are unchanged.
    The loss is `aggregate(l, mask, agg, segment_ids, norm=norm)` (`losses.aggregate`: token-mean,
    seq-mean-token-mean, seq-mean-token-sum, seq-mean-token-sum-norm; `norm` fixes the denominator), exact on
    packed rows for every `agg`; masked tokens (prompt, observations, padding) contribute nothing to it or to its
    gradient. l_t is positively homogeneous in A (l_t(wA) = w l_t(A) for w > 0), so per-token advantages
    scaled by importance weights give the weighted loss (the RL loop's truncated importance sampling).

    Args:
      logp: `[batch, seq]` log-probs of the sampled tokens under the current policy (differentiated).
      old_logp: `[batch, seq]` log-probs under the policy that sampled them (not differentiated).
      advantages: `[batch]` per sequence or `[batch, seq]` per token.
      mask: `[batch, seq]`, non-zero on tokens the policy wrote.
      segment_ids: `[batch, seq]` episode ids within a row (the RL step passes its batch's); None: one per row.
    Returns:
      (loss, metrics): `clip_frac_low` / `clip_frac_high` (kept tokens where the lower / upper clip
      is active, i.e. zeroes the gradient), `dual_clip_frac`, `log_ratio_clamp_frac` (kept tokens whose
      |log r| exceeded `log_ratio_clamp`), `ratio_mean`, `ratio_max`, and `approx_kl` = mean (r - 1) - log r,
      the k3 estimate of KL(old || new).
    """
    advantages = check_shapes(logp, old_logp, advantages, mask, segment_ids)
    check_aggregation(agg, norm)
    if not 0.0 <= eps_low < 1.0 or eps_high < 0.0:
        raise ValueError(f"need 0 <= eps_low < 1 and eps_high >= 0, got eps_low={eps_low}, eps_high={eps_high}")
    if clip_c is not None and clip_c <= 1.0:
        raise ValueError(f"clip_c must be > 1 (dual clip) or None, got {clip_c}")
    if negative_weight < 0.0:
        raise ValueError(f"negative_weight must be >= 0, got {negative_weight}")
    if not log_ratio_clamp > 0.0:
        raise ValueError(f"log_ratio_clamp must be > 0, got {log_ratio_clamp}")

    dtype = jnp.promote_types(logp.dtype, jnp.float32)  # at least float32
    logp = logp.astype(dtype)
    old_logp = jax.lax.stop_gradient(old_logp.astype(dtype))
    advantages = jax.lax.stop_gradient(advantages.astype(dtype))
    keep = mask != 0  # [batch, seq]
    log_ratio, clamped = clamped_log_ratio(logp, old_logp, keep, log_ratio_clamp)  # [batch, seq] each
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
    loss = aggregate(per_token, mask, agg, segment_ids, norm=norm)

    ratio_sg = jax.lax.stop_gradient(ratio)
    adv_full = jnp.broadcast_to(advantages, ratio.shape)  # [batch, seq]
    log_ratio_sg = jax.lax.stop_gradient(log_ratio)
    metrics = {
        "clip_frac_low": masked_mean(((ratio_sg < 1.0 - eps_low) & (adv_full < 0)).astype(dtype), mask),
        "clip_frac_high": masked_mean(((ratio_sg > 1.0 + eps_high) & (adv_full > 0)).astype(dtype), mask),
        "dual_clip_frac": masked_mean(dual_clipped.astype(dtype), mask),
        "log_ratio_clamp_frac": masked_mean(clamped.astype(dtype), mask),
        "ratio_mean": masked_mean(ratio_sg, mask),
        "ratio_max": jnp.max(jnp.where(keep, ratio_sg, 0.0)),
        "approx_kl": masked_mean(ratio_sg - 1.0 - log_ratio_sg, mask),
    }
    return loss, metrics
