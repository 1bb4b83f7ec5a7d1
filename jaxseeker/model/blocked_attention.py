"""Grouped-query attention computed tile by tile, visiting only the tiles the mask lets through.

Packed SFT rows are block-diagonal (one causal triangle per segment): most of a `[seq, seq]` score
matrix is masked. `blocked_attention` splits queries and keys into blocks of `block` positions and,
for each query block, runs an online softmax (flash-attention style) over the key blocks from the
first to the last one holding a visible pair (for causal, contiguous segments: exactly the tiles
that touch the query block's segments); the mask is applied inside each tile, so the result is
exact for any mask. Tiles outside that range are never computed, forward or backward. The result
equals `layers.dot_attention` on every query that sees at least one key (a query that sees none,
i.e. padding, gets zeros). The backward pass is a hand-written custom VJP that recomputes the
probabilities from the saved log-sum-exp, so no `[q, k]` score array is ever held: one
`block`×`block` tile per head at a time plus O(seq) floats per row (output, log-sum-exp, gradients).
The boolean mask itself (one byte per (q, k) pair, shared by every head and layer) is the one
O(seq²) array, as for `jax.nn.dot_product_attention`.

This is `attention_impl="blocked"` (training and scoring without a KV cache); it is meant for one
device, e.g. CPU: the loops pick rows by a traced index, so under a batch-sharded multi-device jit
XLA gathers the operands whole onto every device (correct, not parallel).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

_NEG = -0.7 * float(jnp.finfo(jnp.float32).max)


def _to_blocks(q, k, v, mask, block):
    """Pads the sequence axes to a multiple of `block` and lays heads out for batched block matmuls.

    Returns qg `[batch, kv_heads, group, q_pad, head_dim]`, kt/vt `[batch, kv_heads, k_pad, head_dim]`,
    the padded mask `[batch, q_pad, k_pad]` and the block table `[batch, q_blocks, k_blocks]`.
    """
    b, s, h, d = q.shape
    t, kvh = k.shape[1], k.shape[2]
    sp, tp = -(-s // block) * block, -(-t // block) * block
    q = jnp.pad(q, ((0, 0), (0, sp - s), (0, 0), (0, 0)))
    k = jnp.pad(k, ((0, 0), (0, tp - t), (0, 0), (0, 0)))
    v = jnp.pad(v, ((0, 0), (0, tp - t), (0, 0), (0, 0)))
    mask = jnp.pad(mask, ((0, 0), (0, sp - s), (0, tp - t)))
    qg = q.reshape(b, sp, kvh, h // kvh, d).transpose(0, 2, 3, 1, 4)
    kt, vt = k.transpose(0, 2, 1, 3), v.transpose(0, 2, 1, 3)
    table = mask.reshape(b, sp // block, block, tp // block, block).any(axis=(2, 4))
    return qg, kt, vt, mask, table


def _block_range(table_row: jax.Array) -> tuple[jax.Array, jax.Array]:
    """First and one-past-last key block marked in `table_row` `[k_blocks]` ((0, 0) when none is)."""
    n = table_row.shape[0]
    any_ = jnp.any(table_row)
    lo = jnp.argmax(table_row)
    hi = n - jnp.argmax(table_row[::-1])
    return jnp.where(any_, lo, 0), jnp.where(any_, hi, 0)


def _forward(qg, kt, vt, mask, table, block, scale):
    """Online-softmax pass: output like qg and the log-sum-exp `[batch, kv_heads, group, q_pad]` (f32)."""
    b, kvh, g, sp, d = qg.shape
    nq = sp // block

    def row_block(idx, carry):
        out, lse = carry
        r, i = idx // nq, idx % nq
        qi = jax.lax.dynamic_slice_in_dim(qg[r], i * block, block, axis=2)  # [kv_heads, group, block, head_dim]
        qi = qi * jnp.asarray(scale, qi.dtype)
        lo, hi = _block_range(table[r, i])

        def key_block(j, acc):
            m, l, o = acc
            kj = jax.lax.dynamic_slice_in_dim(kt[r], j * block, block, axis=1)  # [kv_heads, block, head_dim]
            vj = jax.lax.dynamic_slice_in_dim(vt[r], j * block, block, axis=1)
            mij = jax.lax.dynamic_slice(mask[r], (i * block, j * block), (block, block))  # [block, block]
            s = jnp.einsum("ngqd,ntd->ngqt", qi, kj, preferred_element_type=jnp.float32)
            s = jnp.where(mij, s, _NEG)  # [kv_heads, group, block, block]
            m_new = jnp.maximum(m, s.max(axis=-1))
            p = jnp.where(mij, jnp.exp(s - m_new[..., None]), 0.0)
            corr = jnp.exp(m - m_new)
            pv = jnp.einsum("ngqt,ntd->ngqd", p.astype(vj.dtype), vj, preferred_element_type=jnp.float32)
            return m_new, l * corr + p.sum(axis=-1), o * corr[..., None] + pv

        init = (jnp.full((kvh, g, block), _NEG, jnp.float32), jnp.zeros((kvh, g, block), jnp.float32),
                jnp.zeros((kvh, g, block, d), jnp.float32))
        m, l, o = jax.lax.fori_loop(lo, hi, key_block, init)
        seen = l > 0
        o = jnp.where(seen[..., None], o / jnp.where(seen, l, 1.0)[..., None], 0.0)
        lse_i = jnp.where(seen, m + jnp.log(jnp.where(seen, l, 1.0)), 0.0)
        out = jax.lax.dynamic_update_slice(out, o.astype(out.dtype)[None], (r, 0, 0, i * block, 0))
        lse = jax.lax.dynamic_update_slice(lse, lse_i[None], (r, 0, 0, i * block))
        return out, lse

    init = (jnp.zeros_like(qg), jnp.zeros((b, kvh, g, sp), jnp.float32))
    return jax.lax.fori_loop(0, b * nq, row_block, init)


def _backward(qg, kt, vt, mask, table, out, lse, dout, block, scale):
    """Gradients (dqg, dkt, dvt) of the blocked attention, recomputing probabilities block by block."""
    b, kvh, g, sp, d = qg.shape
    nq = sp // block
    delta = jnp.sum(dout.astype(jnp.float32) * out.astype(jnp.float32), axis=-1)  # [batch, kv_heads, group, q_pad]

    def row_block(idx, carry):
        dq, dk, dv = carry
        r, i = idx // nq, idx % nq
        qi = jax.lax.dynamic_slice_in_dim(qg[r], i * block, block, axis=2) * jnp.asarray(scale, qg.dtype)
        doi = jax.lax.dynamic_slice_in_dim(dout[r], i * block, block, axis=2)  # [kv_heads, group, block, head_dim]
        lse_i = jax.lax.dynamic_slice_in_dim(lse[r], i * block, block, axis=2)  # [kv_heads, group, block]
        delta_i = jax.lax.dynamic_slice_in_dim(delta[r], i * block, block, axis=2)
        lo, hi = _block_range(table[r, i])

        def key_block(j, acc):
            dqi, dk, dv = acc
            kj = jax.lax.dynamic_slice_in_dim(kt[r], j * block, block, axis=1)  # [kv_heads, block, head_dim]
            vj = jax.lax.dynamic_slice_in_dim(vt[r], j * block, block, axis=1)
            mij = jax.lax.dynamic_slice(mask[r], (i * block, j * block), (block, block))
            s = jnp.einsum("ngqd,ntd->ngqt", qi, kj, preferred_element_type=jnp.float32)
            p = jnp.where(mij, jnp.exp(s - lse_i[..., None]), 0.0)  # [kv_heads, group, block, block]
            dvj = jnp.einsum("ngqt,ngqd->ntd", p.astype(doi.dtype), doi, preferred_element_type=jnp.float32)
            dp = jnp.einsum("ngqd,ntd->ngqt", doi, vj, preferred_element_type=jnp.float32)
            ds = p * (dp - delta_i[..., None])
            dqi = dqi + jnp.einsum("ngqt,ntd->ngqd", ds.astype(kj.dtype), kj, preferred_element_type=jnp.float32)
            dkj = jnp.einsum("ngqt,ngqd->ntd", ds.astype(qi.dtype), qi, preferred_element_type=jnp.float32)
            at = (r, 0, j * block, 0)
            dk = jax.lax.dynamic_update_slice(dk, jax.lax.dynamic_slice(dk, at, (1, kvh, block, d)) + dkj[None], at)
            dv = jax.lax.dynamic_update_slice(dv, jax.lax.dynamic_slice(dv, at, (1, kvh, block, d)) + dvj[None], at)
            return dqi, dk, dv

        dqi, dk, dv = jax.lax.fori_loop(lo, hi, key_block, (jnp.zeros((kvh, g, block, d), jnp.float32), dk, dv))
        dq = jax.lax.dynamic_update_slice(dq, (dqi * scale)[None], (r, 0, 0, i * block, 0))
        return dq, dk, dv

    zeros_k = jnp.zeros(kt.shape, jnp.float32)
    init = (jnp.zeros(qg.shape, jnp.float32), zeros_k, zeros_k)
    dq, dk, dv = jax.lax.fori_loop(0, b * nq, row_block, init)
    return dq.astype(qg.dtype), dk.astype(kt.dtype), dv.astype(vt.dtype)


@functools.partial(jax.custom_vjp, nondiff_argnums=(5, 6))
def _attend(qg, kt, vt, mask, table, block, scale):
    return _forward(qg, kt, vt, mask, table, block, scale)[0]


def _attend_fwd(qg, kt, vt, mask, table, block, scale):
    out, lse = _forward(qg, kt, vt, mask, table, block, scale)
    return out, (qg, kt, vt, mask, table, out, lse)


def _attend_bwd(block, scale, residuals, dout):
    qg, kt, vt, mask, table, out, lse = residuals
    dq, dk, dv = _backward(qg, kt, vt, mask, table, out, lse, dout, block, scale)
    return dq, dk, dv, None, None


_attend.defvjp(_attend_fwd, _attend_bwd)


def blocked_attention(
    q: jax.Array, k: jax.Array, v: jax.Array, mask: jax.Array, *, block: int = 256
) -> jax.Array:
    """Grouped-query attention that skips fully masked `block`×`block` tiles (see the module docstring).

    q `[batch, q, heads, head_dim]`, k/v `[batch, k, kv_heads, head_dim]`, mask `[batch, q, k]` (bool,
    True = visible) → `[batch, q, heads, head_dim]`. Differentiable in q, k and v.
    """
    if not isinstance(block, int) or block <= 0:
        raise ValueError(f"block must be a positive int, got {block!r}")
    b, s, h, d = q.shape
    kvh = k.shape[2]
    if h % kvh or k.shape != v.shape or (k.shape[0], k.shape[3]) != (b, d) or mask.shape != (b, s, k.shape[1]):
        raise ValueError(f"blocked_attention: q {q.shape}, k {k.shape}, v {v.shape}, mask {mask.shape} do not agree")
    block = min(block, max(s, k.shape[1]))
    qg, kt, vt, mask, table = _to_blocks(q, k, v, mask.astype(bool), block)
    out = _attend(qg, kt, vt, mask, table, block, d**-0.5)  # [batch, kv_heads, group, q_pad, head_dim]
    return out[:, :, :, :s].transpose(0, 3, 1, 2, 4).reshape(b, s, h, d)
