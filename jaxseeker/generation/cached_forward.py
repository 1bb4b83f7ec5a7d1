"""The decoder forward pass specialised for generation: the engine's per-layer weights and KV cache
(`generation.layout`), the cache updated in place, attention over the whole cache (its length is the window).

Same numerics as `model.forward(..., cache=...)`: it is built from the same layer functions, and the attention is
`model.layers.grouped_attention`, the reference kernel on head-major keys and values.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxseeker.generation.layout import LayerCache
from jaxseeker.model import ModelConfig, unembed
from jaxseeker.model.layers import (
    attention_mask,
    dense_mlp,
    grouped_attention,
    moe_mlp,
    output_projection,
    project_qkv,
    rms_norm,
)
from jaxseeker.model.rope import rope_tables


def _write(cache: jax.Array, new: jax.Array, positions: jax.Array) -> jax.Array:
    """`new` `[batch, seq, kv_heads, head_dim]` written into `cache` `[batch, kv_heads, length, head_dim]` at
    `positions` `[batch, seq]` (positions past the end are dropped)."""
    b, s, kvh, _ = new.shape
    rows = jnp.arange(b)[:, None, None]
    heads = jnp.arange(kvh)[None, None, :]
    return cache.at[rows, heads, positions[:, :, None]].set(new.astype(cache.dtype), mode="drop")


def cached_forward(
    params: dict,
    tokens: jax.Array,
    segment_ids: jax.Array,
    cache: LayerCache,
    cfg: ModelConfig,
    *,
    logits: bool = True,
) -> tuple[jax.Array | None, LayerCache]:
    """Run `tokens` `[batch, seq]` through the model (`params` in the engine's layout, `layout.engine_params`),
    writing them at `cache.end + i`.

    segment_ids `[batch, seq]`: 1 for real tokens, 0 for right padding (written invisible; `end` advances by
    the real count). Every query must sit below `cache.length`. Returns (logits `[batch, seq, vocab]` f32, or
    None when `logits` is False; cache).
    """
    b, s = tokens.shape
    compute = jnp.dtype(cfg.compute_dtype)
    rows = jnp.arange(b)[:, None]
    q_index = cache.end[:, None] + jnp.arange(s)[None, :]  # [batch, seq] cache slots written
    segments = cache.segment_ids.at[rows, q_index].set(segment_ids, mode="drop")  # [batch, length]
    mask = attention_mask(q_index, segment_ids, segments)  # [batch, seq, length]
    cos, sin = rope_tables(q_index, cfg)  # [batch, seq, head_dim]
    x = params["embed"].astype(compute)[tokens]  # [batch, seq, embed]

    new_k, new_v = [], []
    for p, k_cache, v_cache, moe in zip(params["layers"], cache.k, cache.v, cfg.is_moe_layer, strict=True):
        h = rms_norm(x, p["attn_norm"], cfg.rms_norm_eps)
        q, k, v = project_qkv(p, h, cos, sin, cfg)  # q [batch, seq, heads, head_dim], k/v [batch, seq, kv_heads, …]
        k_cache, v_cache = _write(k_cache, k, q_index), _write(v_cache, v, q_index)
        attn = grouped_attention(q, k_cache.astype(q.dtype), v_cache.astype(q.dtype), mask)
        x = x + output_projection(p, attn, cfg)
        h = rms_norm(x, p["mlp_norm"], cfg.rms_norm_eps)
        x = x + (moe_mlp(p, h, cfg) if moe else dense_mlp(p, h, cfg))
        new_k.append(k_cache)
        new_v.append(v_cache)
    n_real = jnp.sum(segment_ids != 0, axis=1).astype(jnp.int32)
    cache = LayerCache(k=tuple(new_k), v=tuple(new_v), segment_ids=segments, end=cache.end + n_real)
    if not logits:
        return None, cache
    x = rms_norm(x, params["final_norm"], cfg.rms_norm_eps)
    out = jnp.einsum("bse,ev->bsv", x, unembed(params, cfg).astype(x.dtype), preferred_element_type=jnp.float32)
    return out, cache
