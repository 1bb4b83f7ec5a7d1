"""The decoder over stacked layers (`jax.lax.scan`): `forward` (logits of whole sequences, with packing and padding)
and `decode` (logits against a KV cache, returned updated)."""

from __future__ import annotations

import functools
from collections.abc import Callable

import jax
import jax.numpy as jnp

from jaxseeker.model.cache import KVCache
from jaxseeker.model.config import ModelConfig
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

# (q, k, v, segment_ids) -> out, shapes as in `layers.splash_attention`: what a caller may put in place of the
# layer's attention (e.g. a kernel run blockwise over a device mesh, `parallel.shard_attention`).
AttentionKernel = Callable[[jnp.ndarray, jnp.ndarray, jnp.ndarray, jnp.ndarray], jnp.ndarray]
# (x, logical axis names of x) -> x: where a caller lays activations out (e.g. a sharding constraint by the rules).
Constrain = Callable[[jnp.ndarray, tuple[str | None, ...]], jnp.ndarray]

_REMAT = {
    "dots": jax.checkpoint_policies.dots_with_no_batch_dims_saveable,
    "full": jax.checkpoint_policies.nothing_saveable,
}


def segment_positions(segment_ids: jnp.ndarray) -> jnp.ndarray:
    """Position of each token inside its segment `[batch, seq]` (restarts at 0 where the segment id changes)."""
    idx = jnp.arange(segment_ids.shape[1])
    starts = jnp.concatenate(
        [jnp.ones_like(segment_ids[:, :1], bool), segment_ids[:, 1:] != segment_ids[:, :-1]], axis=1
    )
    first = jax.lax.cummax(jnp.where(starts, idx[None, :], 0), axis=1)
    return idx[None, :] - first


def _layer(
    cfg: ModelConfig,
    moe: bool,
    attention_kernel: AttentionKernel | None,
    x,
    p,
    cos,
    sin,
    mask,
    cache_kv,
    segment_ids=None,
):
    """One decoder layer. With `cache_kv` = (k_cache, v_cache, write_index) keys/values are written there
    and attention reads the whole cache; without, `segment_ids` let a kernel (splash, or `attention_kernel`
    when given) build the mask itself."""
    h = rms_norm(x, p["attn_norm"], cfg.rms_norm_eps)
    q, k, v = project_qkv(p, h, cos, sin, cfg)
    new_kv = None
    if cache_kv is not None:
        k_cache, v_cache, write = cache_kv  # [batch, max_len, kv_heads, head_dim], write [batch, seq]
        rows = jnp.arange(x.shape[0])[:, None]
        k_cache = k_cache.at[rows, write].set(k.astype(k_cache.dtype), mode="drop")
        v_cache = v_cache.at[rows, write].set(v.astype(v_cache.dtype), mode="drop")
        k, v, new_kv = k_cache.astype(q.dtype), v_cache.astype(q.dtype), (k_cache, v_cache)
    if attention_kernel is not None and cache_kv is None and segment_ids is not None:
        attn = attention_kernel(q, k, v, segment_ids)  # [batch, seq, heads, head_dim]
    else:
        attn = dot_attention(q, k, v, mask, cfg.attention_impl, segment_ids=segment_ids)
    x = x + output_projection(p, attn, cfg)
    h = rms_norm(x, p["mlp_norm"], cfg.rms_norm_eps)
    x = x + (moe_mlp(p, h, cfg) if moe else dense_mlp(p, h, cfg))
    return x, new_kv


def _decoder(
    params: dict,
    tokens: jnp.ndarray,
    cfg: ModelConfig,
    positions: jnp.ndarray | None,
    segment_ids: jnp.ndarray | None,
    cache: KVCache | None,
    attention_kernel: AttentionKernel | None,
    constrain: Constrain | None,
) -> tuple[jnp.ndarray, KVCache | None]:
    """Final-normed hidden states `[batch, seq, embed]` and the updated cache (None without one): the body shared by
    `hidden_states` (no cache) and `decode` (cache), whose docstrings give the semantics."""
    b, s = tokens.shape
    compute = jnp.dtype(cfg.compute_dtype)
    segment_ids = jnp.ones((b, s), jnp.int32) if segment_ids is None else segment_ids.astype(jnp.int32)
    if cache is None:
        q_index = jnp.broadcast_to(jnp.arange(s)[None, :], (b, s))
        positions = segment_positions(segment_ids) if positions is None else positions
        mask = attention_mask(q_index, segment_ids, segment_ids)  # [batch, seq, seq]
    else:
        q_index = cache.end[:, None] + jnp.arange(s)[None, :]  # [batch, seq] cache slots written
        positions = q_index if positions is None else positions
        rows = jnp.arange(b)[:, None]
        cache_segments = cache.segment_ids.at[rows, q_index].set(segment_ids, mode="drop")
        mask = attention_mask(q_index, segment_ids, cache_segments)  # [batch, seq, max_len]
    cos, sin = rope_tables(positions, cfg)  # [batch, seq, head_dim]

    def keep(x):  # [batch, seq, embed]
        return x if constrain is None else constrain(x, ("batch", "residual_seq", None))

    table = params["embed"].astype(compute)  # [vocab, embed]
    if constrain is None:
        x = table[tokens]  # [batch, seq, embed]
    else:  # looked up split along the width, then laid out as the residual stream (`parallel.rules`: lookup_embed)
        x = constrain(constrain(table, ("vocab", "lookup_embed"))[tokens], ("lookup_batch", "seq", "lookup_embed"))
    x = keep(x)  # [batch, seq, embed]

    new_k, new_v = [], []
    for g, (moe, _) in enumerate(cfg.layer_groups):
        layer = functools.partial(_layer, cfg, moe, attention_kernel)
        if cfg.remat != "none":
            layer = jax.checkpoint(layer, policy=_REMAT[cfg.remat])
        if cache is None:

            def body(x, p, layer=layer):
                return keep(layer(x, p, cos, sin, mask, None, segment_ids)[0]), None

            x, _ = jax.lax.scan(body, x, params["blocks"][g])
        else:

            def body(x, xs, layer=layer):
                p, kc, vc = xs
                x, (kc, vc) = layer(x, p, cos, sin, mask, (kc, vc, q_index))
                return keep(x), (kc, vc)

            x, (kc, vc) = jax.lax.scan(body, x, (params["blocks"][g], cache.k[g], cache.v[g]))
            new_k.append(kc)
            new_v.append(vc)
    x = rms_norm(x, params["final_norm"], cfg.rms_norm_eps)
    if cache is None:
        return x, None
    n_real = jnp.sum(segment_ids != 0, axis=1).astype(jnp.int32)
    return x, KVCache(k=tuple(new_k), v=tuple(new_v), segment_ids=cache_segments, end=cache.end + n_real)


