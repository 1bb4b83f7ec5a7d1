"""The engine's own layout of weights and KV cache: one array per layer, kv heads before positions.

Training stacks the layers for `lax.scan`. Generation unstacks them: inside a scanned layer XLA reads each
layer's weights and cache through a dynamic slice that it materialises, so every decode step would write a copy
of the whole model and of the attended cache before reading it again (the decode step is bound by these bytes,
not by FLOPs). With one array per layer, looped over in Python, a decode step reads every weight and every cache
slot it attends to once. The price is a longer compile.

The KV cache is paged (as vLLM's and JetStream's): each layer's keys and values live in a pool of fixed-size pages,
and a table maps each slot's positions to its pages, `page` positions a page (the attention block). A slot holds
pages only for the context it has; a group's rollouts point at the same pages of their shared prompt instead of
holding copies. Keys are stored transposed, positions last (`[shards, pages, kv_heads, head_dim, page]`), values as
`[shards, pages, kv_heads, page, head_dim]`: both attention products are then plain matmuls. `shards` is the number
of parts a mesh splits the slots into (1 without one): each part's slots take their pages from its own part of the
pool, and the table holds page numbers within that part, so no device ever reads another's pages.
Attention reads each row only up to its own end (`generation.ragged_attention`).
"""

from __future__ import annotations

import functools

import flax.struct
import jax
import jax.numpy as jnp

from jaxseeker.model import ModelConfig, param_axes

# Logical axes of one layer's key pages (positions last) and value pages: attention reads both with no transpose. The
# pool's parts split like the slots ("batch"), so a slot and its pages sit on the same devices; a page's positions
# split like a sequence ("seq": over a context axis, a long context's cache spread over its devices).
KEY_AXES = ("batch", None, "kv_heads", "head_dim", "seq")
VALUE_AXES = ("batch", None, "kv_heads", "seq", "head_dim")


@flax.struct.dataclass
class LayerCache:
    """A paged KV cache (module docstring). k: one `[shards, pages, kv_heads, head_dim, page]` array per layer, v: one
    `[shards, pages, kv_heads, page, head_dim]`; end `[slots]`: where each slot's next token is written (positions at
    and past it hold nothing a query reads); table `[slots, row_pages]`: the page (within its shard's part) holding
    each slot's positions `j * page … (j + 1) * page - 1`."""

    k: tuple[jax.Array, ...]
    v: tuple[jax.Array, ...]
    end: jax.Array
    table: jax.Array

    @property
    def page(self) -> int:
        """Positions a page."""
        return self.k[0].shape[4]

    @property
    def length(self) -> int:
        """Positions a slot can hold."""
        return self.table.shape[1] * self.page

    @property
    def shards(self) -> int:
        """Parts of the pool (and of the slots)."""
        return self.k[0].shape[0]


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
    return LayerCache(
        k=(KEY_AXES,) * cfg.num_layers, v=(VALUE_AXES,) * cfg.num_layers, end=("batch",), table=("batch", None)
    )


@flax.struct.dataclass(frozen=True)
class PoolShape:
    """The static shape of a paged cache: `slots` slots of `row_pages` pages at most, `pages` pages a shard of the
    pool, `page` positions a page, the slots and the pool split into `shards` parts."""

    slots: int
    row_pages: int
    pages: int
    page: int
    shards: int = 1


def init_layer_cache(cfg: ModelConfig, shape: PoolShape, dtype: str | None = None, sharding=None) -> LayerCache:
    """An empty paged cache of `shape` (dtype defaults to the compute dtype), created by a jitted function, so that
    with `sharding` (a LayerCache of shardings) every device allocates only its own shard."""
    return _zeros(cfg, shape, jnp.dtype(dtype or cfg.compute_dtype).name, sharding)


def _empty(cfg: ModelConfig, shape: PoolShape, dtype: str) -> LayerCache:
    pool = (shape.shards, shape.pages, cfg.num_kv_heads)
    keys = (*pool, cfg.head_dim, shape.page)  # [shards, pages, kv_heads, head_dim, page]
    values = (*pool, shape.page, cfg.head_dim)  # [shards, pages, kv_heads, page, head_dim]
    return LayerCache(
        k=tuple(jnp.zeros(keys, dtype) for _ in range(cfg.num_layers)),
        v=tuple(jnp.zeros(values, dtype) for _ in range(cfg.num_layers)),
        end=jnp.zeros((shape.slots,), jnp.int32),
        table=jnp.zeros((shape.slots, shape.row_pages), jnp.int32),
    )


@functools.partial(jax.jit, static_argnums=(0, 1, 2, 3))
def _zeros(cfg: ModelConfig, shape: PoolShape, dtype: str, sharding: LayerCache | None) -> LayerCache:
    cache = _empty(cfg, shape, dtype)
    return cache if sharding is None else jax.lax.with_sharding_constraint(cache, sharding)


@functools.partial(jax.jit, donate_argnums=0)
def copy_page(cache: LayerCache, shard: jax.Array, src: jax.Array, dst: jax.Array) -> LayerCache:
    """`cache` with page `dst` of pool part `shard` a copy of its page `src`, in every layer: a slot that shares a
    prompt takes the prompt's whole pages by reference and copies the one it will go on writing into."""
    k = tuple(x.at[shard, dst].set(x[shard, src]) for x in cache.k)
    v = tuple(x.at[shard, dst].set(x[shard, src]) for x in cache.v)
    return cache.replace(k=k, v=v)


def param_shardings(cfg: ModelConfig, mesh, rules=None) -> dict:
    """NamedShardings of `engine_params(…, cfg)` on `mesh` by their logical axes (`rules`, default
    `parallel.GENERATION_RULES`)."""
    from jaxseeker.model import abstract_params
    from jaxseeker.parallel import GENERATION_RULES, tree_shardings

    shapes = jax.eval_shape(lambda p: engine_params(p, cfg), abstract_params(cfg))
    return tree_shardings(engine_param_axes(cfg), shapes, mesh, GENERATION_RULES if rules is None else rules)


def cache_shardings(cfg: ModelConfig, shape: PoolShape, mesh, rules=None) -> LayerCache:
    """NamedShardings of a LayerCache of `shape` on `mesh` by its logical axes (`rules`, default
    `parallel.GENERATION_RULES`)."""
    from jaxseeker.parallel import GENERATION_RULES, tree_shardings

    shapes = jax.eval_shape(lambda: _empty(cfg, shape, cfg.compute_dtype))
    return tree_shardings(cache_axes(cfg), shapes, mesh, GENERATION_RULES if rules is None else rules)


def slot_shards(slots: int, mesh, rules=None) -> int:
    """The parts `mesh` splits `slots` slots into under `rules` (the "batch" axis): each part's slots take their pages
    from their own part of the pool."""
    from jaxseeker.parallel import GENERATION_RULES, logical_sharding

    sharding = logical_sharding(("batch",), GENERATION_RULES if rules is None else rules, mesh, (slots,))
    return slots // sharding.shard_shape((slots,))[0]
