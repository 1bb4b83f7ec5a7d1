"""How rows lie over the mesh axes that split the sequence (the `seq` rule: `context`), and their balanced order.

Split in `n` contiguous chunks, causal attention leaves the first device nearly idle (its queries see few keys)
while the last does most of the work. The balanced order cuts a row into 2n chunks and gives device i chunks
i and 2n-1-i, a front and a back chunk, so every device holds the same share of the causal triangle (MaxText's
`reorder_sequence`, the load balancing of ring attention). A training step permutes its `[batch, seq]` inputs into
this order once (`to_balanced`); the whole model then runs in it, since every layer but attention works token by
token and attention rebuilds causality from each token's index in the row as written (`local_index`); the loss is
a sum over tokens, and per-token outputs (log-probs) go back with `from_balanced`. Segment ids and positions are
inputs like the tokens: they travel with them.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import AbstractMesh, Mesh

from jaxseeker.parallel.rules import Rules, logical_to_spec


@dataclasses.dataclass(frozen=True)
class ContextLayout:
    """How a row of `seq` tokens is split: over mesh `axes` (`shards` ways; none: whole rows), `balanced` or not."""

    seq: int
    axes: tuple[str, ...] = ()
    shards: int = 1
    balanced: bool = False


def sequence_axes(mesh: Mesh | AbstractMesh, rules: Rules) -> tuple[str, ...]:
    """The mesh axes of size > 1 that the `seq` rule splits rows over (empty: rows stay whole)."""
    sizes = dict(mesh.shape)
    return tuple(a for a in rules.get("seq", ()) if sizes.get(a, 1) > 1)


def context_layout(mesh: Mesh | AbstractMesh, rules: Rules, seq: int) -> ContextLayout:
    """The layout of rows of `seq` tokens: split as `logical_to_spec` splits a `seq` axis (its divisibility
    fallback included), balanced when every device's share halves into whole chunks (seq a multiple of 2n)."""
    entry = logical_to_spec(("seq",), rules, mesh, (seq,))[0]
    axes = () if entry is None else (entry,) if isinstance(entry, str) else tuple(entry)
    shards = math.prod(dict(mesh.shape)[a] for a in axes)
    return ContextLayout(seq, axes, shards, shards > 1 and seq % (2 * shards) == 0)


def balanced_order(layout: ContextLayout) -> np.ndarray:
    """`[seq]`: the index in the row as written of each position of the layout (identity unless balanced)."""
    if not layout.balanced:
        return np.arange(layout.seq)
    n, chunk = layout.shards, layout.seq // (2 * layout.shards)
    chunks = [c for i in range(n) for c in (i, 2 * n - 1 - i)]
    return np.concatenate([np.arange(c * chunk, (c + 1) * chunk) for c in chunks])


def to_balanced(x: jax.Array, layout: ContextLayout) -> jax.Array:
    """`x` `[batch, seq, …]` in the layout's order (itself unless balanced)."""
    return x if not layout.balanced else jnp.take(x, jnp.asarray(balanced_order(layout)), axis=1)


def from_balanced(x: jax.Array, layout: ContextLayout) -> jax.Array:
    """`x` `[batch, seq, …]` held in the layout's order, back in the order of the row as written."""
    return x if not layout.balanced else jnp.take(x, jnp.asarray(np.argsort(balanced_order(layout))), axis=1)


def balanced_rows(batch: Mapping[str, jax.Array], layout: ContextLayout) -> dict[str, jax.Array]:
    """Every `[batch, seq, …]` array of `batch` (tokens, targets, masks, segment ids, positions, log-probs, …) in
    the layout's order; other entries as they are."""
    return {
        key: to_balanced(x, layout) if jnp.ndim(x) >= 2 and x.shape[1] == layout.seq else x for key, x in batch.items()
    }


def local_index(layout: ContextLayout, n_local: int) -> jax.Array:
    """Inside `shard_map` over the layout's axes: the index in the row as written of each of this device's
    `n_local` tokens `[n_local]` int32."""
    if layout.shards == 1:
        return jnp.arange(n_local, dtype=jnp.int32)
    shard = jax.lax.axis_index(layout.axes)
    if not layout.balanced:
        return shard * n_local + jnp.arange(n_local, dtype=jnp.int32)
    half = n_local // 2
    p = jnp.arange(n_local, dtype=jnp.int32)
    chunk = jnp.where(p < half, shard, 2 * layout.shards - 1 - shard)  # front chunk, then back chunk
    return chunk * half + p % half
