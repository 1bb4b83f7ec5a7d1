"""The decoder forward pass specialised for generation: the engine's KV cache (`generation.layout`: one array per
layer, kv heads first, keys with their positions last) updated in place, attention over each row's own keys only
(`ragged_attention`: no `[q, length]` mask).

Built from the same layer functions as `model.decode`:
- `decode_forward`, one decode step of some cache slots, loops over the layers in Python on the engine's per-layer
  weights: it reads every weight and attended cache slot once (a scan would copy each layer's weights and cache
  through a dynamic slice first);
- `prefill_forward` scans the stacked layers: a prefill chunk's matmuls dwarf those copies, and a scan compiles in
  a fraction of the time of unrolled layers (the engine compiles one prefill per rows bucket and cache length);
  `unrolled_prefill` is the same on the per-layer weights.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxseeker.generation.layout import LayerCache
from jaxseeker.generation.ragged_attention import ragged_attention
from jaxseeker.model import ModelConfig, unembed
from jaxseeker.model.layers import (
    dense_mlp,
    moe_mlp,
    output_projection,
    project_qkv,
    rms_norm,
)
from jaxseeker.model.rope import rope_tables


def _write(cache: jax.Array, new: jax.Array, positions: jax.Array, *, transposed: bool) -> jax.Array:
    """`new` `[batch, seq, kv_heads, head_dim]` written at `positions` `[batch, seq]` into `cache`, `[batch, kv_heads,
    length, head_dim]`, or `[batch, kv_heads, head_dim, length]` when `transposed` (positions past the end are
    dropped). Mapped over the rows, so the scatter keeps the batch as a batch dimension and a cache sharded over its
    rows is written shard by shard."""

    def row(c: jax.Array, n: jax.Array, p: jax.Array) -> jax.Array:  # c without batch, n [seq, kv_heads, head_dim]
        n = n.astype(c.dtype)
        if transposed:  # c [kv_heads, head_dim, length]
            return c.at[:, :, p].set(n.transpose(1, 2, 0), mode="drop")
        return c.at[:, p].set(n.swapaxes(0, 1), mode="drop")  # c [kv_heads, length, head_dim]

    return jax.vmap(row)(cache, new, positions)


def _layer(
    p: dict,
    x: jax.Array,
    k_cache: jax.Array,
    v_cache: jax.Array,
    rope,
    q_index: jax.Array,
    limit: jax.Array,
    moe: bool,
    cfg: ModelConfig,
    block: int,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """One decoder layer on `x` `[batch, seq, embed]`, its keys and values written into this layer's caches (keys
    `[batch, kv_heads, head_dim, length]`, values `[batch, kv_heads, length, head_dim]`) at `q_index`, and causal
    attention over each row's keys below `limit` `[batch]` (`ragged_attention`, one row at a time)."""
    h = rms_norm(x, p["attn_norm"], cfg.rms_norm_eps)
    q, k, v = project_qkv(p, h, *rope, cfg)  # q [batch, seq, heads, head_dim], k/v [batch, seq, kv_heads, head_dim]
    k_cache, v_cache = _write(k_cache, k, q_index, transposed=True), _write(v_cache, v, q_index, transposed=False)
    attn = ragged_attention(q, k_cache, v_cache, q_index, limit, block=block, tile=1)
    x = x + output_projection(p, attn, cfg)
    h = rms_norm(x, p["mlp_norm"], cfg.rms_norm_eps)
    return x + (moe_mlp(p, h, cfg) if moe else dense_mlp(p, h, cfg)), k_cache, v_cache


def _inputs(params: dict, tokens: jax.Array, segment_ids: jax.Array, cache: LayerCache, cfg: ModelConfig):
    """The embedded tokens `[batch, seq, embed]`, the cache slots they go to `[batch, seq]`, the cache's segment ids
    with them `[batch, length]`, each row's end after them `[batch]` (0 for a row of padding only: it attends to
    nothing) and the RoPE tables."""
    b, s = tokens.shape
    q_index = cache.end[:, None] + jnp.arange(s)[None, :]  # [batch, seq]
    segments = jax.vmap(lambda row, p, ids: row.at[p].set(ids, mode="drop"))(cache.segment_ids, q_index, segment_ids)
    n_real = jnp.sum(segment_ids != 0, axis=1).astype(jnp.int32)  # [batch]
    limit = jnp.where(n_real > 0, cache.end + n_real, 0)
    x = params["embed"].astype(jnp.dtype(cfg.compute_dtype))[tokens]
    return x, q_index, segments, limit, rope_tables(q_index, cfg)


def _advance(cache: LayerCache, k, v, segments: jax.Array, segment_ids: jax.Array) -> LayerCache:
    """The cache with new keys and values, its segment ids, and every end moved past the row's real tokens."""
    n_real = jnp.sum(segment_ids != 0, axis=1).astype(jnp.int32)
    return LayerCache(k=tuple(k), v=tuple(v), segment_ids=segments, end=cache.end + n_real)


def unrolled_prefill(
    params: dict, tokens: jax.Array, segment_ids: jax.Array, cache: LayerCache, cfg: ModelConfig, *, block: int
) -> LayerCache:
    """Write `tokens` `[batch, seq]` into the cache at `cache.end + i` through the model's layers, looped over in
    Python on the engine's per-layer weights (`layout.engine_params`); no logits.

    segment_ids `[batch, seq]`: 1 for real tokens, 0 for right padding (written invisible; `end` advances by
    the real count). Attention reads keys in blocks of `block` (a divisor of `cache.length`).
    """
    x, q_index, segments, limit, rope = _inputs(params, tokens, segment_ids, cache, cfg)
    new_k, new_v = [], []
    for p, k_cache, v_cache, moe in zip(params["layers"], cache.k, cache.v, cfg.is_moe_layer, strict=True):
        x, k_cache, v_cache = _layer(p, x, k_cache, v_cache, rope, q_index, limit, moe, cfg, block)
        new_k.append(k_cache)
        new_v.append(v_cache)
    return _advance(cache, new_k, new_v, segments, segment_ids)


