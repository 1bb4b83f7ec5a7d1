"""The decoder forward pass specialised for generation: the engine's paged KV cache (`generation.layout`: one pool of
pages per layer, kv heads first, keys with their positions last) written in place through each row's page table,
attention over each row's own keys only (`ragged_attention`: no `[q, length]` mask).

Built from the same layer functions as `model.decode`:
- `decode_forward`, one decode step of some cache slots, loops over the layers in Python on the engine's per-layer
  weights: it reads every weight and attended cache slot once (a scan would copy each layer's weights and cache
  through a dynamic slice first);
- `prefill_forward` scans the stacked layers: a prefill chunk's matmuls dwarf those copies, and a scan compiles in
  a fraction of the time of unrolled layers, on a copy of the prefilled rows' caches stacked for the scan;
  `unrolled_prefill` is the same on the per-layer weights, writing into the cache's own rows in place.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from jaxseeker.generation.layout import LayerCache
from jaxseeker.generation.ragged_attention import ragged_attention
from jaxseeker.model import ModelConfig, unembed
from jaxseeker.model.layers import add_lora, dense_mlp, moe_mlp, project_qkv, rms_norm
from jaxseeker.model.rope import rope_tables

# Prefill attention walks the keys for tiles of PREFILL_TILE rows at a time, each tile up to its longest row (the engine
# orders a call's rows by length): one loop a row would make the compile grow with the rows (minutes for 32 rows).
PREFILL_TILE = 4


def _scatter(pool: jax.Array, new: jax.Array, at: jax.Array, offset: jax.Array, *, keys: bool) -> jax.Array:
    """`new` `[n, seq, kv_heads, head_dim]` written at page `at` `[n, seq]`, position `offset` `[n, seq]` within it,
    of `pool` (one part: `[pages, kv_heads, head_dim, page]` for `keys`, else `[pages, kv_heads, page, head_dim]`;
    or either with the part axis in front, of size 1); a page past the pool drops the write."""
    new = new.astype(pool.dtype)
    lead = (0,) * (pool.ndim - 4)  # written in place: a reshape of the pool costs XLA:CPU a copy where kv_heads is 1
    if keys:
        return pool.at[(*lead, at, slice(None), slice(None), offset)].set(new, mode="drop")
    return pool.at[(*lead, at, slice(None), offset, slice(None))].set(new, mode="drop")


def _write(pool: jax.Array, new: jax.Array, table: jax.Array, positions: jax.Array, limit: jax.Array, *, keys: bool):
    """`new` `[n, seq, kv_heads, head_dim]` written at `positions` `[n, seq]` of the rows whose pages `table` `[n,
    row_pages]` names, into `pool` `[shards, pages, …]` (`_scatter`); positions at or past a row's `limit` `[n]` write
    nothing (padding, idle rows). With several shards, the rows are every slot in order and each part's rows write
    into their own part of the pool (mapped over the parts: no write crosses devices)."""
    page = pool.shape[-1] if keys else pool.shape[-2]
    slot = jnp.clip(positions // page, 0, table.shape[1] - 1)
    at = jnp.where(positions < limit[:, None], jnp.take_along_axis(table, slot, axis=1), pool.shape[1])  # [n, seq]
    offset = positions % page
    shards = pool.shape[0]
    if shards == 1:
        return _scatter(pool, new, at, offset, keys=keys)
    n = new.shape[0]

    def split(x: jax.Array) -> jax.Array:  # [n, …] → [shards, n / shards, …]
        return x.reshape(shards, n // shards, *x.shape[1:])

    return jax.vmap(functools.partial(_scatter, keys=keys))(pool, split(new), split(at), split(offset))


def _output_projection(p: dict, attn: jax.Array, cfg: ModelConfig) -> jax.Array:
    """`model.layers.output_projection` of `attn` `[n, seq, heads, head_dim]` → `[n, seq, embed]` as one matmul over
    heads·head_dim: on the einsum over both axes, XLA:CPU copies the `[heads, head_dim, embed]` weight into another
    order on every call (a weight a layer a decode step), where merging the small activation's axes costs nothing."""
    n, s, h, d = attn.shape
    out = attn.reshape(n, s, h * d) @ p["o"].reshape(h * d, -1).astype(attn.dtype)  # [n, seq, embed]
    out = add_lora(out, p, "o", attn, "bshd,hdr->bsr", "bsr,re->bse")
    return out + p["o_bias"].astype(out.dtype) if cfg.o_bias else out


