"""KL penalty to a reference policy and the policy-entropy metric, both masked to policy tokens."""

import jax
import jax.numpy as jnp

from jaxseeker.losses.aggregate import aggregate
from jaxseeker.losses.masked import masked_mean

KL_ESTIMATORS = ("k1", "k2", "k3")


def kl_per_token(logp: jax.Array, ref_logp: jax.Array, *, estimator: str = "k3") -> jax.Array:
    """Per-token estimate of KL(pi || pi_ref) from samples of pi (Schulman, "Approximating KL divergence").

    With d = ref_logp - logp (log of pi_ref / pi at the sampled token):
      k1 = -d                 unbiased, high variance, can be negative
      k2 = d^2 / 2            biased, low variance
      k3 = exp(d) - 1 - d     unbiased, low variance, >= 0 (GRPO, DeepSeekMath arXiv 2402.03300)
    """
    if estimator not in KL_ESTIMATORS:
        raise ValueError(f"unknown KL estimator {estimator!r}; allowed values: {', '.join(KL_ESTIMATORS)}")
    if logp.shape != ref_logp.shape:
        raise ValueError(f"logp {tuple(logp.shape)} and ref_logp {tuple(ref_logp.shape)} must have the same shape")
    dtype = jnp.promote_types(logp.dtype, jnp.float32)
    d = jax.lax.stop_gradient(ref_logp.astype(dtype)) - logp.astype(dtype)  # [batch, seq]
    if estimator == "k1":
        return -d
    if estimator == "k2":
        return 0.5 * d * d
    return jnp.expm1(d) - d


def kl_penalty(
    logp: jax.Array,
    ref_logp: jax.Array,
    mask: jax.Array,
    *,
    estimator: str = "k3",
    agg: str = "token-mean",
    norm: float | None = None,
    segment_ids: jax.Array | None = None,
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """KL(pi || pi_ref) over kept tokens, a loss term to add as beta * kl, reduced as the policy loss is.

    KL = aggregate(k(logp, ref_logp), mask, agg, segment_ids, norm=norm) with k one of `kl_per_token`'s
    estimators and the policy loss's own aggregation (`losses.aggregate`; verl aggregates its KL loss with the
    actor's `loss_agg_mode` too); token-mean gives sum_t m_t k_t / sum_t m_t. The reference log-probs are not
    differentiated.

    Args:
      logp, ref_logp, mask: `[batch, seq]`; mask non-zero on tokens the policy wrote.
      segment_ids: `[batch, seq]` episodes of packed rows (None: one per row), for the sequence aggregations.
    Returns:
      (kl, {"kl": kl}).
    """
    if mask.shape != logp.shape:
        raise ValueError(f"mask has shape {tuple(mask.shape)}, expected logp's shape {tuple(logp.shape)}")
    per_token = kl_per_token(jnp.where(mask != 0, logp, ref_logp), ref_logp, estimator=estimator)  # [batch, seq]
    kl = aggregate(per_token, mask, agg, segment_ids, norm=norm)
    return kl, {"kl": jax.lax.stop_gradient(kl)}


def token_entropy(logits: jax.Array) -> jax.Array:
    """Entropy of softmax(logits) per position: `[batch, seq, vocab]` -> `[batch, seq]` (float32 or wider)."""
    logits = logits.astype(jnp.promote_types(logits.dtype, jnp.float32))  # [batch, seq, vocab]
    log_probs = jax.nn.log_softmax(logits, axis=-1)  # [batch, seq, vocab]
    return -jnp.sum(jnp.exp(log_probs) * log_probs, axis=-1)  # [batch, seq]


def entropy_from_logits(logits: jax.Array, mask: jax.Array) -> jax.Array:
    """Mean entropy H = -sum_v p_v log p_v over kept positions; logits `[batch, seq, vocab]`, mask `[batch, seq]`."""
    if mask.shape != logits.shape[:-1]:
        raise ValueError(f"mask has shape {tuple(mask.shape)}, expected logits' [batch, seq] = {logits.shape[:-1]}")
    return masked_mean(token_entropy(logits), mask)
