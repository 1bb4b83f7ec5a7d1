"""Every selectable attention implementation against the XLA reference: causal, packed segments, GQA, f32."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxseeker import model
from jaxseeker.model.config import ATTENTION_IMPLS
from jaxseeker.model.layers import attention_mask, dot_attention

TOL = 1e-5
BATCH, SEQ, HEADS, KV_HEADS, HEAD_DIM = 2, 128, 4, 2, 32  # splash tiles are 128 tokens


def packed_segments() -> np.ndarray:
    """Row 0: two documents then right padding (segment 0); row 1: three documents filling the row."""
    seg = np.zeros((BATCH, SEQ), np.int32)
    seg[0, :50], seg[0, 50:101] = 1, 2
    seg[1, :30], seg[1, 30:90], seg[1, 90:] = 1, 2, 3
    return seg


def qkv(seed: int = 0) -> tuple[jnp.ndarray, jnp.ndarray, jnp.ndarray]:
    """Random queries `[batch, seq, heads, head_dim]` and keys / values `[batch, seq, kv_heads, head_dim]`."""
    rng = np.random.default_rng(seed)
    q = rng.normal(size=(BATCH, SEQ, HEADS, HEAD_DIM))
    k, v = (rng.normal(size=(BATCH, SEQ, KV_HEADS, HEAD_DIM)) for _ in range(2))
    return tuple(jnp.asarray(x, jnp.float32) for x in (q, k, v))


@pytest.fixture(autouse=True)
def interpret_splash(monkeypatch):
    """Splash off TPU runs the Pallas TPU kernel interpreted, which `model.backend` allows only on request."""
    monkeypatch.setenv("JAXSEEKER_INTERPRET_KERNELS", "1")


def run(impl: str, q, k, v, seg) -> jnp.ndarray:
    """`dot_attention` with the mask (and segment ids) the uncached forward pass builds."""
    mask = attention_mask(jnp.broadcast_to(jnp.arange(SEQ), (BATCH, SEQ)), seg, seg)  # [batch, q, k]
    return dot_attention(q, k, v, mask, impl, segment_ids=seg)


def skip_unless_runs_here(impl: str) -> None:
    """Skip (with the reason) an implementation this backend cannot run."""
    if impl == "cudnn" and jax.default_backend() != "gpu":
        pytest.skip(f"cudnn flash attention needs a CUDA GPU; the backend here is {jax.default_backend()}")


@pytest.mark.parametrize("impl", [i for i in ATTENTION_IMPLS if i != "xla"])
def test_impl_matches_reference_on_real_tokens(impl):
    skip_unless_runs_here(impl)
    # cuDNN flash attention takes bf16 / fp16 only: compare it with the f32 reference on the same rounded inputs
    dtype, tol = (jnp.bfloat16, 2e-2) if impl == "cudnn" else (jnp.float32, TOL)
    q, k, v = (x.astype(dtype) for x in qkv())
    seg = jnp.asarray(packed_segments())
    ref = jax.jit(run, static_argnums=0)("xla", *(x.astype(jnp.float32) for x in (q, k, v)), seg)
    out = jax.jit(run, static_argnums=0)(impl, q, k, v, seg).astype(jnp.float32)
    real = np.asarray(seg != 0)  # padding queries attend to nothing: their rows are arbitrary
    assert out.shape == (BATCH, SEQ, HEADS, HEAD_DIM)
    np.testing.assert_allclose(np.asarray(out)[real], np.asarray(ref)[real], atol=tol, rtol=tol)
    # the masks matter: a query at the start of a segment sees only itself (its own value vector)
    group = HEADS // KV_HEADS
    np.testing.assert_allclose(out[0, 50], np.repeat(v[0, 50].astype(jnp.float32), group, axis=0), atol=tol)


@pytest.mark.parametrize("impl", ["splash", "blocked"])
def test_kernel_gradients_match_reference(impl):
    q, k, v = qkv(seed=1)
    seg = jnp.asarray(packed_segments())
    real = (seg != 0)[:, :, None, None]

    def loss(impl, q, k, v):
        return jnp.sum(jnp.where(real, run(impl, q, k, v, seg), 0.0) * v.repeat(HEADS // KV_HEADS, axis=2))

    grads = {
        name: jax.jit(jax.grad(loss, argnums=(1, 2, 3)), static_argnums=0)(name, q, k, v) for name in ("xla", impl)
    }
    for name, ref, got in zip("qkv", grads["xla"], grads[impl]):
        scale = float(jnp.max(jnp.abs(ref)))
        assert scale > 0.1, name
        np.testing.assert_allclose(got, ref, atol=TOL * scale, err_msg=f"d loss / d {name}")


def test_splash_needs_tile_multiple_and_cache_paths_use_the_reference():
    q, k, v = (x[:, :100] for x in qkv())
    seg = jnp.ones((BATCH, 100), jnp.int32)
    mask = attention_mask(jnp.broadcast_to(jnp.arange(100), (BATCH, 100)), seg, seg)
    with pytest.raises(ValueError, match="multiple of 128, got 100"):
        dot_attention(q, k, v, mask, "splash", segment_ids=seg)
    for impl in ("splash", "blocked"):
        np.testing.assert_array_equal(dot_attention(q, k, v, mask, impl), dot_attention(q, k, v, mask, "xla"))


@pytest.mark.parametrize("impl", ["jax_xla", "blocked"])
def test_model_forward_matches_reference(impl):
    cfg = model.ModelConfig.tiny("qwen3")
    params = model.init_params(cfg, jax.random.key(0))
    tokens = jnp.asarray(np.random.default_rng(2).integers(0, cfg.vocab_size, (BATCH, 24)))
    seg = jnp.asarray(np.repeat([[1] * 10 + [2] * 10 + [0] * 4], BATCH, axis=0))
    forward = jax.jit(model.forward, static_argnums=2)
    ref = forward(params, tokens, cfg, segment_ids=seg)
    out = forward(params, tokens, cfg.replace(attention_impl=impl), segment_ids=seg)
    real = np.asarray(seg != 0)
    np.testing.assert_allclose(np.asarray(out)[real], np.asarray(ref)[real], atol=1e-4, rtol=1e-4)


def test_unknown_impl_names_the_choices():
    with pytest.raises(model.ConfigError, match="attention_impl: 'flash' is not one of"):
        model.ModelConfig.tiny(attention_impl="flash")
