"""Rotary position embeddings with the HF scaling types of these families (default, linear, llama3, yarn)."""

from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np

from jaxseeker.model.config import ModelConfig


def inv_frequencies(cfg: ModelConfig) -> tuple[np.ndarray, float]:
    """Inverse frequencies `[head_dim // 2]` and the cos/sin scale, as transformers' rope init computes them."""
    dim = cfg.head_dim
    base = cfg.rope_theta
    p = dict(cfg.rope_scaling)
    inv = 1.0 / (base ** (np.arange(0, dim, 2, dtype=np.float64) / dim))
    kind = cfg.rope_type
    if kind == "default":
        return inv.astype(np.float32), 1.0
    if kind == "linear":
        return (inv / p["factor"]).astype(np.float32), 1.0
    if kind == "llama3":
        return _llama3(inv, p), 1.0
    return _yarn(dim, base, p, cfg.max_position_embeddings)


def _llama3(inv: np.ndarray, p: dict) -> np.ndarray:
    factor, low, high = p["factor"], p["low_freq_factor"], p["high_freq_factor"]
    old_len = p["original_max_position_embeddings"]
    low_wavelen, high_wavelen = old_len / low, old_len / high
    wavelen = 2 * math.pi / inv
    scaled = np.where(wavelen > low_wavelen, inv / factor, inv)
    smooth = (old_len / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelen < high_wavelen) & ~(wavelen > low_wavelen)
    return np.where(medium, smoothed, scaled).astype(np.float32)


def _yarn(dim: int, base: float, p: dict, max_pos: int) -> tuple[np.ndarray, float]:
    old_len = p["original_max_position_embeddings"]
    factor = p.get("factor") or max_pos / old_len

    def mscale(scale, m=1.0):
        return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0

    attn = p.get("attention_factor")
    if attn is None:
        if p.get("mscale") and p.get("mscale_all_dim"):
            attn = mscale(factor, p["mscale"]) / mscale(factor, p["mscale_all_dim"])
        else:
            attn = mscale(factor)
    beta_fast, beta_slow = p.get("beta_fast") or 32, p.get("beta_slow") or 1

    def correction_dim(rotations):
        return dim * math.log(old_len / (rotations * 2 * math.pi)) / (2 * math.log(base))

    low, high = correction_dim(beta_fast), correction_dim(beta_slow)
    if p.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001
    ramp = np.clip((np.arange(dim // 2, dtype=np.float32) - low) / (high - low), 0, 1)
    pos_freqs = base ** (np.arange(0, dim, 2, dtype=np.float32) / dim)
    extrapolation = 1 - ramp
    inv = (1 / (factor * pos_freqs)) * (1 - extrapolation) + (1 / pos_freqs) * extrapolation
    return inv.astype(np.float32), float(attn)


def rope_tables(positions: jnp.ndarray, cfg: ModelConfig) -> tuple[jnp.ndarray, jnp.ndarray]:
    """cos and sin for `positions` `[batch, seq]` → each `[batch, seq, head_dim]` (f32)."""
    inv, scale = inv_frequencies(cfg)
    freqs = positions.astype(jnp.float32)[..., None] * jnp.asarray(inv)  # [batch, seq, head_dim/2]
    emb = jnp.concatenate([freqs, freqs], axis=-1)  # [batch, seq, head_dim]
    return jnp.cos(emb) * scale, jnp.sin(emb) * scale


def apply_rope(x: jnp.ndarray, cos: jnp.ndarray, sin: jnp.ndarray) -> jnp.ndarray:
    """Rotate `x` `[batch, seq, heads, head_dim]` by the tables `[batch, seq, head_dim]` (HF rotate_half form)."""
    half = x.shape[-1] // 2
    rotated = jnp.concatenate([-x[..., half:], x[..., :half]], axis=-1)
    cos, sin = cos[:, :, None, :], sin[:, :, None, :]
    return (x.astype(jnp.float32) * cos + rotated.astype(jnp.float32) * sin).astype(x.dtype)
