"""Masked reductions shared by every loss: a mask entry counts when it is non-zero."""

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
