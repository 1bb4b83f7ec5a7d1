"""Attention of a few queries per row over a KV cache allocated at its maximum, reading each row only up to its own end.

The engine's cache holds every slot at `max_len` (`generation.layout`: keys `[slots, kv_heads, head_dim, length]`,
values `[slots, kv_heads, length, head_dim]`). A row's keys below `limit` are visible to its queries (causally); a
dense attention over the whole length would read every row's cache up to the longest context held, so this one walks
the keys in blocks of `block` positions with an online softmax (the pattern of `model.blocked_attention`), for tiles
of `tile` rows at a time, each tile up to its own longest row: no `[q, length]` mask or score array. The caller orders
the rows so that a tile's rows have similar ends (the engine sorts them by length), which bounds the reads by the
keys really attended plus less than one block a row.

The cache's rows are picked by `rows` (a batch row's cache slot): the engine decodes or prefills any subset of its
slots without moving them. `rows=None` runs every slot in order (a cache sharded over its rows by a mesh: tiles are
then static slices, one tile by default, so no row is gathered across devices).

Written on XLA's own ops rather than a kernel library: on CPU no library offers ragged decode attention on this
layout; on TPU the same interface is where `jax.experimental.pallas.ops.tpu.ragged_paged_attention` plugs in.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

_NEG = -0.7 * float(jnp.finfo(jnp.float32).max)  # the score of a hidden key


def _block(cache: jax.Array, rows: jax.Array | None, lo: int, hi: int, start: jax.Array, block: int, axis: int):
    """Keys or values of cache rows `lo:hi` (or slots `rows[lo:hi]`) at positions `start … start + block` along
    `axis` (of one row: 2 for keys, 1 for values) → `[tile, kv_heads, …]`. A slot is read by a dynamic slice of its
    own (a gather over the rows runs about twice slower on XLA:CPU)."""
    if rows is None:
        return jax.lax.dynamic_slice_in_dim(cache[lo:hi], start, block, axis=axis + 1)
    sizes = (1, *cache.shape[1:])
    sizes = sizes[: axis + 1] + (block,) + sizes[axis + 2 :]

    def one(row: jax.Array) -> jax.Array:
        at = [row] + [0] * (cache.ndim - 1)
        at[axis + 1] = start
        return jax.lax.dynamic_slice(cache, at, sizes)[0]

    return jnp.stack([one(rows[i]) for i in range(lo, hi)])


def ragged_attention(
    q: jax.Array,
    k_cache: jax.Array,
    v_cache: jax.Array,
    q_pos: jax.Array,
    limit: jax.Array,
    rows: jax.Array | None = None,
    *,
    block: int = 128,
    tile: int = 4,
) -> jax.Array:
    """Causal grouped-query attention of `q` `[batch, s, heads, head_dim]` over the cache rows `rows` `[batch]`
    (default: slot i for batch row i) of `k_cache` `[slots, kv_heads, head_dim, length]` and `v_cache` `[slots,
    kv_heads, length, head_dim]` → `[batch, s, heads, head_dim]` in q's dtype.

    q_pos `[batch, s]`: each query's position (it sees keys at positions ≤ it); limit `[batch]`: keys at positions
    ≥ limit are hidden (the row's end; 0 for a row whose queries are padding: it reads nothing). `length` must be a
    multiple of `block`. A query that sees no key gets zeros.
    """
    b, s, h, d = q.shape
    kvh, length = k_cache.shape[1], k_cache.shape[3]
    if length % block:
        raise ValueError(f"ragged_attention: the cache length {length} is not a multiple of block {block}")
    g = h // kvh
    scale = jnp.asarray(d**-0.5, q.dtype)
    qg = (q * scale).reshape(b, s, kvh, g, d).transpose(0, 2, 3, 1, 4).reshape(b, kvh, g * s, d)  # [b, kv, g*s, d]
    outs = []
    for lo in range(0, b, tile):
        hi = min(lo + tile, b)
        q_t, pos_t, limit_t = qg[lo:hi], q_pos[lo:hi], limit[lo:hi]  # [t, kv, g*s, d], [t, s], [t]

        def visit(j, acc, lo=lo, hi=hi, q_t=q_t, pos_t=pos_t, limit_t=limit_t):
            m, den, o = acc  # [t, kv, g*s] ×2, [t, kv, g*s, d]
            start = j * block
            k_j = _block(k_cache, rows, lo, hi, start, block, 2).astype(q.dtype)  # [t, kv, d, block]
            v_j = _block(v_cache, rows, lo, hi, start, block, 1).astype(q.dtype)  # [t, kv, block, d]
            scores = jnp.einsum("tnqd,tndk->tnqk", q_t, k_j, preferred_element_type=jnp.float32)
            key = start + jnp.arange(block)  # [block]
            seen = (key[None, None] <= pos_t[:, :, None]) & (key[None, None] < limit_t[:, None, None])  # [t, s, block]
            seen = jnp.broadcast_to(seen[:, None, None], (hi - lo, 1, g, s, block)).reshape(hi - lo, 1, g * s, block)
            scores = jnp.where(seen, scores, _NEG)
            m_new = jnp.maximum(m, scores.max(axis=-1))
            p = jnp.where(seen, jnp.exp(scores - m_new[..., None]), 0.0)
            corr = jnp.exp(m - m_new)
            pv = jnp.einsum("tnqk,tnkd->tnqd", p.astype(v_j.dtype), v_j, preferred_element_type=jnp.float32)
            return m_new, den * corr + p.sum(axis=-1), o * corr[..., None] + pv

        init = (
            jnp.full((hi - lo, kvh, g * s), _NEG, jnp.float32),
            jnp.zeros((hi - lo, kvh, g * s), jnp.float32),
            jnp.zeros((hi - lo, kvh, g * s, d), jnp.float32),
        )
        _, den, o = jax.lax.fori_loop(0, (jnp.max(limit_t) + block - 1) // block, visit, init)
        outs.append(o / jnp.where(den > 0, den, 1.0)[..., None])
    out = jnp.concatenate(outs).astype(q.dtype)  # [b, kv, g*s, d]
    return out.reshape(b, kvh, g, s, d).transpose(0, 3, 1, 2, 4).reshape(b, s, h, d)
