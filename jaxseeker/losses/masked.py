"""Masked reductions shared by every loss (whole arrays, or per segment of packed rows): a mask entry counts when
it is non-zero."""

import jax
import jax.numpy as jnp


def masked_sum(x: jax.Array, mask: jax.Array, axis: int | tuple[int, ...] | None = None) -> jax.Array:
    """Sum of `x` where `mask` is non-zero; masked entries (even inf/nan) add exactly 0."""
    keep = jnp.broadcast_to(mask, x.shape) != 0
    return jnp.sum(jnp.where(keep, x, jnp.zeros_like(x)), axis=axis)


def masked_count(x: jax.Array, mask: jax.Array, axis: int | tuple[int, ...] | None = None) -> jax.Array:
    """Number of entries of `x` kept by `mask`, as `x`'s float dtype (1 per kept entry)."""
    keep = jnp.broadcast_to(mask, x.shape) != 0
    dtype = x.dtype if jnp.issubdtype(x.dtype, jnp.floating) else jnp.float32
    return jnp.sum(keep.astype(dtype), axis=axis)


def masked_mean(x: jax.Array, mask: jax.Array, axis: int | tuple[int, ...] | None = None) -> jax.Array:
    """Mean of `x` over entries where `mask` is non-zero; 0 where nothing is kept (never nan)."""
    total = masked_sum(x, mask, axis)
    count = masked_count(x, mask, axis)
    return total / jnp.maximum(count, 1.0)


def segment_sum(x: jax.Array, mask: jax.Array, segment_ids: jax.Array | None = None) -> jax.Array:
    """Sums of `x` `[rows, seq]` over the kept entries of each segment: `[rows, seq]`, slot k of row r holding
    segment k + 1 of row r (a row has at most `seq` segments); slots of absent segments are 0.

    `segment_ids` `[rows, seq]`: 1, 2, … one per episode within a row, 0 = padding (left out, as are masked
    entries); None: one segment per row. Packed RL rows hold several episodes, and this is how a sequence-level
    objective reduces per episode rather than per row.
    """
    rows, seq = x.shape
    if segment_ids is None:
        segment_ids = jnp.ones(x.shape, jnp.int32)  # [rows, seq]
    keep = (jnp.broadcast_to(mask, x.shape) != 0) & (segment_ids > 0) & (segment_ids <= seq)  # [rows, seq]
    slot = jnp.arange(rows)[:, None] * seq + segment_ids - 1  # [rows, seq] flat row·segment index
    slot = jnp.where(keep, slot, rows * seq)  # out of range: dropped by segment_sum
    values = jnp.where(keep, x, jnp.zeros_like(x))  # [rows, seq]
    sums = jax.ops.segment_sum(values.reshape(-1), slot.reshape(-1), num_segments=rows * seq)  # [rows · seq]
    return sums.reshape(rows, seq)


def segment_count(mask: jax.Array, segment_ids: jax.Array | None = None) -> jax.Array:
    """Kept entries per segment, float32 `[rows, seq]` laid out as `segment_sum`'s (0: no such segment, or
    nothing kept in it)."""
    return segment_sum(jnp.ones(mask.shape, jnp.float32), mask, segment_ids)


def segment_mean(x: jax.Array, mask: jax.Array, segment_ids: jax.Array | None = None) -> jax.Array:
    """Means of `x` `[rows, seq]` over the kept entries of each segment, laid out as `segment_sum`'s; 0 (never nan)
    where a segment keeps nothing, so pair it with `segment_count(mask, segment_ids) > 0`."""
    return segment_sum(x, mask, segment_ids) / jnp.maximum(segment_count(mask, segment_ids), 1.0)
