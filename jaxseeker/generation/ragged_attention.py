"""Attention of a few queries per row over a paged KV cache, reading each row only up to its own end.

The engine's cache is paged (`generation.layout`): each layer's keys live in a pool `[shards, pages, kv_heads,
head_dim, page]`, its values in `[shards, pages, kv_heads, page, head_dim]`, and a row's table names the page holding
each of its runs of `page` positions. A row's keys below `limit` are visible to its queries (causally); this walks
them page by page with an online softmax (the pattern of `model.blocked_attention`), for tiles of `tile` rows at a
time, each tile up to its own longest row: no `[q, length]` mask or score array. The caller orders the rows so that a
tile's rows have similar ends (the engine sorts them by length), which bounds the reads by the keys really attended
plus less than one page a row.

Where a mesh splits the slots (and the pool) into `shards` parts, the batch holds every slot in order and each part's
rows read their own part of the pool: the parts are mapped over, so no page crosses devices.

Written on XLA's own ops rather than a kernel library: on CPU no library offers ragged paged decode attention; on TPU
the same interface is where `jax.experimental.pallas.ops.tpu.ragged_paged_attention` plugs in.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

_NEG = -0.7 * float(jnp.finfo(jnp.float32).max)  # the score of a hidden key


def _pages(pool: jax.Array, at: jax.Array) -> jax.Array:
    """Pages `at` `[tile]` of `pool` (`[pages, kv_heads, …]`, or `[1, pages, kv_heads, …]`: a whole pool of one part,
    read as it is, since a reshape of it costs XLA:CPU a copy of the pool where kv_heads is 1) → `[tile, kv_heads,
    …]`, each read by a dynamic slice of its own (a gather of the pages runs about twice slower on XLA:CPU)."""
    lead = pool.ndim - 4  # 1 with the part axis
    sizes = (1,) * (lead + 1) + pool.shape[lead + 1 :]
    zeros = (0,) * 3
    return jnp.stack(
        [
            jax.lax.dynamic_slice(pool, (0,) * lead + (at[i], *zeros), sizes).reshape(pool.shape[lead + 1 :])
            for i in range(at.shape[0])
        ]
    )


def ragged_attention(
    q: jax.Array,
    k_pool: jax.Array,
    v_pool: jax.Array,
    table: jax.Array,
    q_pos: jax.Array,
    limit: jax.Array,
    *,
    tile: int = 4,
) -> jax.Array:
    """Causal grouped-query attention of `q` `[batch, s, heads, head_dim]` over the pages of `k_pool` `[shards, pages,
    kv_heads, head_dim, page]` and `v_pool` `[shards, pages, kv_heads, page, head_dim]` that each row's `table`
    `[batch, row_pages]` names → `[batch, s, heads, head_dim]` in q's dtype.

    q_pos `[batch, s]`: each query's position (it sees keys at positions ≤ it); limit `[batch]`: keys at positions
    ≥ limit are hidden (the row's end; 0 for a row whose queries are padding: it reads nothing). With several shards,
    batch row i reads part `i // (batch / shards)` of the pools (every slot in order). A query that sees no key gets
    zeros. The tiles run as one loop, not traced one by one: a decode program of 32 rows would otherwise trace 8 tiles
    × the layers (seconds of tracing, and as much HLO).
    """
    shards = k_pool.shape[0]
    attend = functools.partial(_attention, tile=tile)
    if shards == 1:
        return attend(q, k_pool, v_pool, table, q_pos, limit)
    b = q.shape[0]

    def split(x: jax.Array) -> jax.Array:  # [batch, …] → [shards, batch / shards, …]
        return x.reshape(shards, b // shards, *x.shape[1:])

    out = jax.vmap(attend)(split(q), k_pool, v_pool, split(table), split(q_pos), split(limit))
    return out.reshape(b, *out.shape[2:])


def _attention(
    q: jax.Array, k_pool: jax.Array, v_pool: jax.Array, table: jax.Array, q_pos: jax.Array, limit: jax.Array, *, tile
) -> jax.Array:
    """`ragged_attention` over one part of the pools: k_pool `[pages, kv_heads, head_dim, page]`, v_pool `[pages,
    kv_heads, page, head_dim]` (or either with the part axis in front, of size 1)."""
    b, s, h, d = q.shape
    kvh, page = k_pool.shape[-3], k_pool.shape[-1]
    g = h // kvh
    tile = min(tile, b)
    tiles = -(-b // tile)
    pad = tiles * tile - b  # padding rows: limit 0, they read nothing
    scale = jnp.asarray(d**-0.5, q.dtype)
    qg = (q * scale).reshape(b, s, kvh, g, d).transpose(0, 2, 3, 1, 4).reshape(b, kvh, g * s, d)  # [b, kv, g*s, d]
    if pad:
        qg, q_pos = jnp.pad(qg, ((0, pad), (0, 0), (0, 0), (0, 0))), jnp.pad(q_pos, ((0, pad), (0, 0)))
        limit, table = jnp.pad(limit, (0, pad)), jnp.pad(table, ((0, pad), (0, 0)))

    def attend(lo) -> jax.Array:
        """The attention of rows `lo … lo + tile` → `[tile, kv, g*s, d]`."""
        q_t = jax.lax.dynamic_slice_in_dim(qg, lo, tile)  # [t, kv, g*s, d]
        pos_t = jax.lax.dynamic_slice_in_dim(q_pos, lo, tile)  # [t, s]
        limit_t = jax.lax.dynamic_slice_in_dim(limit, lo, tile)  # [t]
        table_t = jax.lax.dynamic_slice_in_dim(table, lo, tile)  # [t, row_pages]

        def visit(j, acc):
            m, den, o = acc  # [t, kv, g*s] ×2, [t, kv, g*s, d]
            at = table_t[:, j]  # [t]: each row's page j
            k_j = _pages(k_pool, at).astype(q.dtype)  # [t, kv, d, page]
            v_j = _pages(v_pool, at).astype(q.dtype)  # [t, kv, page, d]
            scores = jnp.einsum("tnqd,tndk->tnqk", q_t, k_j, preferred_element_type=jnp.float32)
            key = j * page + jnp.arange(page)  # [page]
            seen = (key[None, None] <= pos_t[:, :, None]) & (key[None, None] < limit_t[:, None, None])  # [t, s, page]
            seen = jnp.broadcast_to(seen[:, None, None], (tile, 1, g, s, page)).reshape(tile, 1, g * s, page)
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
        _, den, o = jax.lax.fori_loop(0, (jnp.max(limit_t) + page - 1) // page, visit, init)
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
