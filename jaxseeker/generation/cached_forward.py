"""The decoder forward pass specialised for generation: the engine's KV cache (`generation.layout`: one array per
layer, kv heads first, keys with their positions last) updated in place, attention over each row's own keys only
(`ragged_attention`: no `[q, length]` mask).

Built from the same layer functions as `model.decode`:
- `decode_forward`, one decode step of some cache slots, loops over the layers in Python on the engine's per-layer
  weights: it reads every weight and attended cache slot once (a scan would copy each layer's weights and cache
  through a dynamic slice first);
- `prefill_forward` scans the stacked layers: a prefill chunk's matmuls dwarf those copies, and a scan compiles in
  a fraction of the time of unrolled layers, on a copy of the prefilled rows' caches stacked for the scan;
  `unrolled_prefill` is the same on the per-layer weights, writing into the cache's own rows in place.
"""

from __future__ import annotations

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


def _write_rows(cache: jax.Array, new: jax.Array, rows: jax.Array, positions: jax.Array, *, transposed: bool):
    """`new` `[n, seq, kv_heads, head_dim]` written into cache slots `rows` `[n]` at `positions` `[n, seq]` (past the
    end: dropped) of `cache` `[slots, kv_heads, head_dim, length]` (`transposed`) or `[slots, kv_heads, length,
    head_dim]`: a scatter into the donated cache, so only the written slots move."""
    new = new.astype(cache.dtype)
    if transposed:
        return cache.at[rows[:, None], :, :, positions].set(new, mode="drop")
    return cache.at[rows[:, None], :, positions, :].set(new, mode="drop")


def _output_projection(p: dict, attn: jax.Array, cfg: ModelConfig) -> jax.Array:
    """`model.layers.output_projection` of `attn` `[n, seq, heads, head_dim]` → `[n, seq, embed]` as one matmul over
    heads·head_dim: on the einsum over both axes, XLA:CPU copies the `[heads, head_dim, embed]` weight into another
    order on every call (a weight a layer a decode step), where merging the small activation's axes costs nothing."""
    n, s, h, d = attn.shape
    out = attn.reshape(n, s, h * d) @ p["o"].reshape(h * d, -1).astype(attn.dtype)  # [n, seq, embed]
    out = add_lora(out, p, "o", attn, "bshd,hdr->bsr", "bsr,re->bse")
    return out + p["o_bias"].astype(out.dtype) if cfg.o_bias else out


def _store(k_cache, v_cache, k, v, rows: jax.Array | None, positions: jax.Array) -> tuple[jax.Array, jax.Array]:
    """One layer's caches with `k`, `v` `[n, seq, kv_heads, head_dim]` written at `positions` `[n, seq]` of slots
    `rows` `[n]` (None: slot i for row i, written shard by shard when the cache is split over its rows)."""
    if rows is None:
        return _write(k_cache, k, positions, transposed=True), _write(v_cache, v, positions, transposed=False)
    return (
        _write_rows(k_cache, k, rows, positions, transposed=True),
        _write_rows(v_cache, v, rows, positions, transposed=False),
    )