def _store(k_pool, v_pool, k, v, table, positions, limit) -> tuple[jax.Array, jax.Array]:
    """One layer's pools with `k`, `v` `[n, seq, kv_heads, head_dim]` written at `positions` `[n, seq]` below `limit`
    `[n]` of the rows whose pages `table` `[n, row_pages]` names."""
    return (
        _write(k_pool, k, table, positions, limit, keys=True),
        _write(v_pool, v, table, positions, limit, keys=False),
    )


def _layer(
    p: dict,
    x: jax.Array,
    k_pool: jax.Array,
    v_pool: jax.Array,
    rope,
    q_index: jax.Array,
    limit: jax.Array,
    table: jax.Array,
    moe: bool,
    cfg: ModelConfig,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """One decoder layer on `x` `[n, seq, embed]`, its keys and values written into this layer's pools at `q_index`
    `[n, seq]` of the rows whose pages `table` `[n, row_pages]` names (`_store`), and causal attention over each row's
    keys below `limit` `[n]` (`ragged_attention`, tiles of PREFILL_TILE rows)."""
    h = rms_norm(x, p["attn_norm"], cfg.rms_norm_eps)
    q, k, v = project_qkv(p, h, *rope, cfg)  # q [n, seq, heads, head_dim], k/v [n, seq, kv_heads, head_dim]
    k_pool, v_pool = _store(k_pool, v_pool, k, v, table, q_index, limit)
    attn = ragged_attention(q, k_pool, v_pool, table, q_index, limit, tile=PREFILL_TILE)
    x = x + _output_projection(p, attn, cfg)
    h = rms_norm(x, p["mlp_norm"], cfg.rms_norm_eps)
    return x + (moe_mlp(p, h, cfg) if moe else dense_mlp(p, h, cfg)), k_pool, v_pool


def _inputs(params: dict, tokens: jax.Array, counts: jax.Array, ends: jax.Array, cfg: ModelConfig):
    """The embedded tokens `[n, seq]` → `[n, seq, embed]`, the positions they go to (from `ends` `[n]`) `[n, seq]`,
    each row's end after its `counts` `[n]` real tokens `[n]` (0 for a row of padding only: it attends to nothing)
    and the RoPE tables."""
    q_index = ends[:, None] + jnp.arange(tokens.shape[1])[None, :]  # [n, seq]
    limit = jnp.where(counts > 0, ends + counts, 0)  # [n]
    x = params["embed"].astype(jnp.dtype(cfg.compute_dtype))[tokens]
    return x, q_index, limit, rope_tables(q_index, cfg)


def _rows(cache: LayerCache, rows: jax.Array | None) -> tuple[jax.Array, jax.Array]:
    """(ends `[n]`, page tables `[n, row_pages]`) of slots `rows` (None: every slot in order)."""
    if rows is None:
        return cache.end, cache.table
    return cache.end[rows], cache.table[rows]


def _advance(cache: LayerCache, k, v, rows: jax.Array | None, moved: jax.Array) -> LayerCache:
    """The cache with new pools and the ends of slots `rows` (None: all) moved by `moved` `[n]`."""
    end = cache.end + moved if rows is None else cache.end.at[rows].add(moved)
    return cache.replace(k=tuple(k), v=tuple(v), end=end)


def unrolled_prefill(
    params: dict,
    tokens: jax.Array,
    counts: jax.Array,
    rows: jax.Array | None,
    cache: LayerCache,
    cfg: ModelConfig,
) -> LayerCache:
    """Write `tokens` `[n, seq]` into cache slots `rows` `[n]` (distinct; None: every slot in order) at each slot's end
    through the model's layers, looped over in Python on the engine's per-layer weights (`layout.engine_params`); no
    logits.

    counts `[n]`: the real tokens of each row, left-aligned; the padding after them writes nothing. Every position a
    row writes must lie in a page its table names.
    """
    ends, table = _rows(cache, rows)
    x, q_index, limit, rope = _inputs(params, tokens, counts, ends, cfg)
    new_k, new_v = [], []
    for p, k_pool, v_pool, moe in zip(params["layers"], cache.k, cache.v, cfg.is_moe_layer, strict=True):
        x, k_pool, v_pool = _layer(p, x, k_pool, v_pool, rope, q_index, limit, table, moe, cfg)
        new_k.append(k_pool)
        new_v.append(v_pool)
    return _advance(cache, new_k, new_v, rows, counts)


def decode_forward(
    params: dict,
    tokens: jax.Array,
    active: jax.Array,
    rows: jax.Array | None,
    cache: LayerCache,
    cfg: ModelConfig,
    *,
    tile: int,
) -> tuple[jax.Array, LayerCache]:
    """One decode step of cache slots `rows` `[n]` (distinct; None: every slot in order): each row's token `tokens`
    `[n]` is written at the slot's end where `active` `[n]` (an inactive row writes nothing and keeps its end) and
    attends to its own slot's keys up to it, read by `ragged_attention` (page by page, tiles of `tile` rows: the
    caller orders the rows by length). `params` in the engine's layout. Returns (logits `[n, vocab]` f32, cache)."""
    ends, table = _rows(cache, rows)  # [n], [n, row_pages]
    limit = jnp.where(active, ends + 1, 0)  # [n]: an inactive row reads and writes nothing
    x = params["embed"].astype(jnp.dtype(cfg.compute_dtype))[tokens][:, None]  # [n, 1, embed]
    rope = rope_tables(ends[:, None], cfg)
    new_k, new_v = [], []
    for p, k_pool, v_pool, moe in zip(params["layers"], cache.k, cache.v, cfg.is_moe_layer, strict=True):
        h = rms_norm(x, p["attn_norm"], cfg.rms_norm_eps)
        q, k, v = project_qkv(p, h, *rope, cfg)  # q [n, 1, heads, head_dim], k/v [n, 1, kv_heads, head_dim]
        k_pool, v_pool = _store(k_pool, v_pool, k, v, table, ends[:, None], limit)
        attn = ragged_attention(q, k_pool, v_pool, table, ends[:, None], limit, tile=tile)
        x = x + _output_projection(p, attn, cfg)
        h = rms_norm(x, p["mlp_norm"], cfg.rms_norm_eps)
        x = x + (moe_mlp(p, h, cfg) if moe else dense_mlp(p, h, cfg))
        new_k.append(k_pool)
        new_v.append(v_pool)
    cache = _advance(cache, new_k, new_v, rows, active.astype(jnp.int32))
    x = rms_norm(x[:, 0], params["final_norm"], cfg.rms_norm_eps)
    out = jnp.einsum("be,ev->bv", x, unembed(params, cfg).astype(x.dtype), preferred_element_type=jnp.float32)
    return out, cache


def prefill_forward(
    params: dict, tokens: jax.Array, counts: jax.Array, rows: jax.Array | None, cache: LayerCache, cfg: ModelConfig
) -> LayerCache:
    """`unrolled_prefill` with `params` stacked as `model.init_params` makes them, the layers of each group scanned
    (each group's pools stacked for the scan, then split again)."""
    ends, table = _rows(cache, rows)
    x, q_index, limit, rope = _inputs(params, tokens, counts, ends, cfg)
    new_k, new_v, first = [], [], 0
    for (moe, n), group in zip(cfg.layer_groups, params["blocks"], strict=True):

        def body(carry, xs, moe=moe):
            x, k_all, v_all = carry  # pools [layers, shards, pages, …]
            p, i = xs
            x, k_i, v_i = _layer(p, x, k_all[i], v_all[i], rope, q_index, limit, table, moe, cfg)
            return (x, k_all.at[i].set(k_i), v_all.at[i].set(v_i)), None

        stacked = (jnp.stack(cache.k[first : first + n]), jnp.stack(cache.v[first : first + n]))
        (x, k_all, v_all), _ = jax.lax.scan(body, (x, *stacked), (group, jnp.arange(n)))
        new_k += list(k_all)
        new_v += list(v_all)
        first += n
    return _advance(cache, new_k, new_v, rows, counts)
