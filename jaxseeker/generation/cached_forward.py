"""The decoder forward pass specialised for generation: KV cache updated in place, attention over a window.

Same numerics as `model.forward(..., cache=...)` (it is built from the same layer functions), with two
differences that matter for speed: the cache travels in the carry of the layer loop, so each layer writes its
new keys/values in place instead of copying the whole cache per call; and attention reads only the first
`window` cache slots (a static bucket ≥ every row's context), not all `max_len`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxseeker.model import KVCache, ModelConfig, unembed
from jaxseeker.model.layers import (
    attention_mask,
    dense_mlp,
    dot_attention,
    moe_mlp,
    output_projection,
    project_qkv,
    rms_norm,
)
from jaxseeker.model.rope import rope_tables


def cached_forward(
    params: dict,
    tokens: jnp.ndarray,
    segment_ids: jnp.ndarray,
    cache: KVCache,
    cfg: ModelConfig,
    *,
    window: int,
    logits: bool = True,
) -> tuple[jnp.ndarray | None, KVCache]:
    """Run `tokens` `[batch, seq]` through the model, writing them at `cache.end + i`.

    segment_ids `[batch, seq]`: 1 for real tokens, 0 for right padding (written invisible; `end` advances by
    the real count). Every query must sit below `window` (static): attention reads cache slots
    `[0, window)` only. Returns (logits `[batch, seq, vocab]` f32, or None when `logits` is False; cache).
    """
    b, s = tokens.shape
    compute = jnp.dtype(cfg.compute_dtype)
    rows = jnp.arange(b)[:, None]
    q_index = cache.end[:, None] + jnp.arange(s)[None, :]  # [batch, seq] cache slots written
    segments = cache.segment_ids.at[rows, q_index].set(segment_ids, mode="drop")  # [batch, max_len]
    mask = attention_mask(q_index, segment_ids, segments[:, :window])  # [batch, seq, window]
    cos, sin = rope_tables(q_index, cfg)  # [batch, seq, head_dim]
    x = params["embed"].astype(compute)[tokens]  # [batch, seq, embed]

    new_k, new_v = [], []
    for g, (moe, n) in enumerate(cfg.layer_groups):
        def layer(x, k_cache, v_cache, p, i, moe=moe):
            """One layer; caches `[layers, batch, max_len, kv_heads, head_dim]`, i its index in them."""
            h = rms_norm(x, p["attn_norm"], cfg.rms_norm_eps)
            q, k, v = project_qkv(p, h, cos, sin, cfg)  # k, v [batch, seq, kv_heads, head_dim]
            k_cache = k_cache.at[i, rows, q_index].set(k.astype(k_cache.dtype), mode="drop")
            v_cache = v_cache.at[i, rows, q_index].set(v.astype(v_cache.dtype), mode="drop")
            k_seen = jax.lax.dynamic_index_in_dim(k_cache, i, keepdims=False)[:, :window].astype(q.dtype)
            v_seen = jax.lax.dynamic_index_in_dim(v_cache, i, keepdims=False)[:, :window].astype(q.dtype)
            x = x + output_projection(p, dot_attention(q, k_seen, v_seen, mask, cfg.attention_impl), cfg)
            h = rms_norm(x, p["mlp_norm"], cfg.rms_norm_eps)
            return x + (moe_mlp(p, h, cfg) if moe else dense_mlp(p, h, cfg)), k_cache, v_cache

        def body(carry, xs, layer=layer):
            return layer(*carry, *xs), None

        (x, kc, vc), _ = jax.lax.scan(body, (x, cache.k[g], cache.v[g]), (params["blocks"][g], jnp.arange(n)))
        new_k.append(kc)
        new_v.append(vc)
    n_real = jnp.sum(segment_ids != 0, axis=1).astype(jnp.int32)
    cache = KVCache(k=tuple(new_k), v=tuple(new_v), segment_ids=segments, end=cache.end + n_real)
    if not logits:
        return None, cache
    x = rms_norm(x, params["final_norm"], cfg.rms_norm_eps)
    out = jnp.einsum("bse,ev->bsv", x, unembed(params, cfg).astype(x.dtype), preferred_element_type=jnp.float32)
    return out, cache