def _layer(
    p: dict,
    x: jax.Array,
    k_cache: jax.Array,
    v_cache: jax.Array,
    rope,
    q_index: jax.Array,
    limit: jax.Array,
    rows: jax.Array | None,
    moe: bool,
    cfg: ModelConfig,
    block: int,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """One decoder layer on `x` `[n, seq, embed]`, its keys and values written into this layer's caches (keys
    `[slots, kv_heads, head_dim, length]`, values `[slots, kv_heads, length, head_dim]`) at `q_index` of slots `rows`
    (`_store`), and causal attention over each row's keys below `limit` `[n]` (`ragged_attention`, tiles of
    PREFILL_TILE rows)."""
    h = rms_norm(x, p["attn_norm"], cfg.rms_norm_eps)
    q, k, v = project_qkv(p, h, *rope, cfg)  # q [n, seq, heads, head_dim], k/v [n, seq, kv_heads, head_dim]
    k_cache, v_cache = _store(k_cache, v_cache, k, v, rows, q_index)
    attn = ragged_attention(q, k_cache, v_cache, q_index, limit, rows, block=block, tile=PREFILL_TILE)
    x = x + _output_projection(p, attn, cfg)
    h = rms_norm(x, p["mlp_norm"], cfg.rms_norm_eps)
    return x + (moe_mlp(p, h, cfg) if moe else dense_mlp(p, h, cfg)), k_cache, v_cache


def _inputs(params: dict, tokens: jax.Array, counts: jax.Array, ends: jax.Array, cfg: ModelConfig):
    """The embedded tokens `[n, seq]` → `[n, seq, embed]`, the cache slots they go to (from `ends` `[n]`) `[n, seq]`,
    each row's end after its `counts` `[n]` real tokens `[n]` (0 for a row of padding only: it attends to nothing)
    and the RoPE tables."""
    q_index = ends[:, None] + jnp.arange(tokens.shape[1])[None, :]  # [n, seq]
    limit = jnp.where(counts > 0, ends + counts, 0)  # [n]
    x = params["embed"].astype(jnp.dtype(cfg.compute_dtype))[tokens]
    return x, q_index, limit, rope_tables(q_index, cfg)


def _advance(cache: LayerCache, k, v, rows: jax.Array | None, moved: jax.Array) -> LayerCache:
    """The cache with new keys and values and the ends of slots `rows` (None: all) moved by `moved` `[n]`."""
    end = cache.end + moved if rows is None else cache.end.at[rows].add(moved)
    return LayerCache(k=tuple(k), v=tuple(v), end=end)


def unrolled_prefill(
    params: dict,
    tokens: jax.Array,
    counts: jax.Array,
    rows: jax.Array | None,
    cache: LayerCache,
    cfg: ModelConfig,
    *,
    block: int,
) -> LayerCache:
    """Write `tokens` `[n, seq]` into cache slots `rows` `[n]` (distinct; None: slot i for row i) at each slot's end
    through the model's layers, looped over in Python on the engine's per-layer weights (`layout.engine_params`); no
    logits.

    counts `[n]`: the real tokens of each row, left-aligned; the padding after them is written past the slot's new end
    (where nothing reads it before it is written again). Attention reads keys in blocks of `block` (a divisor of
    `cache.length`).
    """
    x, q_index, limit, rope = _inputs(params, tokens, counts, cache.end if rows is None else cache.end[rows], cfg)
    new_k, new_v = [], []
    for p, k_cache, v_cache, moe in zip(params["layers"], cache.k, cache.v, cfg.is_moe_layer, strict=True):
        x, k_cache, v_cache = _layer(p, x, k_cache, v_cache, rope, q_index, limit, rows, moe, cfg, block)
        new_k.append(k_cache)
        new_v.append(v_cache)
    return _advance(cache, new_k, new_v, rows, counts)


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
    ends = cache.end if rows is None else cache.end[rows]  # [n]
    write = jnp.where(active, ends, cache.length)[:, None]  # [n, 1]: positions past the cache are dropped
    limit = jnp.where(active, ends + 1, 0)  # [n]: an inactive row reads nothing
    x = params["embed"].astype(jnp.dtype(cfg.compute_dtype))[tokens][:, None]  # [n, 1, embed]
    rope = rope_tables(ends[:, None], cfg)
    new_k, new_v = [], []
    for p, k_cache, v_cache, moe in zip(params["layers"], cache.k, cache.v, cfg.is_moe_layer, strict=True):
        h = rms_norm(x, p["attn_norm"], cfg.rms_norm_eps)
        q, k, v = project_qkv(p, h, *rope, cfg)  # q [n, 1, heads, head_dim], k/v [n, 1, kv_heads, head_dim]
        k_cache, v_cache = _store(k_cache, v_cache, k, v, rows, write)
        attn = ragged_attention(q, k_cache, v_cache, ends[:, None], limit, rows, block=block, tile=tile)
        x = x + _output_projection(p, attn, cfg)
        h = rms_norm(x, p["mlp_norm"], cfg.rms_norm_eps)
        x = x + (moe_mlp(p, h, cfg) if moe else dense_mlp(p, h, cfg))
        new_k.append(k_cache)
        new_v.append(v_cache)
    cache = _advance(cache, new_k, new_v, rows, active.astype(jnp.int32))
    x = rms_norm(x[:, 0], params["final_norm"], cfg.rms_norm_eps)
    out = jnp.einsum("be,ev->bv", x, unembed(params, cfg).astype(x.dtype), preferred_element_type=jnp.float32)
    return out, cache


def prefill_forward(
    params: dict, tokens: jax.Array, counts: jax.Array, cache: LayerCache, cfg: ModelConfig, *, block: int
) -> LayerCache:
    """`unrolled_prefill` of slot i for row i with `params` stacked as `model.init_params` makes them, the layers of
    each group scanned (each group's caches stacked for the scan, then split again: the caller passes the prefilled
    rows only)."""
    x, q_index, limit, rope = _inputs(params, tokens, counts, cache.end, cfg)
    new_k, new_v, first = [], [], 0
    for (moe, n), group in zip(cfg.layer_groups, params["blocks"], strict=True):

        def body(carry, xs, moe=moe):
            x, k_all, v_all = carry  # caches [layers, batch, kv_heads, length, head_dim]
            p, i = xs
            x, k_i, v_i = _layer(p, x, k_all[i], v_all[i], rope, q_index, limit, None, moe, cfg, block)
            return (x, k_all.at[i].set(k_i), v_all.at[i].set(v_i)), None

        stacked = (jnp.stack(cache.k[first : first + n]), jnp.stack(cache.v[first : first + n]))
        (x, k_all, v_all), _ = jax.lax.scan(body, (x, *stacked), (group, jnp.arange(n)))
        new_k += list(k_all)
        new_v += list(v_all)
        first += n
    return _advance(cache, new_k, new_v, None, counts)
