"""How a per-token loss `[batch, seq]` becomes the scalar the optimizer minimises (verl's and Tunix's
`loss_agg_mode`): which tokens and sequences weigh how much, and what the sum is divided by.

Every aggregation is a numerator over a count. With l_it the loss of token t of sequence i, m_it its mask and
|o_i| = sum_t m_it the sequence's kept tokens (sequences without any are left out):

  agg                      numerator                      count (what `norm` replaces)
  token-mean               sum_i sum_t m_it l_it          sum_i |o_i|        DAPO arXiv 2503.14476
  seq-mean-token-mean      sum_i sum_t m_it l_it / |o_i|  number of seqs    GRPO arXiv 2402.03300
  seq-mean-token-sum       sum_i sum_t m_it l_it          number of seqs    (verl's seq-mean-token-sum)
  seq-mean-token-sum-norm  sum_i sum_t m_it l_it / L      number of seqs    Dr. GRPO arXiv 2503.20783

A fixed `norm` replaces the count for the first three (the loss no longer depends on how many tokens or
sequences the batch holds); for seq-mean-token-sum-norm it is L, Dr. GRPO's constant per-sequence normaliser
(the generation budget in tokens, Tunix's `sequence-mean-token-scale` with its `norm`), and it is required: the
padded row length would change with every batch layout. A sequence is a segment of `segment_ids` (`[batch, seq]`,
1, 2, … per episode of a packed row, 0 = padding; None: one sequence per row), so every aggregation is exact on
packed rows.
"""

import jax
import jax.numpy as jnp

from jaxseeker.losses.masked import masked_count, masked_sum, segment_count, segment_sum

AGGREGATIONS = ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm")


def check_aggregation(agg: str, norm: float | None) -> None:
    """Raise ValueError unless `agg` is one of `AGGREGATIONS` and `norm` suits it (see the module docstring)."""
    if agg not in AGGREGATIONS:
        raise ValueError(f"unknown agg {agg!r}; allowed values: {', '.join(AGGREGATIONS)}")
    if norm is not None and not norm > 0:
        raise ValueError(f"norm must be > 0 or None, got {norm}")
    if agg == "seq-mean-token-sum-norm" and norm is None:
        raise ValueError(
            "agg 'seq-mean-token-sum-norm' needs `norm`: Dr. GRPO's constant per-sequence normaliser L "
            "(the generation budget in tokens); the padded row length would change with the batch layout"
        )


def count_is_fixed(agg: str, norm: float | None) -> bool:
    """Whether the aggregation divides by a constant (`norm` given, other than seq-mean-token-sum-norm's L)."""
    return norm is not None and agg != "seq-mean-token-sum-norm"


def _parts(
    per_token: jax.Array, mask: jax.Array, agg: str, segment_ids: jax.Array | None
) -> tuple[jax.Array, jax.Array]:
    """(numerator without L, batch-dependent count) of `agg`."""
    if agg == "token-mean":
        return masked_sum(per_token, mask), masked_count(per_token, mask)
    seq_sum = segment_sum(per_token, mask, segment_ids)  # [batch, segments]
    seq_len = segment_count(mask, segment_ids).astype(seq_sum.dtype)  # [batch, segments]
    has_tokens = seq_len > 0  # [batch, segments]
    if agg == "seq-mean-token-mean":
        seq_sum = seq_sum / jnp.maximum(seq_len, 1.0)
    return jnp.sum(jnp.where(has_tokens, seq_sum, 0.0)), jnp.sum(has_tokens.astype(seq_sum.dtype))


def aggregate(
    per_token: jax.Array, mask: jax.Array, agg: str, segment_ids: jax.Array | None = None, *, norm: float | None = None
) -> jax.Array:
    """Reduce a `[batch, seq]` per-token loss to a scalar with one of `AGGREGATIONS` (module docstring): the
    numerator over the count, or over `norm` when it fixes the count; 0 (never nan) when nothing is kept."""
    check_aggregation(agg, norm)
    numerator, count = _parts(per_token, mask, agg, segment_ids)
    if agg == "seq-mean-token-sum-norm":
        numerator = numerator / norm
    if count_is_fixed(agg, norm):
        return numerator / norm
    return numerator / jnp.maximum(count, 1.0)


def aggregation_count(
    mask: jax.Array, agg: str, segment_ids: jax.Array | None = None, *, norm: float | None = None
) -> jax.Array | None:
    """What `aggregate` divides by in this batch: kept tokens (token-mean), sequences with kept tokens (the
    seq-mean ones), or None when `norm` fixes the count. Gradient accumulation weighs each micro-batch's loss by
    its count over the whole update's, so that the update divides by the update's count (DAPO's 1 / sum_i |o_i|
    over the whole batch, not a mean of per-micro-batch means)."""
    check_aggregation(agg, norm)
    if count_is_fixed(agg, norm):
        return None
    return _parts(jnp.zeros(jnp.shape(mask), jnp.float32), mask, agg, segment_ids)[1]
