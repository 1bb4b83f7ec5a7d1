"""One table from logical axis names to mesh axes, and the shardings it gives.

Model code names the axes of every array in words (`vocab`, `embed`, `heads`, `kv_heads`,
`head_dim`, `mlp`, `experts`, `layers`, `lora_rank`, `batch`, `seq`, `residual_seq`) and never a device; this
module alone turns those names into `PartitionSpec`s for a mesh with axes (data, fsdp, tensor, expert, context).

`seq` (input rows, the KV cache) splits over `context`; `residual_seq`, the sequence axis of the residual stream
between layers, over `context` and `tensor` as well (sequence parallelism: under tensor parallelism the saved
residuals are not copied on every tensor device; XLA gathers them inside each layer and reduce-scatters the
layer's output instead of all-reducing it, as Megatron-SP does). `embed`, the weights' model dimension, splits over
`fsdp` and `context`: under context parallelism the weights, their gradients and Adam's moments are split over
every chip of a row's context group too (ZeRO-3 over fsdp × context, as MaxText's rules put `embed` over fsdp and
its sequence/context axes); a pass gathers each layer's weights over both. Activations never carry `embed` (their
model dimension is unnamed), so the rule moves no activation.

The embedding lookup (`model.hidden_states` under a `constrain`) reads its table split along `lookup_embed` (fsdp
alone: gathered over context) and yields rows split along `lookup_batch` (the batch axes but fsdp), the sequence
along `seq` and the width along `lookup_embed`, as many elements as a device's share of the residual stream, which
it then takes by an exchange over fsdp. Left to XLA, with the table split over context too the partitioner falls
back to replicating the looked-up rows ("involuntary full rematerialization"), and with it split over fsdp alone
it gathered every row whole, at its share of the width, on each device of the context axis.

Resolution of one array's axes, dimension by dimension:
  1. the rule gives an ordered tuple of mesh axes (empty = replicated);
  2. a mesh axis may serve one dimension only: if two dimensions of the same array map to the
     same mesh axis, that is an error in the table (checked whatever the mesh sizes);
  3. mesh axes of size 1 are left out (they change nothing);
  4. divisibility fallback: the dimension keeps the longest prefix of its mesh axes whose size
     product divides it; if none divides, the dimension is replicated. E.g. `kv_heads` = 2 on a
     tensor axis of 4 is replicated; `batch` = 4 over (data=2, fsdp=2, expert=2) is split over
     (data, fsdp) only. Replication is always correct, only less memory-efficient.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import numpy as np
from jax.sharding import AbstractMesh, Mesh, NamedSharding, PartitionSpec

Rules = Mapping[str, tuple[str, ...]]

DEFAULT_RULES: Rules = {
    "batch": ("data", "fsdp", "expert"),
    "seq": ("context",),
    "residual_seq": ("context", "tensor"),
    "embed": ("fsdp", "context"),
    "lookup_embed": ("fsdp",),  # the embedding lookup's width and rows (module docstring)
    "lookup_batch": ("data", "expert"),
    "vocab": ("tensor",),
    "heads": ("tensor",),
    "kv_heads": ("tensor",),
    "mlp": ("tensor",),
    "experts": ("expert",),
    "head_dim": (),
    "layers": (),
    "lora_rank": (),  # LoRA adapters' low-rank axis (`model.lora_axes`): a few dozen at most, kept whole
}


# The generation engine's table (`generation.Engine` on an engine mesh, `parallel.replica_meshes`): weights
# stationary, whole on every engine replica and split only by `tensor` (heads, kv heads, MLP, vocabulary), so a
# decode step all-reduces activations inside a replica and never gathers a weight; the data axes (the replicas)
# split the slots; an MoE layer's experts split over `expert` with every token on each of its devices (no
# all-to-all: each device runs its experts on all tokens, and the outputs are summed).
GENERATION_RULES: Rules = {**DEFAULT_RULES, "batch": ("data", "fsdp"), "embed": (), "residual_seq": ("context",)}


def make_rules(overrides: Mapping[str, Sequence[str] | str | None] | None = None, base: Rules = DEFAULT_RULES) -> Rules:
    """`base` with some logical axes remapped (a config's `sharding.rules`); values are mesh axis names."""
    rules = dict(base)
    for name, value in (overrides or {}).items():
        if value is None:
            value = ()
        elif isinstance(value, str):
            value = (value,)
        rules[name] = tuple(value)
    return rules


def logical_to_spec(
    axes: Sequence[str | None], rules: Rules, mesh: Mesh | AbstractMesh, shape: Sequence[int]
) -> PartitionSpec:
    """The `PartitionSpec` of an array of `shape` whose dimensions have logical names `axes`.

    `mesh` may be an `AbstractMesh` (only axis names and sizes are read).
    See the module docstring for the resolution order (no mesh axis twice, size-1 axes dropped,
    divisibility fallback to a prefix of the mesh axes or to replication).
    """
    axes, shape = tuple(axes), tuple(shape)
    if len(axes) != len(shape):
        raise ValueError(f"logical axes {axes} have {len(axes)} names but the array has shape {shape}")
    sizes = dict(mesh.shape)
    owner: dict[str, str] = {}
    spec: list[Any] = []
    for name, dim in zip(axes, shape):
        if name is None:
            spec.append(None)
            continue
        if name not in rules:
            raise KeyError(f"logical axis {name!r} (in {axes}) has no sharding rule; known: {sorted(rules)}")
        for mesh_axis in rules[name]:
            if mesh_axis not in sizes:
                raise ValueError(
                    f"rule {name!r} -> {rules[name]} names mesh axis {mesh_axis!r}; the mesh has {list(sizes)}"
                )
            if mesh_axis in owner:
                raise ValueError(
                    f"mesh axis {mesh_axis!r} is mapped from both {owner[mesh_axis]!r} and {name!r} in axes {axes}; "
                    "a mesh axis may shard one dimension of an array only"
                )
            owner[mesh_axis] = name
        kept = tuple(a for a in rules[name] if sizes[a] > 1)
        while kept and dim % math.prod(sizes[a] for a in kept):
            kept = kept[:-1]
        spec.append(None if not kept else kept[0] if len(kept) == 1 else kept)
    return PartitionSpec(*spec)


def logical_sharding(axes: Sequence[str | None], rules: Rules, mesh: Mesh, shape: Sequence[int]) -> NamedSharding:
    """`NamedSharding` of one array from its logical axes (see `logical_to_spec`)."""
    return NamedSharding(mesh, logical_to_spec(axes, rules, mesh, shape))


def tree_shardings(axes_tree: Any, shapes_tree: Any, mesh: Mesh, rules: Rules = DEFAULT_RULES) -> Any:
    """A pytree of `NamedSharding` for `shapes_tree` (arrays or `ShapeDtypeStruct`s).

    `axes_tree` has the structure of `shapes_tree` with a tuple of logical axis names where
    `shapes_tree` has a leaf (e.g. `model.param_axes(cfg)` for `model.init_params(cfg, rng)`).
    """

    def one(shaped, axes):
        if not isinstance(axes, tuple):
            raise TypeError(f"expected a tuple of logical axis names for shape {shaped.shape}, got {axes!r}")
        return logical_sharding(axes, rules, mesh, shaped.shape)

    return jax.tree.map(one, shapes_tree, axes_tree)


def activation_constraint(
    mesh: Mesh, rules: Rules = DEFAULT_RULES
) -> Callable[[jax.Array, Sequence[str | None]], jax.Array]:
    """`(x, logical_axes) -> x` held to the sharding the rules give (`jax.lax.with_sharding_constraint`): the
    model's `constrain` inside a step jitted over `mesh`."""

    def constrain(x: jax.Array, axes: Sequence[str | None]) -> jax.Array:
        return jax.lax.with_sharding_constraint(x, logical_sharding(axes, rules, mesh, x.shape))

    return constrain


def replicated(mesh: Mesh) -> NamedSharding:
    """The sharding that puts a full copy on every device of `mesh`."""
    return NamedSharding(mesh, PartitionSpec())


def batch_sharding(mesh: Mesh, shape: Sequence[int], rules: Rules = DEFAULT_RULES) -> NamedSharding:
    """Sharding of a `[batch, seq]` (or `[batch, ...]`) input array: batch split by the `batch` rule."""
    axes = ("batch", "seq") + (None,) * (len(shape) - 2)
    return logical_sharding(axes[: len(shape)], rules, mesh, shape)


def batch_shards(mesh: Mesh, rules: Rules = DEFAULT_RULES) -> int:
    """How many ways the `batch` rule can split a batch dimension over `mesh` (a row count that is a multiple of
    this is split over all of them)."""
    sizes = dict(mesh.shape)
    return math.prod(sizes.get(axis, 1) for axis in rules["batch"])


def shard_batch(batch: Mapping[str, np.ndarray], sharding: NamedSharding) -> dict[str, jax.Array]:
    """Place a host batch on the mesh of `sharding`; each process passes only its own rows.

    With P processes in the mesh, process p holds rows `[p * B / P, (p + 1) * B / P)` of the global
    batch of B rows (what a loader sharded by process index yields) and the batch dimension must be
    split over all of them; on one process the rows are the whole batch. Returns global arrays.
    """
    n_processes = len({device.process_index for device in sharding.mesh.devices.flat})
    out = {}
    for key, local in batch.items():
        local = np.asarray(local)
        global_shape = (local.shape[0] * n_processes,) + local.shape[1:]
        out[key] = jax.make_array_from_process_local_data(sharding, local, global_shape)
    return out
