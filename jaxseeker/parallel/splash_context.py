"""Splash attention (the Pallas TPU kernel) across the context axis: all-gather the keys and values, shard the
queries with `q_seq_shards`.

Each device holds its queries in the balanced order of `context_layout` (a front and a back chunk), gathers the
row's keys, values and segment ids over the context axes and puts them back in the order of the row as
written; the splash kernel, built for the whole row with `q_seq_shards` = the context size, gets as an extra
`shard_map` operand its mask tables sharded the same way (`SplashAttentionKernel.manual_sharding_spec`), so each
device runs only its queries' blocks. The mask is causal with the query side in the balanced order
(`BalancedCausalMask`, computed by the kernel from each query's index, never stored); segment ids mask packing.
This is MaxText's all-gather context parallelism with its load-balanced causal mask.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_kernel as splash
from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_mask as splash_mask
from jax.sharding import AbstractMesh, Mesh, NamedSharding, PartitionSpec

from jaxseeker.model.backend import pallas_interpret
from jaxseeker.parallel.context_layout import ContextLayout, balanced_order


class BalancedCausalMask(splash_mask._ComputableMask):  # the kernel's lazily computed masks have no public base
    """Causal mask of a row whose queries are held in the layout's order and whose keys are in the row's order:
    query position p (index `balanced_order(layout)[p]`) sees key j when j ≤ that index."""

    def __init__(self, layout: ContextLayout):
        super().__init__(
            (layout.seq, layout.seq), lambda q_index, k_index: q_index >= k_index, shard_count=layout.shards
        )
        self.q_sequence = balanced_order(layout).astype(np.int32)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, BalancedCausalMask) and np.array_equal(self.q_sequence, other.q_sequence)

    def __hash__(self) -> int:
        return hash((type(self), self.q_sequence.tobytes()))


def _block(layout: ContextLayout) -> int:
    """The splash tile: the largest of 512, 256, 128 that divides each device's share of the row."""
    block = next((n for n in (512, 256, 128) if (layout.seq // layout.shards) % n == 0), None)
    if block is None:
        raise ValueError(
            f"attention_impl='splash' over context={layout.shards} needs each device's share of the "
            f"sequence to be a multiple of 128, got {layout.seq} / {layout.shards}"
        )
    return block


def splash_context_attention(
    q: jax.Array,
    k: jax.Array,
    v: jax.Array,
    segment_ids: jax.Array,
    *,
    mesh: Mesh | AbstractMesh,
    layout: ContextLayout,
    specs,
    heads: int,
) -> jax.Array:
    """Splash attention of rows held in `layout`'s order and split over its axes (module docstring): q
    `[batch, seq, heads, head_dim]`, k/v `[batch, seq, kv_heads, head_dim]`, segment_ids `[batch, seq]`, split by
    `specs` (`attention_specs(..., split_seq=True)`), each device holding `heads` query heads."""
    block = _block(layout)
    sizes = splash.BlockSizes(
        block_q=block, block_kv=block, block_q_dkv=block, block_kv_dkv=block, use_fused_bwd_kernel=True
    )
    kernel = splash.make_splash_mha(
        splash_mask.MultiHeadMask([BalancedCausalMask(layout)] * heads),
        block_sizes=sizes,
        head_shards=1,
        q_seq_shards=layout.shards,
        interpret=pallas_interpret(),  # off TPU: refused unless JAXSEEKER_INTERPRET_KERNELS=1
    )
    kernel_spec = kernel.manual_sharding_spec(NamedSharding(mesh, PartitionSpec(None, layout.axes)))
    natural = np.argsort(balanced_order(layout))  # layout position of each index of the row as written
    gather = functools.partial(jax.lax.all_gather, axis_name=layout.axes, axis=1, tiled=True)

    def local(q, k, v, segment_ids, kernel):  # q [batch, seq / shards, heads, head_dim]
        k, v, kv_segments = (jnp.take(gather(x), natural, axis=1) for x in (k, v, segment_ids))  # the whole row

        def one_row(qr, kr, vr, q_seg, kv_seg):  # qr [heads, seq / shards, head_dim], kr/vr [kv_heads, seq, …]
            return kernel(qr, kr, vr, segment_ids=splash.SegmentIds(q=q_seg, kv=kv_seg))

        qt = (q * jnp.asarray(q.shape[-1] ** -0.5, q.dtype)).transpose(0, 2, 1, 3)
        out = jax.vmap(one_row)(
            qt,
            k.transpose(0, 2, 1, 3),
            v.transpose(0, 2, 1, 3),
            segment_ids.astype(jnp.int32),
            kv_segments.astype(jnp.int32),
        )  # [batch, heads, seq / shards, head_dim]
        return out.transpose(0, 2, 1, 3)

    blockwise = jax.shard_map(
        local,
        mesh=mesh,
        in_specs=(specs.q, specs.kv, specs.kv, specs.segment_ids, kernel_spec),
        out_specs=specs.q,
        check_vma=False,
    )  # a Pallas kernel does not type its outputs
    return blockwise(q, k, v, segment_ids, kernel)
