"""Grouped-query attention computed tile by tile from token coordinates, never holding a `[q, k]` array.

Every query and key carries two coordinates (`Coords`): its `index`, the order causality follows (the token's
place in the row as written, whatever order the row is held in), and its `segment` (1, 2, … per packed
document, 0 = padding). Query i sees key j when segment(j) = segment(i) ≠ 0 and index(j) ≤ index(i): the rule of
`layers.attention_mask`. Queries and keys are split into blocks of `block` positions; a `block`×`block` tile is
computed only when the ranges of its blocks' coordinates say it may hold a visible pair, and its mask is rebuilt
inside the tile from the coordinates. So the result is exact for any coordinates (a permuted row, a chunk of keys
from another device), tiles that packing or causality hide are never computed, forward or backward, and the
largest arrays are one tile of scores per head plus O(seq) floats per row: no `[q, k]` mask, score or index array
(the tile table is `[q_blocks, k_blocks]` booleans per row).

The forward is an online softmax (flash-attention style) that also returns the log-sum-exp; the backward is
hand-written and recomputes the probabilities tile by tile from it. `blocked_forward` / `blocked_backward` expose
the halves to kernels that split the keys across devices (`parallel.ring_attention` merges partial results with
`merge_partials`); `blocked_attention` is the differentiable whole, `attention_impl="blocked"` (training and
scoring without a KV cache, e.g. on CPU) and the per-device kernel of context parallelism where splash does not
run. Its loops pick rows by a traced index: under a multi-device jit it runs blockwise only inside `shard_map`
(`parallel.shard_attention`), else XLA gathers its operands whole onto every device (correct, not parallel).

What it holds (XLA:CPU's buffer assignment, tests/model/test_attention_memory.py): three to five f32 tiles of
`[heads, block, block]`, and per token its output in the inputs' dtype (each query block finished in f32 first),
the f32 log-sum-exp and row sums, and f32 key / value gradient accumulators; no copy of its operands: they stay in
the model's layout, padded only when the length is not a multiple of `block`, and the loops slice one block at a
time, a query block (and its share of the output's cotangent) inside a `cond` that skips a block with no tile to
visit. The `cond` matters on XLA:CPU: it slices bf16 in f32 (its float normalization converts the whole sliced
array) and moves such a convert out of a loop whenever it sits in the loop's body rather than in a `cond`, so a
query block sliced in the body costs an f32 copy of the queries (and of the output and its cotangent in the
backward): 1.66 bytes a pair at Qwen2.5-7B's shape and 32K tokens in bf16, against 0.36 with the `cond`.
Compiled: 0.67 bytes a query-key pair of a row at 2,048 tokens (f32, 2 heads of 16), 0.04 at 8,192; 0.18 at 16,384
in bf16 (7 heads of 128 on one KV head). `planning.memory.blocked_kernel_bytes` counts the same arrays, and it is
the kernel GPU recipes train with (`planning.targets.KERNELS`).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.typing import DTypeLike

_NEG = -0.7 * float(jnp.finfo(jnp.float32).max)  # the log-sum-exp of a query that sees no key
_BIG = int(jnp.iinfo(jnp.int32).max)
BLOCK = 256  # positions per tile side: a tile's scores are [heads, BLOCK, BLOCK] f32 (`planning.memory` counts them)


class Coords(NamedTuple):
    """Where tokens sit: `index` (causal order) and `segment` (0 = padding), both `[batch, n]` int32."""

    index: jax.Array
    segment: jax.Array


def row_coords(segment_ids: jax.Array) -> Coords:
    """The coordinates of whole rows held in order: index 0 … n-1, the given segments."""
    b, n = segment_ids.shape
    return Coords(jnp.broadcast_to(jnp.arange(n, dtype=jnp.int32), (b, n)), segment_ids.astype(jnp.int32))


class _Blocks(NamedTuple):
    """Operands padded to whole blocks, in the model's layout (the loops slice and lay out one block at a time)."""

    q: jax.Array  # [batch, q_pad, heads, head_dim]
    k: jax.Array  # [batch, k_pad, kv_heads, head_dim]
    v: jax.Array  # [batch, k_pad, kv_heads, head_dim]
    qc: Coords  # [batch, q_pad] each
    kc: Coords  # [batch, k_pad] each
    table: jax.Array  # [batch, q_blocks, k_blocks] bool: the tile may hold a visible pair


