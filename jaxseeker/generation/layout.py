"""The engine's own layout of weights and KV cache: one array per layer, kv heads before positions.

Training stacks the layers for `lax.scan`. Generation unstacks them: inside a scanned layer XLA reads each
layer's weights and cache through a dynamic slice that it materialises, so every decode step would write a copy
of the whole model and of the attended cache before reading it again (the decode step is bound by these bytes,
not by FLOPs). With one array per layer, looped over in Python, a decode step reads every weight and every cache
slot it attends to once. The price is a longer compile.

Keys are stored transposed, their positions last (`[batch, kv_heads, head_dim, length]`), values as
`[batch, kv_heads, length, head_dim]`: both attention products are then plain matmuls
(`model.layers.grouped_attention`).
The engine allocates the cache once at its maximum length; attention reads each row only up to its own end
(`generation.ragged_attention`), so the length is in no compiled shape but the cache's own.
"""

from __future__ import annotations

import functools

import flax.struct
import jax
import jax.numpy as jnp

from jaxseeker.model import ModelConfig, param_axes

# Logical axes of one layer's keys (positions last) and values: attention reads both with no transpose.
KEY_AXES = ("batch", "kv_heads", "head_dim", "seq")
VALUE_AXES = ("batch", "kv_heads", "seq", "head_dim")


@flax.struct.dataclass
class LayerCache:
    """k: one `[batch, kv_heads, head_dim, length]` array per layer, v: one `[batch, kv_heads, length, head_dim]`;
    end `[batch]`: where each row's next token is written (the slots at and past it hold nothing a query reads)."""

    k: tuple[jax.Array, ...]
    v: tuple[jax.Array, ...]
    end: jax.Array

    @property
    def length(self) -> int:
        """Slots per row."""
        return self.k[0].shape[3]


def engine_params(params: dict, cfg: ModelConfig) -> dict:
    """`params` (layers stacked per group, as `model.init_params`) with one dict of arrays per layer under
    `layers`; `embed`, `final_norm` and `lm_head` as they are."""
    layers = [
        jax.tree.map(lambda x, j=j: x[j], group)
        for (_, n), group in zip(cfg.layer_groups, params["blocks"])
        for j in range(n)
    ]
    return {**{k: v for k, v in params.items() if k != "blocks"}, "layers": tuple(layers)}


def engine_param_axes(cfg: ModelConfig) -> dict:
    """The logical axes of `engine_params(…, cfg)`: those of `model.param_axes` less the `layers` axis."""
    axes = param_axes(cfg)
    layers = tuple(
        {k: ax[1:] for k, ax in group.items()}
        for (_, n), group in zip(cfg.layer_groups, axes["blocks"])
        for _ in range(n)
    )
    return {**{k: v for k, v in axes.items() if k != "blocks"}, "layers": layers}


def cache_axes(cfg: ModelConfig) -> LayerCache:
    """The logical axes of every leaf of a LayerCache for `cfg`."""
    return LayerCache(k=(KEY_AXES,) * cfg.num_layers, v=(VALUE_AXES,) * cfg.num_layers, end=("batch",))


def init_layer_cache(
    cfg: ModelConfig, batch: int, length: int, dtype: str | None = None, sharding: LayerCache | None = None
) -> LayerCache:
    """An empty cache of `batch` rows × `length` slots (dtype defaults to the compute dtype), created by a jitted
    function, so that with `sharding` (a LayerCache of shardings) every device allocates only its own shard."""
    return _zeros(cfg, batch, length, jnp.dtype(dtype or cfg.compute_dtype).name, sharding)


def _empty(cfg: ModelConfig, batch: int, length: int, dtype: str) -> LayerCache:
    keys = (batch, cfg.num_kv_heads, cfg.head_dim, length)  # [batch, kv_heads, head_dim, length]
    values = (batch, cfg.num_kv_heads, length, cfg.head_dim)  # [batch, kv_heads, length, head_dim]
    return LayerCache(
        k=tuple(jnp.zeros(keys, dtype) for _ in range(cfg.num_layers)),
        v=tuple(jnp.zeros(values, dtype) for _ in range(cfg.num_layers)),
        end=jnp.zeros((batch,), jnp.int32),
    )


@functools.partial(jax.jit, static_argnums=(0, 1, 2, 3, 4))
def _zeros(cfg: ModelConfig, batch: int, length: int, dtype: str, sharding: LayerCache | None) -> LayerCache:
    cache = _empty(cfg, batch, length, dtype)
    return cache if sharding is None else jax.lax.with_sharding_constraint(cache, sharding)


@functools.partial(jax.jit, donate_argnums=0)
def copy_row(cache: LayerCache, src: jax.Array, dst: jax.Array) -> LayerCache:
    """`cache` with row `dst` a copy of row `src`: the engine shares a prompt prefix this way, then moves `dst`'s end
    to the prefix's length (a query never attends past its own position, so the slots copied beyond it are written
    over before they are read)."""
    return jax.tree.map(lambda x: x.at[dst].set(x[src]), cache)


def param_shardings(cfg: ModelConfig, mesh, rules=None) -> dict:
    """NamedShardings of `engine_params(…, cfg)` on `mesh` by their logical axes (`rules`, default
    `parallel.GENERATION_RULES`)."""
    from jaxseeker.model import abstract_params
    from jaxseeker.parallel import GENERATION_RULES, tree_shardings

    shapes = jax.eval_shape(lambda p: engine_params(p, cfg), abstract_params(cfg))
    return tree_shardings(engine_param_axes(cfg), shapes, mesh, GENERATION_RULES if rules is None else rules)


def cache_shardings(cfg: ModelConfig, batch: int, length: int, mesh, rules=None) -> LayerCache:
    """NamedShardings of a LayerCache of `batch` × `length` on `mesh` by its logical axes (`rules`, default
    `parallel.GENERATION_RULES`)."""
    from jaxseeker.parallel import GENERATION_RULES, tree_shardings

    shapes = jax.eval_shape(lambda: _empty(cfg, batch, length, cfg.compute_dtype))
    return tree_shardings(cache_axes(cfg), shapes, mesh, GENERATION_RULES if rules is None else rules)