def hidden_states(
    params: dict,
    tokens: jnp.ndarray,
    cfg: ModelConfig,
    *,
    positions: jnp.ndarray | None = None,
    segment_ids: jnp.ndarray | None = None,
    attention_kernel: AttentionKernel | None = None,
    constrain: Constrain | None = None,
) -> jnp.ndarray:
    """Final-normed hidden states `[batch, seq, embed]` of `tokens` `[batch, seq]` (a loss projects them to the
    vocabulary in chunks; `forward` does it at once).

    segment_ids: 0 marks padding; tokens attend only within their segment (packed rows). Positions default to the
    index inside each segment.

    attention_kernel: `(q, k, v, segment_ids) -> out` (the signature of `layers.splash_attention`) used in
    place of `cfg.attention_impl` by every layer: causal attention within segments, GQA heads in contiguous groups.
    A training step passes splash run blockwise over its mesh this way (`parallel.shard_attention`); None (default)
    uses `cfg.attention_impl`.

    constrain: `(x, logical_axes) -> x`, the activations' layout, applied to the residual stream
    (`("batch", "residual_seq", None)`) after the embedding and after every layer: a training step on a mesh
    passes `parallel.activation_constraint(mesh, rules)`, so the layer activations kept for the backward pass stay
    split by rows and along the sequence (under fsdp XLA may otherwise keep them whole on every device). None: XLA
    chooses.
    """
    return _decoder(params, tokens, cfg, positions, segment_ids, None, attention_kernel, constrain)[0]


def unembed(params: dict, cfg: ModelConfig) -> jnp.ndarray:
    """The output projection `[embed, vocab]` (the transposed embedding when tied)."""
    return params["embed"].T if cfg.tie_word_embeddings else params["lm_head"]


def _logits(params: dict, x: jnp.ndarray, cfg: ModelConfig) -> jnp.ndarray:
    """Logits `[batch, seq, vocab]` (f32) of final-normed hidden states `x` `[batch, seq, embed]`."""
    w = unembed(params, cfg).astype(x.dtype)
    return jnp.einsum("bse,ev->bsv", x, w, preferred_element_type=jnp.float32)


def forward(
    params: dict,
    tokens: jnp.ndarray,
    cfg: ModelConfig,
    *,
    positions: jnp.ndarray | None = None,
    segment_ids: jnp.ndarray | None = None,
    attention_kernel: AttentionKernel | None = None,
    constrain: Constrain | None = None,
) -> jnp.ndarray:
    """Logits `[batch, seq, vocab]` (f32) of `tokens` `[batch, seq]`, each attending to the tokens before it in its
    segment. See `hidden_states` for segment, position, `attention_kernel` and `constrain` semantics; `decode` runs
    against a KV cache."""
    x = hidden_states(
        params,
        tokens,
        cfg,
        positions=positions,
        segment_ids=segment_ids,
        attention_kernel=attention_kernel,
        constrain=constrain,
    )
    return _logits(params, x, cfg)


def decode(
    params: dict,
    tokens: jnp.ndarray,
    cfg: ModelConfig,
    cache: KVCache,
    *,
    positions: jnp.ndarray | None = None,
    segment_ids: jnp.ndarray | None = None,
) -> tuple[jnp.ndarray, KVCache]:
    """(logits `[batch, seq, vocab]` f32, the updated cache) of `tokens` `[batch, seq]` run against `cache`: a
    prompt's prefill or one generated token per row, so a token costs one pass over the cache instead of the whole
    sequence again.

    Tokens are written at `cache.end + i` and attend to everything before them in the cache (per row, within
    matching segments); positions default to that index. segment_ids: 0 marks padding, which must be on the
    right; `end` advances by each row's non-padding tokens. (The generation engine runs the same numerics on its
    own cache layout, `generation.cached_forward`.)
    """
    x, cache = _decoder(params, tokens, cfg, positions, segment_ids, cache, None, None)
    return _logits(params, x, cfg), cache
