"""Attention over rows split along the sequence: ring attention, and all-gather-KV attention.

Both run on one device's share of the rows inside `jax.shard_map` over the mesh axes that split the sequence
(`parallel.context_attention` builds the call); queries, keys and values carry coordinates (`Coords`: index in
the row as written, segment id), so causality and packing are exact in any layout (`context_layout`).

Ring (`ring_attention`): each device keeps its queries and passes its key / value chunk (with its coordinates)
to the next device with `ppermute`, n - 1 times; at each step it attends to the chunk it holds
(`blocked_forward`) and merges the partial result by its log-sum-exp (online softmax across devices,
`merge_partials`). The transfer of the next chunk does not depend on the step's attention, so XLA can overlap
them. The backward (a custom VJP) goes round the ring again with the chunks and their gradient accumulators:
each device adds its share of dk / dv to the chunk's accumulator before passing it on, and after n passes every
accumulator is home. A device holds two key / value chunks (and two f32 gradient chunks) at a time, never the
whole row's.

All-gather (`all_gather_attention`): each device gathers the whole row's keys and values (and coordinates) and
attends to them with its own queries; autodiff reduce-scatters the key / value gradients. Simpler, and one
collective per layer instead of n, for the memory of one layer's whole-row K/V per device.

Causal load balancing is the layout's (`context_layout.balanced_order`): the kernels take any order.
Reference: MaxText's context parallelism (all-gather K/V into splash with `q_seq_shards`; ring over the
`context` axis) and Liu et al., "Ring Attention with Blockwise Transformers" (arXiv 2310.01889).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from jaxseeker.model.blocked_attention import (
    Coords,
    blocked_attention,
    blocked_backward,
    blocked_forward,
    merge_partials,
    no_keys,
)


def _pass_on(x, axes: tuple[str, ...], shards: int):
    """`x` (a pytree) from each device to the next one of the ring over `axes`."""
    return jax.lax.ppermute(x, axes, [(i, (i + 1) % shards) for i in range(shards)])


def _ring_forward(q, k, v, q_coords: Coords, kv_coords: Coords, axes, shards: int, block: int):
    """(output f32 `[batch, q, heads, head_dim]`, log-sum-exp f32 `[batch, q, heads]`) over every device's chunk."""

    def attend(out, lse, chunk):
        k, v, kv_coords = chunk
        return merge_partials(out, lse, *blocked_forward(q, k, v, q_coords, kv_coords, block=block))

    def step(_, carry):
        out, lse, chunk = carry
        upcoming = _pass_on(chunk, axes, shards)  # independent of this step's attention: XLA may overlap them
        return (*attend(out, lse, chunk), upcoming)

    init = (*no_keys(q), (k, v, kv_coords))
    out, lse, chunk = jax.lax.fori_loop(0, shards - 1, step, init)
    return attend(out, lse, chunk)


@functools.partial(jax.custom_vjp, nondiff_argnums=(5, 6, 7))
def _ring(q, k, v, q_coords, kv_coords, axes, shards, block):
    return _ring_forward(q, k, v, q_coords, kv_coords, axes, shards, block)[0].astype(q.dtype)


def _ring_fwd(q, k, v, q_coords, kv_coords, axes, shards, block):
    out, lse = _ring_forward(q, k, v, q_coords, kv_coords, axes, shards, block)
    out = out.astype(q.dtype)
    return out, (q, k, v, q_coords, kv_coords, out, lse)


def _ring_bwd(axes, shards, block, residuals, dout):
    """dq from every chunk; each chunk's dk / dv accumulated on its way round the ring and home after n passes."""
    q, k, v, q_coords, kv_coords, out, lse = residuals

    def step(_, carry):
        dq, (k, v, kv_coords, dk, dv) = carry
        dq_c, dk_c, dv_c = blocked_backward(q, k, v, q_coords, kv_coords, out, lse, dout, block=block)
        return dq + dq_c, _pass_on((k, v, kv_coords, dk + dk_c, dv + dv_c), axes, shards)

    zeros_kv = jnp.zeros(k.shape, jnp.float32)
    init = (jnp.zeros(q.shape, jnp.float32), (k, v, kv_coords, zeros_kv, zeros_kv))
    dq, (_, _, _, dk, dv) = jax.lax.fori_loop(0, shards, step, init)
    return dq.astype(q.dtype), dk.astype(k.dtype), dv.astype(v.dtype), None, None  # coordinates: integers


_ring.defvjp(_ring_fwd, _ring_bwd)


def ring_attention(
    q: jax.Array,
    k: jax.Array,
    v: jax.Array,
    q_coords: Coords,
    kv_coords: Coords,
    *,
    axes: tuple[str, ...],
    shards: int,
    block: int = 512,
) -> jax.Array:
    """Inside `shard_map`: causal attention within segments of this device's queries `[batch, q, heads, head_dim]`
    over the keys / values `[batch, k, kv_heads, head_dim]` of all `shards` devices of the ring over mesh `axes`,
    each holding its own chunk (module docstring). Differentiable in q, k and v."""
    if shards == 1:
        return blocked_attention(q, k, v, q_coords, kv_coords, block=block)
    return _ring(q, k, v, q_coords, kv_coords, tuple(axes), shards, block)


def all_gather_attention(
    q: jax.Array,
    k: jax.Array,
    v: jax.Array,
    q_coords: Coords,
    kv_coords: Coords,
    *,
    axes: tuple[str, ...],
    shards: int,
    block: int = 512,
) -> jax.Array:
    """Inside `shard_map`: this device's queries over the keys / values of the whole row, gathered over `axes`
    (module docstring). Differentiable in q, k and v (the key / value gradients are reduce-scattered)."""
    if shards > 1:
        gather = functools.partial(jax.lax.all_gather, axis_name=tuple(axes), axis=1, tiled=True)
        k, v, kv_coords = gather(k), gather(v), Coords(*(gather(x) for x in kv_coords))  # [batch, seq, …]
    return blocked_attention(q, k, v, q_coords, kv_coords, block=block)
