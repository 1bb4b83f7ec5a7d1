"""Attention kernels XLA cannot partition (a Pallas call such as splash, the blocked kernel's loops), run
blockwise under `jax.shard_map`.

Under a multi-device jit, XLA gathers the operands of a custom kernel whole onto every device. Attention
needs no communication across batch rows or across kv-head groups, so `shard_attention` runs the kernel
on each device's block instead: batch rows split over the mesh axes of the `batch` rule (data, fsdp, …),
query heads and kv heads split alike over those of the `heads` rule (tensor), sequence and head_dim whole
(the kernel sees whole rows). The kernel's signature is `attention(q, k, v, segment_ids)` with
q `[batch, seq, heads, head_dim]`, k/v `[batch, seq, kv_heads, head_dim]`, segment_ids `[batch, seq]`
→ `[batch, seq, heads, head_dim]`, query heads sharing kv heads in contiguous groups (GQA).

`context_attention` also splits the sequence, over the mesh axes of the `seq` rule (`context`): rows held in
the `context_layout` order, each device's queries attend to the whole row by ring attention or by gathering the
keys and values (`parallel.ring_attention`), with the blocked kernel on each device, or, gathering with
`attention_impl: splash`, the splash kernel with `q_seq_shards` (`parallel.splash_context`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.sharding import AbstractMesh, Mesh, PartitionSpec

from jaxseeker.model.blocked_attention import Coords
from jaxseeker.parallel.context_layout import ContextLayout, context_layout, local_index
from jaxseeker.parallel.ring_attention import all_gather_attention, ring_attention
from jaxseeker.parallel.rules import DEFAULT_RULES, Rules, logical_to_spec

Attention = Callable[[jax.Array, jax.Array, jax.Array, jax.Array], jax.Array]
CONTEXT_KERNELS = {"all_gather": all_gather_attention, "ring": ring_attention}


class AttentionSpecs(NamedTuple):
    """Partition specs of the kernel's operands; the output is split like `q`."""

    q: PartitionSpec  # [batch, seq, heads, head_dim]
    kv: PartitionSpec  # [batch, seq, kv_heads, head_dim], for k and v
    segment_ids: PartitionSpec  # [batch, seq]


def attention_specs(
    mesh: Mesh | AbstractMesh,
    q_shape: Sequence[int],
    kv_shape: Sequence[int],
    rules: Rules = DEFAULT_RULES,
    *,
    split_seq: bool = False,
) -> AttentionSpecs:
    """The specs `shard_attention` uses for these shapes: the `batch` rule on batch; the `heads` rule on the heads
    of q, k and v when it splits `heads` and `kv_heads` over the same mesh axes (so every device holds whole kv
    groups) and none of batch's or seq's, else heads whole; with `split_seq` (`context_attention`), the `seq` rule
    on the sequence, else the sequence whole. The rules' divisibility fallback applies (see
    `rules.logical_to_spec`)."""
    b, s, h, _ = q_shape
    kvh = kv_shape[2]
    batch, seq = logical_to_spec(("batch", "seq") if split_seq else ("batch", None), rules, mesh, (b, s))
    heads = logical_to_spec(("heads",), rules, mesh, (h,))[0]
    kv_heads = logical_to_spec(("kv_heads",), rules, mesh, (kvh,))[0]
    if heads != kv_heads or set(_names(heads)) & set(_names(batch) + _names(seq)):
        heads = None
    return AttentionSpecs(
        PartitionSpec(batch, seq, heads, None), PartitionSpec(batch, seq, heads, None), PartitionSpec(batch, seq)
    )


def _names(entry: str | tuple[str, ...] | None) -> tuple[str, ...]:
    """The mesh axes of one `PartitionSpec` entry."""
    return () if entry is None else (entry,) if isinstance(entry, str) else tuple(entry)


