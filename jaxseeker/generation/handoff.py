"""The weight hand-off into the engine: params in any layout and dtype (e.g. the trainer's fsdp-sharded float32
master weights) → the engine's copy, cast to its dtype and resharded on device by one jitted function.

The function's outputs are placed on the hand-off mesh (`parallel.replica_meshes`: every engine replica's devices
side by side) by the generation rules, so XLA moves each shard straight from the devices that hold it to those
that need it: no host copy, no array replicated on every device on the way. Its outputs are the per-layer weights
decoding reads (`layout.engine_params`) and, when the engine prefills with a scan, the stacked ones too. Each
process then views its own replicas' part (`parallel.local_part`): the same buffers, on its own engine's mesh.
This is the resharding MaxText's and Tunix's RL trainers do between their training and sampling meshes
(`jax.device_put` / a jitted identity with the sampler's shardings); here one function also casts and unstacks.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec

from jaxseeker.generation import layout
from jaxseeker.model import ModelConfig, abstract_params


def handoff_fn(
    cfg: ModelConfig, *, dtype: str, stacked: bool, mesh=None, local_mesh=None, rules=None
) -> Callable[[Any], tuple[dict | None, dict]]:
    """`params -> (stacked or None, per-layer)`: the engine's weights from `params` (stacked as `model.init_params`
    makes them; any sharding, any floating dtype), floating leaves cast to `dtype`.

    With `mesh` (the hand-off mesh) the outputs are placed on it by `rules` and returned as arrays of `local_mesh`
    (this process's engine mesh, `mesh` itself by default); without, on the default device.
    Collective on several processes: every process calls it with its part of the same params.
    """
    out = None
    if mesh is not None:
        whole = parallel_shardings(cfg, mesh, rules)
        out = (whole, layout.param_shardings(cfg, mesh, rules), whole if stacked else None)
    place = _jitted(cfg, jnp.dtype(dtype).name, stacked, jax.tree.structure(out), tuple(jax.tree.leaves(out)))
    if mesh is None or local_mesh is None or local_mesh is mesh:
        return place

    from jaxseeker.parallel import local_part

    return lambda params: local_part(place(params), local_mesh)


def parallel_shardings(cfg: ModelConfig, mesh, rules) -> Any:
    """The stacked params' NamedShardings on `mesh` by `rules` (imported here: an engine without a mesh needs none)."""
    from jaxseeker.parallel import param_shardings

    return param_shardings(cfg, mesh, rules)


@functools.lru_cache(maxsize=8)
def _jitted(cfg: ModelConfig, dtype: str, stacked: bool, treedef: Any, leaves: tuple) -> Callable:
    """The jitted cast-reshard-unstack, one per engine configuration (cached on hashable arguments: a sharding
    pytree is not hashable, its structure and leaves are): (the stacked params' shardings, the outputs')."""
    shardings = jax.tree.unflatten(treedef, leaves)
    target, out = (None, None) if shardings is None else (shardings[0], shardings[1:][::-1])

    def cast(x: jax.Array) -> jax.Array:
        return x.astype(dtype) if jnp.issubdtype(x.dtype, jnp.floating) else x

    def place(params: dict) -> tuple[dict | None, dict]:
        params = jax.tree.map(cast, params)  # elementwise: stays sharded as it came, so the reshard moves `dtype`
        if target is not None:
            params = jax.tree.map(_spread, params, target)
        return (params if stacked else None), layout.engine_params(params, cfg)

    return jax.jit(place, out_shardings=out)


def _spread(x: jax.Array, target: NamedSharding) -> jax.Array:
    """`x` constrained to `target` split further over every mesh axis `target` leaves unused: on its split dimension
    when that divides, else on its largest whole dimension that does. From there to `target` is a gather within
    groups; straight from the trainer's fsdp split of another dimension, XLA's partitioner falls back to replicating
    the whole array on every device ("involuntary full rematerialization")."""
    spec = list(target.spec) + [None] * (x.ndim - len(target.spec))
    used = {a for entry in spec if entry is not None for a in ((entry,) if isinstance(entry, str) else entry)}
    free = tuple(a for a, n in target.mesh.shape.items() if a not in used and n > 1)
    if not used or not free:
        return x
    sizes = target.mesh.shape

    def axes(i: int) -> tuple[str, ...]:
        return () if spec[i] is None else (spec[i],) if isinstance(spec[i], str) else tuple(spec[i])

    fits = [i for i in range(x.ndim) if x.shape[i] % math.prod(sizes[a] for a in axes(i) + free) == 0]
    split = [i for i in fits if spec[i] is not None]
    dim = split[0] if split else max(fits, key=lambda i: x.shape[i], default=None)
    if dim is None:
        return x
    spec[dim] = axes(dim) + free
    return jax.lax.with_sharding_constraint(x, NamedSharding(target.mesh, PartitionSpec(*spec)))


def check_params(params: Any, cfg: ModelConfig, caller: str) -> None:
    """ValueError unless `params` has the structure and shapes of `model.init_params(cfg, …)` (any dtype)."""
    want = jax.tree.map(lambda x: x.shape, abstract_params(cfg))
    try:
        got = jax.tree.map(lambda x: tuple(x.shape), params)
    except (TypeError, AttributeError):
        got = None
    if got != want:
        raise ValueError(
            f"{caller}: the params differ in structure or shape from the model's (hidden_size "
            f"{cfg.hidden_size}, {cfg.num_layers} layers)"
        )