def _write_rows(cache: jax.Array, new: jax.Array, rows: jax.Array, positions: jax.Array, *, transposed: bool):
    """`new` `[n, kv_heads, head_dim]` written into cache slots `rows` `[n]` at `positions` `[n]` (past the end:
    dropped) of `cache` `[slots, kv_heads, head_dim, length]` (`transposed`) or `[slots, kv_heads, length,
    head_dim]`."""
    new = new.astype(cache.dtype)
    if transposed:
        return cache.at[rows, :, :, positions].set(new, mode="drop")
    return cache.at[rows, :, positions, :].set(new, mode="drop")


def decode_forward(
    params: dict,
    tokens: jax.Array,
    active: jax.Array,
    rows: jax.Array | None,
    cache: LayerCache,
    cfg: ModelConfig,
    *,
    block: int,
    tile: int,
) -> tuple[jax.Array, LayerCache]:
    """One decode step of cache slots `rows` `[n]` (distinct; None: every slot in order): each row's token `tokens`
    `[n]` is written at the slot's end where `active` `[n]` (an inactive row writes nothing and keeps its end) and
    attends to its own slot's keys up to it, read by `ragged_attention` (blocks of `block` positions, tiles of `tile`
    rows: the caller orders the rows by length). `params` in the engine's layout. Returns (logits `[n, vocab]` f32,
    cache)."""
    length = cache.length
    ends = cache.end if rows is None else cache.end[rows]  # [n]
    write = jnp.where(active, ends, length)  # [n]: positions past the cache are dropped
    limit = jnp.where(active, ends + 1, 0)  # [n]: an inactive row reads nothing
    x = params["embed"].astype(jnp.dtype(cfg.compute_dtype))[tokens][:, None]  # [n, 1, embed]
    rope = rope_tables(ends[:, None], cfg)
    new_k, new_v = [], []
    for p, k_cache, v_cache, moe in zip(params["layers"], cache.k, cache.v, cfg.is_moe_layer, strict=True):
        h = rms_norm(x, p["attn_norm"], cfg.rms_norm_eps)
        q, k, v = project_qkv(p, h, *rope, cfg)  # q [n, 1, heads, head_dim], k/v [n, 1, kv_heads, head_dim]
        if rows is None:
            k_cache = _write(k_cache, k, write[:, None], transposed=True)
            v_cache = _write(v_cache, v, write[:, None], transposed=False)
        else:
            k_cache = _write_rows(k_cache, k[:, 0], rows, write, transposed=True)
            v_cache = _write_rows(v_cache, v[:, 0], rows, write, transposed=False)
        attn = ragged_attention(q, k_cache, v_cache, ends[:, None], limit, rows, block=block, tile=tile)
        x = x + output_projection(p, attn, cfg)
        h = rms_norm(x, p["mlp_norm"], cfg.rms_norm_eps)
        x = x + (moe_mlp(p, h, cfg) if moe else dense_mlp(p, h, cfg))
        new_k.append(k_cache)
        new_v.append(v_cache)
    moved = active.astype(jnp.int32)
    if rows is None:
        segments = jax.vmap(lambda row, at: row.at[at].set(1, mode="drop"))(cache.segment_ids, write)
        end = cache.end + moved
    else:
        segments = cache.segment_ids.at[rows, write].set(1, mode="drop")
        end = cache.end.at[rows].add(moved)
    cache = LayerCache(k=tuple(new_k), v=tuple(new_v), segment_ids=segments, end=end)
    x = rms_norm(x[:, 0], params["final_norm"], cfg.rms_norm_eps)
    out = jnp.einsum("be,ev->bv", x, unembed(params, cfg).astype(x.dtype), preferred_element_type=jnp.float32)
    return out, cache


def prefill_forward(
    params: dict, tokens: jax.Array, segment_ids: jax.Array, cache: LayerCache, cfg: ModelConfig, *, block: int
) -> LayerCache:
    """`unrolled_prefill` with `params` stacked as `model.init_params` makes them, the layers of each group scanned
    (each group's caches stacked for the scan, then split again)."""
    x, q_index, segments, limit, rope = _inputs(params, tokens, segment_ids, cache, cfg)
    new_k, new_v, first = [], [], 0
    for (moe, n), group in zip(cfg.layer_groups, params["blocks"], strict=True):

        def body(carry, xs, moe=moe):
            x, k_all, v_all = carry  # caches [layers, batch, kv_heads, length, head_dim]
            p, i = xs
            x, k_i, v_i = _layer(p, x, k_all[i], v_all[i], rope, q_index, limit, moe, cfg, block)
            return (x, k_all.at[i].set(k_i), v_all.at[i].set(v_i)), None

        stacked = (jnp.stack(cache.k[first : first + n]), jnp.stack(cache.v[first : first + n]))
        (x, k_all, v_all), _ = jax.lax.scan(body, (x, *stacked), (group, jnp.arange(n)))
        new_k += list(k_all)
        new_v += list(v_all)
        first += n
    return _advance(cache, new_k, new_v, segments, segment_ids)
