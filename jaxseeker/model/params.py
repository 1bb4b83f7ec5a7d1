"""Parameter pytree: initialisation and the logical axis names of every leaf."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from jaxseeker.model.config import ModelConfig

Axes = tuple[str | None, ...]


def _block_axes(cfg: ModelConfig, moe: bool) -> dict[str, Axes]:
    """Logical axes of one stacked group of layers (leading axis `layers`)."""
    axes: dict[str, Axes] = {
        "attn_norm": ("layers", "embed"),
        "q": ("layers", "embed", "heads", "head_dim"),
        "k": ("layers", "embed", "kv_heads", "head_dim"),
        "v": ("layers", "embed", "kv_heads", "head_dim"),
        "o": ("layers", "heads", "head_dim", "embed"),
        "mlp_norm": ("layers", "embed"),
    }
    if cfg.qkv_bias:
        axes.update(
            q_bias=("layers", "heads", "head_dim"),
            k_bias=("layers", "kv_heads", "head_dim"),
            v_bias=("layers", "kv_heads", "head_dim"),
        )
    if cfg.o_bias:
        axes["o_bias"] = ("layers", "embed")
    if cfg.qk_norm:
        axes.update(q_norm=("layers", "head_dim"), k_norm=("layers", "head_dim"))
    if moe:
        axes.update(
            router=("layers", "embed", "experts"),
            gate=("layers", "experts", "embed", "mlp"),
            up=("layers", "experts", "embed", "mlp"),
            down=("layers", "experts", "mlp", "embed"),
        )
    else:
        axes.update(gate=("layers", "embed", "mlp"), up=("layers", "embed", "mlp"), down=("layers", "mlp", "embed"))
        if cfg.mlp_bias:
            axes.update(gate_bias=("layers", "mlp"), up_bias=("layers", "mlp"), down_bias=("layers", "embed"))
    return axes


def param_axes(cfg: ModelConfig) -> dict:
    """The logical axis names of every parameter, in the structure of `init_params(cfg, …)`."""
    axes = {
        "embed": ("vocab", "embed"),
        "blocks": tuple(_block_axes(cfg, moe) for moe, _ in cfg.layer_groups),
        "final_norm": ("embed",),
    }
    if not cfg.tie_word_embeddings:
        axes["lm_head"] = ("embed", "vocab")
    return axes


def param_shapes(cfg: ModelConfig) -> dict:
    """The shape of every parameter, in the structure of `init_params(cfg, …)`."""
    sizes = {
        "vocab": cfg.vocab_size,
        "embed": cfg.hidden_size,
        "heads": cfg.num_heads,
        "kv_heads": cfg.num_kv_heads,
        "head_dim": cfg.head_dim,
        "experts": cfg.num_experts,
    }

    def group_shapes(moe: bool, n: int) -> dict:
        mlp = cfg.moe_intermediate_size if moe else cfg.intermediate_size
        return {
            k: tuple(n if a == "layers" else mlp if a == "mlp" else sizes[a] for a in ax)
            for k, ax in _block_axes(cfg, moe).items()
        }

    shapes = {
        "embed": (cfg.vocab_size, cfg.hidden_size),
        "blocks": tuple(group_shapes(moe, n) for moe, n in cfg.layer_groups),
        "final_norm": (cfg.hidden_size,),
    }
    if not cfg.tie_word_embeddings:
        shapes["lm_head"] = (cfg.hidden_size, cfg.vocab_size)
    return shapes


def _is_shape(x) -> bool:
    return isinstance(x, tuple) and all(isinstance(d, int) for d in x)


def abstract_params(cfg: ModelConfig) -> dict:
    """`init_params(cfg, …)` as `jax.ShapeDtypeStruct`s, without computing anything (e.g. for shardings)."""
    dtype = jnp.dtype(cfg.param_dtype)
    return jax.tree.map(lambda shape: jax.ShapeDtypeStruct(shape, dtype), param_shapes(cfg), is_leaf=_is_shape)


@functools.partial(jax.jit, static_argnums=0)
def init_params(cfg: ModelConfig, rng: jax.Array) -> dict:
    """Random parameters: normal(0, initializer_range) matrices, unit norms, zero biases (as HF initialises).
    Jitted: one compile for the whole tree."""
    shapes = param_shapes(cfg)
    leaves = jax.tree.leaves_with_path(shapes, is_leaf=_is_shape)
    keys = jax.random.split(rng, len(leaves))
    dtype = jnp.dtype(cfg.param_dtype)
    out = []
    for key, (path, shape) in zip(keys, leaves):
        name = str(path[-1].key) if hasattr(path[-1], "key") else ""
        if name.endswith("norm"):
            out.append(jnp.ones(shape, dtype))
        elif name.endswith("bias"):
            out.append(jnp.zeros(shape, dtype))
        else:
            out.append((cfg.initializer_range * jax.random.normal(key, shape, jnp.float32)).astype(dtype))
    return jax.tree.unflatten(jax.tree.structure(shapes, is_leaf=_is_shape), out)


def count_params(cfg: ModelConfig) -> int:
    """Number of parameters (tied embeddings counted once)."""
    total = 0
    for shape in jax.tree.leaves(param_shapes(cfg), is_leaf=_is_shape):
        n = 1
        for d in shape:
            n *= d
        total += n
    return total
