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


def _block(cache: jax.Array, rows: jax.Array | None, lo, tile: int, start: jax.Array, block: int, axis: int):
    """Keys or values of cache rows `lo … lo + tile` (or slots `rows`, `[tile]`) at positions `start … start + block`
    along `axis` (of one row: 2 for keys, 1 for values) → `[tile, kv_heads, …]`. A slot is read by a dynamic slice
    of its own (a gather over the rows runs about twice slower on XLA:CPU)."""
    if rows is None:
        at = [lo] + [0] * (cache.ndim - 1)
        at[axis + 1] = start
        sizes = [tile, *cache.shape[1:]]
        sizes[axis + 1] = block
        return jax.lax.dynamic_slice(cache, at, sizes)
    sizes = (1, *cache.shape[1:])
    sizes = sizes[: axis + 1] + (block,) + sizes[axis + 2 :]

    def one(row: jax.Array) -> jax.Array:
        at = [row] + [0] * (cache.ndim - 1)
        at[axis + 1] = start
        return jax.lax.dynamic_slice(cache, at, sizes)[0]

    return jnp.stack([one(rows[i]) for i in range(tile)])


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
    multiple of `block`. A query that sees no key gets zeros. The tiles run as one loop, not traced one by one:
    a decode program of 32 rows would otherwise trace 8 tiles × the layers (seconds of tracing, and as much HLO).
    """
    b, s, h, d = q.shape
    kvh, length = k_cache.shape[1], k_cache.shape[3]
    if length % block:
        raise ValueError(f"ragged_attention: the cache length {length} is not a multiple of block {block}")
    g = h // kvh
    tile = min(tile, b)
    tiles = -(-b // tile)
    pad = tiles * tile - b  # padding rows: limit 0, they read nothing
    if pad and rows is None:
        rows = jnp.arange(b, dtype=jnp.int32)
    scale = jnp.asarray(d**-0.5, q.dtype)
    qg = (q * scale).reshape(b, s, kvh, g, d).transpose(0, 2, 3, 1, 4).reshape(b, kvh, g * s, d)  # [b, kv, g*s, d]
    if pad:
        qg, q_pos = jnp.pad(qg, ((0, pad), (0, 0), (0, 0), (0, 0))), jnp.pad(q_pos, ((0, pad), (0, 0)))
        limit, rows = jnp.pad(limit, (0, pad)), jnp.pad(rows, (0, pad))

    def attend(lo) -> jax.Array:
        """The attention of rows `lo … lo + tile` → `[tile, kv, g*s, d]`."""
        q_t = jax.lax.dynamic_slice_in_dim(qg, lo, tile)  # [t, kv, g*s, d]
        pos_t = jax.lax.dynamic_slice_in_dim(q_pos, lo, tile)  # [t, s]
        limit_t = jax.lax.dynamic_slice_in_dim(limit, lo, tile)  # [t]
        rows_t = None if rows is None else jax.lax.dynamic_slice_in_dim(rows, lo, tile)  # [t]

        def visit(j, acc):
            m, den, o = acc  # [t, kv, g*s] ×2, [t, kv, g*s, d]
            start = j * block
            k_j = _block(k_cache, rows_t, lo, tile, start, block, 2).astype(q.dtype)  # [t, kv, d, block]
            v_j = _block(v_cache, rows_t, lo, tile, start, block, 1).astype(q.dtype)  # [t, kv, block, d]
            scores = jnp.einsum("tnqd,tndk->tnqk", q_t, k_j, preferred_element_type=jnp.float32)
            key = start + jnp.arange(block)  # [block]
            seen = (key[None, None] <= pos_t[:, :, None]) & (key[None, None] < limit_t[:, None, None])  # [t, s, block]
            seen = jnp.broadcast_to(seen[:, None, None], (tile, 1, g, s, block)).reshape(tile, 1, g * s, block)
            scores = jnp.where(seen, scores, _NEG)
            m_new = jnp.maximum(m, scores.max(axis=-1))
            p = jnp.where(seen, jnp.exp(scores - m_new[..., None]), 0.0)
            corr = jnp.exp(m - m_new)
            pv = jnp.einsum("tnqk,tnkd->tnqd", p.astype(v_j.dtype), v_j, preferred_element_type=jnp.float32)
            return m_new, den * corr + p.sum(axis=-1), o * corr[..., None] + pv

        init = (
            jnp.full((tile, kvh, g * s), _NEG, jnp.float32),
            jnp.zeros((tile, kvh, g * s), jnp.float32),
            jnp.zeros((tile, kvh, g * s, d), jnp.float32),
        )
        _, den, o = jax.lax.fori_loop(0, (jnp.max(limit_t) + block - 1) // block, visit, init)
        return o / jnp.where(den > 0, den, 1.0)[..., None]

    # One loop over the tiles: split into one loop a core, XLA:CPU still ran them one after the other (no faster).
    if tiles == 1:
        out = attend(0)
    else:
        out = jax.lax.fori_loop(
            0,
            tiles,
            lambda i, out: jax.lax.dynamic_update_slice_in_dim(out, attend(i * tile), i * tile, axis=0),
            jnp.zeros((tiles * tile, kvh, g * s, d), jnp.float32),
        )
    out = out[:b].astype(q.dtype)  # [b, kv, g*s, d]
    return out.reshape(b, kvh, g, s, d).transpose(0, 3, 1, 2, 4).reshape(b, s, h, d)
