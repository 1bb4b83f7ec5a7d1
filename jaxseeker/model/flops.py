"""Parameter counts, FLOPs per token and memory of a config: what `jaxseeker info` and MFU figures use."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from jaxseeker.model.config import ModelConfig
from jaxseeker.model.params import count_params, param_shapes

BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}


def active_params(cfg: ModelConfig) -> int:
    """Parameters a token passes through: embeddings excluded, only the top-k experts of MoE layers."""
    total = 0
    for (moe, _), shapes in zip(cfg.layer_groups, param_shapes(cfg)["blocks"]):
        for key, shape in shapes.items():
            size = 1
            for d in shape:
                size *= d
            if moe and key in ("gate", "up", "down"):
                size = size * cfg.num_experts_per_tok // cfg.num_experts
            total += size
    return total + cfg.hidden_size * cfg.vocab_size  # the output projection


def flops_per_token(cfg: ModelConfig, context: int, *, training: bool = False) -> float:
    """Matmul FLOPs per token at a mean attended context of `context` tokens: 2·active params plus
    2·2·layers·heads·head_dim·context for scores and values; training counts backward as 2× forward."""
    attention = 4 * cfg.num_layers * cfg.num_heads * cfg.head_dim * context
    forward = 2 * active_params(cfg) + attention
    return 3 * forward if training else forward


def kv_cache_bytes(cfg: ModelConfig, tokens: int, dtype: str = "bfloat16") -> int:
    """Bytes of KV cache for `tokens` cached tokens."""
    return 2 * cfg.num_layers * cfg.num_kv_heads * cfg.head_dim * tokens * BYTES[dtype]


def summary(cfg: ModelConfig, context: int = 4096) -> dict:
    """Architecture, parameter counts, FLOPs per token and memory at bf16 / f32."""
    n = count_params(cfg)
    leaves = jax.tree.leaves(
        param_shapes(cfg), is_leaf=lambda x: isinstance(x, tuple) and all(isinstance(d, int) for d in x)
    )
    return {
        "architecture": cfg.model_type,
        "layers": cfg.num_layers,
        "hidden_size": cfg.hidden_size,
        "heads": f"{cfg.num_heads} q / {cfg.num_kv_heads} kv × {cfg.head_dim}",
        "experts": f"{cfg.num_experts_per_tok} of {cfg.num_experts}" if cfg.num_experts else "dense",
        "vocab_size": cfg.vocab_size,
        "parameters": n,
        "parameter_tensors": len(leaves),
        "active_parameters_per_token": active_params(cfg),
        "context_for_flops": context,
        "forward_flops_per_token": flops_per_token(cfg, context),
        "training_flops_per_token": flops_per_token(cfg, context, training=True),
        "weights_bytes_bf16": n * 2,
        "weights_bytes_f32": n * 4,
        "kv_cache_bytes_per_token_bf16": kv_cache_bytes(cfg, 1),
    }


def fastest_call(f: Callable[..., Any], *args: Any, repeats: int = 5) -> float:
    """Seconds of the fastest of `repeats` calls of `f(*args)` (one more before them compiles it): a measure of what
    the hardware allows, so the calls slowed by other work on a shared machine do not count."""
    jax.block_until_ready(f(*args))
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(f(*args))
        times.append(time.perf_counter() - start)
    return min(times)


def matmul_ceiling(n: int = 2048, repeats: int = 5) -> float:
    """Measured f32 matmul FLOP/s of the default device (the fastest of `repeats` jitted n³ products): the ceiling
    benchmarks report MFU against."""
    return 2 * n**3 / fastest_call(jax.jit(lambda x: x @ x), jnp.ones((n, n), jnp.float32), repeats=repeats)