def _pad(x: jax.Array, n: int) -> jax.Array:
    """`x` zero-padded along axis 1 to length `n` (padding tokens get segment 0: never visible)."""
    return jnp.pad(x, [(0, 0), (0, n - x.shape[1])] + [(0, 0)] * (x.ndim - 2))


def _padded(n: int, block: int) -> int:
    """`n` rounded up to a multiple of `block`."""
    return -(-n // block) * block


def _block_ranges(c: Coords, block: int) -> tuple[jax.Array, ...]:
    """Per block of real tokens `[batch, blocks]`: any real token, index min / max, segment min / max."""
    b, n = c.index.shape
    index, segment = c.index.reshape(b, n // block, block), c.segment.reshape(b, n // block, block)
    real = segment != 0
    return (
        real.any(-1),
        jnp.where(real, index, _BIG).min(-1),
        jnp.where(real, index, -_BIG).max(-1),
        jnp.where(real, segment, _BIG).min(-1),
        jnp.where(real, segment, 0).max(-1),
    )


def _tile_table(qc: Coords, kc: Coords, block: int) -> jax.Array:
    """`[batch, q_blocks, k_blocks]`: True where the blocks' coordinate ranges allow a visible pair (a superset
    of the tiles the mask lets through; exact for causal rows of contiguous segments)."""
    q_any, q_lo, q_hi, q_seg_lo, q_seg_hi = (x[:, :, None] for x in _block_ranges(qc, block))
    k_any, k_lo, _, k_seg_lo, k_seg_hi = (x[:, None, :] for x in _block_ranges(kc, block))
    return q_any & k_any & (k_lo <= q_hi) & (q_seg_lo <= k_seg_hi) & (k_seg_lo <= q_seg_hi)


def _to_blocks(q, k, v, qc: Coords, kc: Coords, block: int) -> _Blocks:
    """Pads the sequence axes to a multiple of `block` (a no-op when they are one: no copy of the operands)."""
    sp, tp = _padded(q.shape[1], block), _padded(k.shape[1], block)
    qc, kc = Coords(*(_pad(x.astype(jnp.int32), sp) for x in qc)), Coords(*(_pad(x.astype(jnp.int32), tp) for x in kc))
    return _Blocks(_pad(q, sp), _pad(k, tp), _pad(v, tp), qc, kc, _tile_table(qc, kc, block))


def _block_range(table_row: jax.Array) -> tuple[jax.Array, jax.Array]:
    """First and one-past-last key block marked in `table_row` `[k_blocks]` ((0, 0) when none is)."""
    n = table_row.shape[0]
    any_ = jnp.any(table_row)
    return jnp.where(any_, jnp.argmax(table_row), 0), jnp.where(any_, n - jnp.argmax(table_row[::-1]), 0)


def _slice(x: jax.Array, start, block: int, axis: int) -> jax.Array:
    return jax.lax.dynamic_slice_in_dim(x, start * block, block, axis=axis)


def _read(x: jax.Array, r, i, block: int, kv_heads: int) -> jax.Array:
    """Block `i` of row `r` of `x` `[batch, n, heads, …]`, heads first and grouped: `[kv_heads, group, block, …]`
    (keys and values, whose heads are the kv heads: `[kv_heads, 1, block, …]`)."""
    xi = _slice(x[r], i, block, 0)  # [block, heads, …]
    return jnp.moveaxis(xi.reshape(block, kv_heads, -1, *xi.shape[2:]), 0, 2)


def _read_if(row: jax.Array, read):
    """`read()` (a query block's arrays) where the row of the tile table `row` marks a tile, else zeros. Inside the
    `cond` the slices stay in the loop: XLA:CPU would otherwise convert the whole sliced array to f32 and hoist that
    copy out of the loop (see the module docstring)."""

    def zeros():
        return jax.tree.map(lambda a: jnp.zeros(a.shape, a.dtype), jax.eval_shape(read))

    return jax.lax.cond(jnp.any(row), read, zeros)


def _write(x: jax.Array, xi: jax.Array, r, i, block: int) -> jax.Array:
    """`x` `[batch, n, heads, …]` with block `i` of row `r` set to `xi` `[kv_heads, group, block, …]` (`_read`'s
    inverse), in `x`'s dtype."""
    xi = jnp.moveaxis(xi, 2, 0).reshape(block, -1, *xi.shape[3:]).astype(x.dtype)  # [block, heads, …]
    return jax.lax.dynamic_update_slice(x, xi[None], (r, i * block) + (0,) * (x.ndim - 2))


def _tile_mask(qi: Coords, kj: Coords) -> jax.Array:
    """`[block, block]` visibility of one tile from the coordinates of its queries and keys `[block]`."""
    same = (qi.segment[:, None] == kj.segment[None, :]) & (kj.segment[None, :] != 0)
    return same & (kj.index[None, :] <= qi.index[:, None])


def _row(c: Coords, r, i, block: int) -> Coords:
    """The coordinates of block `i` of row `r` `[block]`."""
    return Coords(_slice(c.index[r], i, block, 0), _slice(c.segment[r], i, block, 0))


def _forward(x: _Blocks, block: int, scale: float, out_dtype: DTypeLike = jnp.float32) -> tuple[jax.Array, jax.Array]:
    """Online-softmax pass: output like `x.q` (normalised in f32, written in `out_dtype`; 0 where a query sees
    nothing) and the log-sum-exp `[batch, q_pad, heads]` (f32; `_NEG` where a query sees nothing)."""
    b, sp, h, d = x.q.shape
    kvh, nq = x.k.shape[2], sp // block

    def row_block(idx, carry):
        out, lse = carry
        r, i = idx // nq, idx % nq
        qci, row = _row(x.qc, r, i, block), x.table[r, i]
        qi = _read_if(row, lambda: _read(x.q, r, i, block, kvh) * jnp.asarray(scale, x.q.dtype))  # [n, g, block, d]

        def key_block(j, acc):
            def visit(acc):
                m, denom, o = acc
                kj, vj = _read(x.k, r, j, block, kvh)[:, 0], _read(x.v, r, j, block, kvh)[:, 0]  # [kv_heads, block, d]
                mij = _tile_mask(qci, _row(x.kc, r, j, block))  # [block, block]
                s = jnp.einsum("ngqd,ntd->ngqt", qi, kj, preferred_element_type=jnp.float32)
                s = jnp.where(mij, s, _NEG)  # [kv_heads, group, block, block]
                m_new = jnp.maximum(m, s.max(axis=-1))
                p = jnp.where(mij, jnp.exp(s - m_new[..., None]), 0.0)
                corr = jnp.exp(m - m_new)
                pv = jnp.einsum("ngqt,ntd->ngqd", p.astype(vj.dtype), vj, preferred_element_type=jnp.float32)
                return m_new, denom * corr + p.sum(axis=-1), o * corr[..., None] + pv

            return jax.lax.cond(row[j], visit, lambda acc: acc, acc)

        init = (
            jnp.full((kvh, h // kvh, block), _NEG, jnp.float32),
            jnp.zeros((kvh, h // kvh, block), jnp.float32),
            jnp.zeros((kvh, h // kvh, block, d), jnp.float32),
        )
        m, denom, o = jax.lax.fori_loop(*_block_range(row), key_block, init)
        seen = denom > 0
        o = jnp.where(seen[..., None], o / jnp.where(seen, denom, 1.0)[..., None], 0.0)  # [kv_heads, group, block, d]
        lse_i = jnp.where(seen, m + jnp.log(jnp.where(seen, denom, 1.0)), _NEG)  # [kv_heads, group, block]
        return _write(out, o, r, i, block), _write(lse, lse_i, r, i, block)

    init = (jnp.zeros(x.q.shape, out_dtype), jnp.zeros((b, sp, h), jnp.float32))
    return jax.lax.fori_loop(0, b * nq, row_block, init)


def _backward(
    x: _Blocks, out, lse, dout, block: int, scale: float, dq_dtype: DTypeLike = jnp.float32
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Gradients (dq in `dq_dtype`, dk and dv in f32, all in the model's layout) of the attention whose whole output
    `[batch, q_pad, heads, head_dim]` and log-sum-exp `[batch, q_pad, heads]` are `out` / `lse` (which may cover more
    keys than `x` holds: then these are this chunk's shares of them). A query block's gradient is summed over its key
    blocks in f32 before it is written; the keys' and values' gradients gather over query blocks, so they stay f32."""
    b, sp, h, d = x.q.shape
    kvh, nq = x.k.shape[2], sp // block
    delta = jnp.sum(dout.astype(jnp.float32) * out.astype(jnp.float32), axis=-1)  # [batch, q_pad, heads]

    def row_block(idx, carry):
        dq, dk, dv = carry
        r, i = idx // nq, idx % nq
        lse_i, delta_i = _read(lse, r, i, block, kvh), _read(delta, r, i, block, kvh)  # [kv_heads, group, block]
        qci, row = _row(x.qc, r, i, block), x.table[r, i]
        qi, doi = _read_if(  # [kv_heads, group, block, head_dim] each
            row,
            lambda: (
                _read(x.q, r, i, block, kvh) * jnp.asarray(scale, x.q.dtype),
                _read(dout, r, i, block, kvh).astype(x.q.dtype),
            ),
        )

        def key_block(j, acc):
            def visit(acc):
                dqi, dk, dv = acc
                kj, vj = _read(x.k, r, j, block, kvh)[:, 0], _read(x.v, r, j, block, kvh)[:, 0]  # [kv_heads, block, d]
                mij = _tile_mask(qci, _row(x.kc, r, j, block))
                s = jnp.einsum("ngqd,ntd->ngqt", qi, kj, preferred_element_type=jnp.float32)
                p = jnp.where(mij, jnp.exp(jnp.where(mij, s - lse_i[..., None], 0.0)), 0.0)  # [kv_heads, group, q, k]
                dvj = jnp.einsum("ngqt,ngqd->ntd", p.astype(doi.dtype), doi, preferred_element_type=jnp.float32)
                dp = jnp.einsum("ngqd,ntd->ngqt", doi, vj, preferred_element_type=jnp.float32)
                ds = p * (dp - delta_i[..., None])
                dqi = dqi + jnp.einsum("ngqt,ntd->ngqd", ds.astype(kj.dtype), kj, preferred_element_type=jnp.float32)
                dkj = jnp.einsum("ngqt,ngqd->ntd", ds.astype(qi.dtype), qi, preferred_element_type=jnp.float32)
                dk = _write(dk, _read(dk, r, j, block, kvh) + dkj[:, None], r, j, block)
                dv = _write(dv, _read(dv, r, j, block, kvh) + dvj[:, None], r, j, block)
                return dqi, dk, dv

            return jax.lax.cond(row[j], visit, lambda acc: acc, acc)

        zeros = jnp.zeros((kvh, h // kvh, block, d), jnp.float32)
        dqi, dk, dv = jax.lax.fori_loop(*_block_range(row), key_block, (zeros, dk, dv))
        return _write(dq, dqi * scale, r, i, block), dk, dv

    zeros_k = jnp.zeros(x.k.shape, jnp.float32)
    return jax.lax.fori_loop(0, b * nq, row_block, (jnp.zeros(x.q.shape, dq_dtype), zeros_k, zeros_k))


def _check(q, k, v, q_coords: Coords, kv_coords: Coords, block: int) -> int:
    """The block size to use (at most the longer sequence); a ValueError names operands that disagree."""
    if not isinstance(block, int) or block <= 0:
        raise ValueError(f"block must be a positive int, got {block!r}")
    b, s, h, d = q.shape
    kvh, t = k.shape[2], k.shape[1]
    coords = [tuple(x.shape) for x in (*q_coords, *kv_coords)]
    if h % kvh or k.shape != v.shape or (k.shape[0], k.shape[3]) != (b, d) or coords != [(b, s)] * 2 + [(b, t)] * 2:
        raise ValueError(
            f"blocked attention: q {q.shape}, k {k.shape}, v {v.shape} and coordinates {coords} "
            "(q index, q segment, kv index, kv segment) do not agree"
        )
    return min(block, max(s, t))


def blocked_forward(
    q: jax.Array,
    k: jax.Array,
    v: jax.Array,
    q_coords: Coords,
    kv_coords: Coords,
    *,
    block: int = BLOCK,
    out_dtype: DTypeLike = jnp.float32,
) -> tuple[jax.Array, jax.Array]:
    """The forward half: (output `[batch, q, heads, head_dim]` in `out_dtype`, log-sum-exp `[batch, q, heads]` f32)
    of `q` `[batch, q, heads, head_dim]` over the keys / values `[batch, k, kv_heads, head_dim]` at `kv_coords`. A
    query that sees none of these keys gets output 0 and log-sum-exp `_NEG` (what `merge_partials` expects). f32
    for partial results that are merged; the whole attention writes its output in the compute dtype at once."""
    block = _check(q, k, v, q_coords, kv_coords, block)
    out, lse = _forward(_to_blocks(q, k, v, q_coords, kv_coords, block), block, q.shape[-1] ** -0.5, out_dtype)
    return out[:, : q.shape[1]], lse[:, : q.shape[1]]


def blocked_backward(
    q,
    k,
    v,
    q_coords: Coords,
    kv_coords: Coords,
    out: jax.Array,
    lse: jax.Array,
    dout: jax.Array,
    *,
    block: int = BLOCK,
    dq_dtype: DTypeLike = jnp.float32,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """The backward half: (dq in `dq_dtype`, dk and dv in f32) for these keys, given the attention's whole output
    `out` `[batch, q, heads, head_dim]`, log-sum-exp `lse` `[batch, q, heads]` and output cotangent `dout`. When
    the keys are a chunk of all the query attends to, dq is this chunk's share (shares add up: keep f32) and
    dk / dv are exact."""
    block = _check(q, k, v, q_coords, kv_coords, block)
    x = _to_blocks(q, k, v, q_coords, kv_coords, block)
    sp = x.q.shape[1]
    dq, dk, dv = _backward(x, _pad(out, sp), _pad(lse, sp), _pad(dout, sp), block, q.shape[-1] ** -0.5, dq_dtype)
    s, t = q.shape[1], k.shape[1]
    return dq[:, :s], dk[:, :t], dv[:, :t]


def no_keys(q: jax.Array) -> tuple[jax.Array, jax.Array]:
    """The partial result of queries `[batch, q, heads, head_dim]` over no key: output 0, log-sum-exp `_NEG`
    (what `merge_partials` starts from)."""
    return jnp.zeros(q.shape, jnp.float32), jnp.full(q.shape[:3], _NEG, jnp.float32)


def merge_partials(
    out_a: jax.Array, lse_a: jax.Array, out_b: jax.Array, lse_b: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """The attention over two disjoint sets of keys from each set's (output `[batch, q, heads, head_dim]`,
    log-sum-exp `[batch, q, heads]`): softmax weights exp(lse_x - lse) with lse = log(e^lse_a + e^lse_b)."""
    lse = jnp.logaddexp(lse_a, lse_b)
    return (out_a * jnp.exp(lse_a - lse)[..., None] + out_b * jnp.exp(lse_b - lse)[..., None]), lse


@functools.partial(jax.custom_vjp, nondiff_argnums=(5,))
def _attend(q, k, v, q_coords, kv_coords, block):
    return blocked_forward(q, k, v, q_coords, kv_coords, block=block, out_dtype=q.dtype)[0]


def _attend_fwd(q, k, v, q_coords, kv_coords, block):
    out, lse = blocked_forward(q, k, v, q_coords, kv_coords, block=block, out_dtype=q.dtype)
    return out, (q, k, v, q_coords, kv_coords, out, lse)


def _attend_bwd(block, residuals, dout):
    q, k, v, q_coords, kv_coords, out, lse = residuals
    dq, dk, dv = blocked_backward(q, k, v, q_coords, kv_coords, out, lse, dout, block=block, dq_dtype=q.dtype)
    return dq.astype(q.dtype), dk.astype(k.dtype), dv.astype(v.dtype), None, None  # coordinates: integers


_attend.defvjp(_attend_fwd, _attend_bwd)


def blocked_attention(
    q: jax.Array, k: jax.Array, v: jax.Array, q_coords: Coords, kv_coords: Coords | None = None, *, block: int = BLOCK
) -> jax.Array:
    """Causal attention within segments that skips hidden `block`×`block` tiles (see the module docstring).

    q `[batch, q, heads, head_dim]`, k/v `[batch, k, kv_heads, head_dim]` (query heads share kv heads in contiguous
    groups), `q_coords` / `kv_coords` (default: `q_coords`, self-attention) → `[batch, q, heads, head_dim]`.
    Differentiable in q, k and v; a query that sees no key (padding) gets zeros.
    """
    kv_coords = q_coords if kv_coords is None else kv_coords
    return _attend(q, k, v, q_coords, kv_coords, _check(q, k, v, q_coords, kv_coords, block))