def shard_attention(
    attention: Attention,
    mesh: Mesh | AbstractMesh | None = None,
    specs: AttentionSpecs | None = None,
    *,
    rules: Rules = DEFAULT_RULES,
) -> Attention:
    """`attention` run on each device's block of batch rows and heads under `jax.shard_map` (module docstring).

    mesh: default, the mesh in context when the function is traced (`jax.set_mesh` around the call, or
    `jax.sharding.use_abstract_mesh` inside the jitted function); with no mesh, or one of
    a single device, `attention` itself is called. specs: default `attention_specs(mesh, q.shape, k.shape,
    rules)`. Mesh axes the specs leave out hold copies: each of their devices computes the same block.
    """

    def sharded(q: jax.Array, k: jax.Array, v: jax.Array, segment_ids: jax.Array) -> jax.Array:
        active = mesh if mesh is not None else jax.sharding.get_abstract_mesh()
        if active.empty or active.size == 1:
            return attention(q, k, v, segment_ids)
        s = specs or attention_specs(active, q.shape, k.shape, rules)
        blockwise = jax.shard_map(
            attention, mesh=active, in_specs=(s.q, s.kv, s.kv, s.segment_ids), out_specs=s.q, check_vma=False
        )  # a Pallas kernel does not type its outputs
        return blockwise(q, k, v, segment_ids)  # [batch, seq, heads, head_dim]

    return sharded


def context_attention(
    strategy: str = "all_gather",
    mesh: Mesh | AbstractMesh | None = None,
    *,
    rules: Rules = DEFAULT_RULES,
    impl: str = "blocked",
    block: int = 512,
) -> Attention:
    """`(q, k, v, segment_ids) -> out` over rows held in the `context_layout(mesh, rules, seq)` order, run under
    `jax.shard_map`: batch rows and heads split as in `shard_attention`, the sequence over the mesh axes of the
    `seq` rule, and on each device `CONTEXT_KERNELS[strategy]` ("ring" or "all_gather", see
    `parallel.ring_attention`) with the blocked kernel; causality follows each token's index in the row as written.
    impl "splash" with "all_gather" runs the splash kernel on the gathered row instead (`parallel.splash_context`;
    ring has no splash form here). Where the rule does not split the sequence (axes of size 1, a length they do not
    divide), each device attends within its whole rows with the blocked kernel. mesh: as in `shard_attention`
    (default: the mesh in context when traced)."""
    if strategy not in CONTEXT_KERNELS:
        raise ValueError(f"context attention {strategy!r} is not one of {sorted(CONTEXT_KERNELS)}")
    kernel = CONTEXT_KERNELS[strategy]

    def sharded(q: jax.Array, k: jax.Array, v: jax.Array, segment_ids: jax.Array) -> jax.Array:
        active = mesh if mesh is not None else jax.sharding.get_abstract_mesh()
        layout = ContextLayout(q.shape[1]) if active.empty else context_layout(active, rules, q.shape[1])

        def local(q, k, v, segment_ids):  # one device's block: q [batch, seq / shards, heads, head_dim]
            index = jnp.broadcast_to(local_index(layout, q.shape[1])[None], segment_ids.shape)  # [batch, seq / shards]
            coords = Coords(index, segment_ids.astype(jnp.int32))
            return kernel(q, k, v, coords, coords, axes=layout.axes, shards=layout.shards, block=block)

        if active.empty or active.size == 1:
            return local(q, k, v, segment_ids)
        s = attention_specs(active, q.shape, k.shape, rules, split_seq=True)
        if impl == "splash" and strategy == "all_gather" and layout.shards > 1:
            from jaxseeker.parallel.splash_context import splash_context_attention  # Pallas: imported when used

            heads = q.shape[2] // math.prod(dict(active.shape)[a] for a in _names(s.q[2]))
            return splash_context_attention(q, k, v, segment_ids, mesh=active, layout=layout, specs=s, heads=heads)
        blockwise = jax.shard_map(
            local, mesh=active, in_specs=(s.q, s.kv, s.kv, s.segment_ids), out_specs=s.q, check_vma=False
        )
        return blockwise(q, k, v, segment_ids)  # [batch, seq, heads, head_dim]

    return sharded
