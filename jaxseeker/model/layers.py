"""The pieces of a decoder layer as pure functions: RMSNorm, attention, dense MLP, sparse MoE (each matmul with an
optional LoRA term, `add_lora`)."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxseeker.model.backend import pallas_interpret
from jaxseeker.model.blocked_attention import blocked_attention, row_coords
from jaxseeker.model.config import ModelConfig
from jaxseeker.model.rope import apply_rope

_NEG = -0.7 * float(jnp.finfo(jnp.float32).max)


def rms_norm(x: jnp.ndarray, weight: jnp.ndarray, eps: float) -> jnp.ndarray:
    """RMSNorm over the last axis, in f32, scaled by `weight` (HF: weight * normed.to(input dtype))."""
    x32 = x.astype(jnp.float32)
    normed = x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + eps)
    return weight.astype(x.dtype) * normed.astype(x.dtype)


def attention_mask(q_index: jnp.ndarray, q_segment: jnp.ndarray, k_segment: jnp.ndarray) -> jnp.ndarray:
    """Causal, segment-respecting mask `[batch, q, k]`: key j is visible from query i when j ≤ index(i),
    both are in the same segment and the key is not padding (segment 0)."""
    k_index = jnp.arange(k_segment.shape[1])
    causal = k_index[None, None, :] <= q_index[:, :, None]
    same = q_segment[:, :, None] == k_segment[:, None, :]
    return causal & same & (k_segment[:, None, :] != 0)


def dot_attention(
    q: jnp.ndarray,
    k: jnp.ndarray,
    v: jnp.ndarray,
    mask: jnp.ndarray,
    impl: str = "xla",
    *,
    segment_ids: jnp.ndarray | None = None,
) -> jnp.ndarray:
    """Grouped-query attention. q `[batch, q, heads, head_dim]`, k/v `[batch, k, kv_heads, head_dim]`,
    mask `[batch, q, k]` → `[batch, q, heads, head_dim]`.

    impl: "xla", the reference below (plain batched matmuls); "jax_xla" / "cudnn",
    `jax.nn.dot_product_attention` with that implementation (cudnn: GPU only); "splash", the Pallas TPU
    kernel (`splash_attention`), used when `segment_ids` `[batch, seq]` are given, i.e. for self-attention
    without a KV cache whose `mask` is `attention_mask(arange, segment_ids, segment_ids)`; "blocked",
    `blocked_attention` on that mask rebuilt tile by tile from the segment ids (skipping the tiles it hides:
    packed rows on CPU; `mask` is not read), also only where `segment_ids` are given. The cached paths pass none
    and use the reference. Rows of padding queries (segment 0) are arbitrary in every impl.
    """
    if impl in ("jax_xla", "cudnn"):
        implementation = "xla" if impl == "jax_xla" else "cudnn"
        return jax.nn.dot_product_attention(q, k, v, mask=mask[:, None], implementation=implementation)
    if impl == "splash" and segment_ids is not None:
        return splash_attention(q, k, v, segment_ids)
    if impl == "blocked" and segment_ids is not None:
        return blocked_attention(q, k, v, row_coords(segment_ids))  # the mask rebuilt per tile, not read
    return grouped_attention(q, k.transpose(0, 2, 3, 1), v.transpose(0, 2, 1, 3), mask)


def grouped_attention(q: jnp.ndarray, k_t: jnp.ndarray, v: jnp.ndarray, mask: jnp.ndarray) -> jnp.ndarray:
    """The reference grouped-query attention on head-major keys (transposed) and values: q `[batch, q, heads,
    head_dim]`, k_t `[batch, kv_heads, head_dim, k]`, v `[batch, kv_heads, k, head_dim]`, mask `[batch, q, k]` →
    `[batch, q, heads, head_dim]`.

    This is the layout of the engine's KV cache, read without a transpose: with the keys' positions last, both
    products are plain matmuls, which XLA:CPU runs about five times faster than the scores against `[k, head_dim]`
    keys (a transposed operand) when a decode step's few queries meet a long cache."""
    b, s, h, d = q.shape
    kvh = k_t.shape[1]
    # Queries of a kv group side by side on one axis: plain batched matmuls over [batch, kv_heads].
    qg = q.reshape(b, s, kvh, h // kvh, d).transpose(0, 2, 3, 1, 4).reshape(b, kvh, h // kvh * s, d)
    scores = jnp.einsum("bnqd,bndt->bnqt", qg * jnp.asarray(d**-0.5, q.dtype), k_t, preferred_element_type=jnp.float32)
    scores = scores.reshape(b, kvh, h // kvh, s, -1)  # [batch, kv_heads, group, q, k]
    scores = jnp.where(mask[:, None, None], scores, _NEG)
    probs = jax.nn.softmax(scores, axis=-1).astype(v.dtype).reshape(b, kvh, h // kvh * s, -1)
    out = jnp.einsum("bnqt,bntd->bnqd", probs, v)  # [batch, kv_heads, group * q, head_dim]
    return out.reshape(b, kvh, h // kvh, s, d).transpose(0, 3, 1, 2, 4).reshape(b, s, h, d)


def splash_attention(q: jnp.ndarray, k: jnp.ndarray, v: jnp.ndarray, segment_ids: jnp.ndarray) -> jnp.ndarray:
    """Causal attention within segments with the Pallas TPU splash kernel (off TPU: `model.backend.pallas_interpret`).

    q `[batch, seq, heads, head_dim]`, k/v `[batch, seq, kv_heads, head_dim]`, segment_ids `[batch, seq]`
    → `[batch, seq, heads, head_dim]`. Query i sees key j ≤ i of the same segment; heads share kv heads
    in groups as in `dot_attention`. `seq` must be a multiple of 128 (the kernel's tiles). XLA does not
    partition a Pallas call: under a multi-device jit its operands are gathered whole onto every device,
    unless the caller runs it blockwise (the train steps pass `parallel.shard_attention(splash_attention,
    mesh)` to `hidden_states(attention_kernel=...)`).
    """
    from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_kernel as splash
    from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_mask as splash_mask

    b, s, h, d = q.shape
    block = next((n for n in (512, 256, 128) if s % n == 0), None)
    if block is None:
        raise ValueError(f"attention_impl='splash' needs a sequence length that is a multiple of 128, got {s}")
    sizes = splash.BlockSizes(
        block_q=block, block_kv=block, block_q_dkv=block, block_kv_dkv=block, use_fused_bwd_kernel=True
    )
    kernel = splash.make_splash_mha(
        splash_mask.MultiHeadMask([splash_mask.CausalMask((s, s))] * h),
        block_sizes=sizes,
        head_shards=1,
        q_seq_shards=1,
        interpret=pallas_interpret(),  # off TPU: refused unless JAXSEEKER_INTERPRET_KERNELS=1
    )

    def one_row(qr, kr, vr, seg):  # qr [heads, seq, head_dim], kr/vr [kv_heads, seq, head_dim], seg [seq]
        return kernel(qr, kr, vr, segment_ids=splash.SegmentIds(q=seg, kv=seg))

    qt = (q * jnp.asarray(d**-0.5, q.dtype)).transpose(0, 2, 1, 3)  # [batch, heads, seq, head_dim]
    kt, vt = k.transpose(0, 2, 1, 3), v.transpose(0, 2, 1, 3)  # [batch, kv_heads, seq, head_dim]
    out = jax.vmap(one_row)(qt, kt, vt, segment_ids.astype(jnp.int32))  # [batch, heads, seq, head_dim]
    return out.transpose(0, 2, 1, 3)


def add_lora(out: jnp.ndarray, p: dict, name: str, x: jnp.ndarray, to_rank: str, from_rank: str) -> jnp.ndarray:
    """`out` (x·W for the weight `name` of one layer's params `p`) plus the low-rank term (x·A)·B when `p` carries
    LoRA adapters for that weight (`model.attach_lora`, which stores B scaled by alpha / rank); `out` itself
    otherwise. `to_rank`, `from_rank`: the einsums x·A → `[…, lora_rank]` and (x·A)·B → `out`'s shape."""
    adapter = p.get("lora", {}).get(name)
    if adapter is None:
        return out
    low = jnp.einsum(to_rank, x, adapter["a"].astype(x.dtype))  # [batch, seq, (experts,) lora_rank]
    return out + jnp.einsum(from_rank, low, adapter["b"].astype(x.dtype))


def project_qkv(
    p: dict, h: jnp.ndarray, cos: jnp.ndarray, sin: jnp.ndarray, cfg: ModelConfig
) -> tuple[jnp.ndarray, jnp.ndarray, jnp.ndarray]:
    """Queries, keys, values of normed input `[batch, seq, embed]`, with bias, q/k norm and RoPE applied."""
    dt = h.dtype
    q, k, v = (
        add_lora(jnp.einsum("bse,ehd->bshd", h, p[name].astype(dt)), p, name, h, "bse,er->bsr", "bsr,rhd->bshd")
        for name in ("q", "k", "v")
    )  # q [batch, seq, heads, head_dim], k, v [batch, seq, kv_heads, head_dim]
    if cfg.qkv_bias:
        q, k, v = q + p["q_bias"].astype(dt), k + p["k_bias"].astype(dt), v + p["v_bias"].astype(dt)
    if cfg.qk_norm:
        q, k = rms_norm(q, p["q_norm"], cfg.rms_norm_eps), rms_norm(k, p["k_norm"], cfg.rms_norm_eps)
    return apply_rope(q, cos, sin), apply_rope(k, cos, sin), v


def output_projection(p: dict, attn: jnp.ndarray, cfg: ModelConfig) -> jnp.ndarray:
    """`[batch, seq, heads, head_dim]` → `[batch, seq, embed]`."""
    out = jnp.einsum("bshd,hde->bse", attn, p["o"].astype(attn.dtype))
    out = add_lora(out, p, "o", attn, "bshd,hdr->bsr", "bsr,re->bse")
    return out + p["o_bias"].astype(out.dtype) if cfg.o_bias else out


def dense_mlp(p: dict, h: jnp.ndarray, cfg: ModelConfig) -> jnp.ndarray:
    """SwiGLU MLP: down(silu(gate(h)) * up(h)) on `[batch, seq, embed]`."""
    dt = h.dtype
    gate = add_lora(h @ p["gate"].astype(dt), p, "gate", h, "bse,er->bsr", "bsr,rm->bsm")  # [batch, seq, mlp]
    up = add_lora(h @ p["up"].astype(dt), p, "up", h, "bse,er->bsr", "bsr,rm->bsm")
    if cfg.mlp_bias:
        gate, up = gate + p["gate_bias"].astype(dt), up + p["up_bias"].astype(dt)
    act = jax.nn.silu(gate) * up  # [batch, seq, mlp]
    out = add_lora(act @ p["down"].astype(dt), p, "down", act, "bsm,mr->bsr", "bsr,re->bse")
    return out + p["down_bias"].astype(dt) if cfg.mlp_bias else out


def route(p: dict, h: jnp.ndarray, cfg: ModelConfig) -> jnp.ndarray:
    """Qwen3-MoE routing weights `[batch, seq, experts]`: softmax in f32 → top-k → optional renormalisation;
    zero outside each token's top-k."""
    logits = jnp.einsum("bse,ex->bsx", h, p["router"].astype(h.dtype)).astype(jnp.float32)
    probs = jax.nn.softmax(logits, axis=-1)
    top, idx = jax.lax.top_k(probs, cfg.num_experts_per_tok)  # [batch, seq, top_k]
    if cfg.norm_topk_prob:
        top = top / jnp.sum(top, axis=-1, keepdims=True)
    weights = jnp.sum(jax.nn.one_hot(idx, cfg.num_experts, dtype=jnp.float32) * top[..., None], axis=-2)
    return weights.astype(h.dtype)


def moe_mlp(p: dict, h: jnp.ndarray, cfg: ModelConfig) -> jnp.ndarray:
    """Sparse MoE block on `[batch, seq, embed]`.

    Every expert is evaluated densely and weighted by the routing (zero off the top-k): exact and simple,
    at `num_experts / top_k` times the FLOPs of a dispatching implementation.
    """
    dt = h.dtype
    weights = route(p, h, cfg)  # [batch, seq, experts]
    gate, up = (
        add_lora(jnp.einsum("bse,xem->bsxm", h, p[name].astype(dt)), p, name, h, "bse,xer->bsxr", "bsxr,xrm->bsxm")
        for name in ("gate", "up")
    )  # [batch, seq, experts, mlp]
    act = jax.nn.silu(gate) * up * weights[..., None]
    out = jnp.einsum("bsxm,xme->bse", act, p["down"].astype(dt))
    return add_lora(out, p, "down", act, "bsxm,xmr->bsxr", "bsxr,xre->bse")
