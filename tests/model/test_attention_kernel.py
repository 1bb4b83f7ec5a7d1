"""`forward(..., attention_kernel=f)`: every layer calls `f(q, k, v, segment_ids)` instead of its own attention (how a
training step runs splash blockwise over a mesh)."""

import jax
import jax.numpy as jnp
import numpy as np

from jaxseeker import model
from jaxseeker.model.layers import attention_mask, dot_attention

CFG = model.ModelConfig.tiny(vocab_size=64)
BATCH, SEQ = 2, 16


def packed_row_inputs() -> tuple[jnp.ndarray, jnp.ndarray]:
    """Tokens `[batch, seq]` and segment ids: row 0 two documents then padding, row 1 one document."""
    tokens = jnp.asarray(np.random.default_rng(0).integers(1, CFG.vocab_size, (BATCH, SEQ)), jnp.int32)
    segment_ids = np.zeros((BATCH, SEQ), np.int32)
    segment_ids[0, :6], segment_ids[0, 6:13], segment_ids[1, :] = 1, 2, 1
    return tokens, jnp.asarray(segment_ids)


def reference_kernel(calls: list):
    """The model's XLA attention as a kernel; appends the q shape it is traced with to `calls`."""

    def kernel(q, k, v, segment_ids):  # q [batch, seq, heads, head_dim], k/v [batch, seq, kv_heads, head_dim]
        calls.append(q.shape)
        q_index = jnp.broadcast_to(jnp.arange(q.shape[1])[None, :], segment_ids.shape)
        return dot_attention(q, k, v, attention_mask(q_index, segment_ids, segment_ids), "xla")

    return kernel


def zero_kernel(q, k, v, segment_ids):
    """Attention that attends to nothing: every layer's attention output is 0."""
    return jnp.zeros_like(q)


PARAMS = model.init_params(CFG, jax.random.PRNGKey(0))


def test_a_kernel_equal_to_the_models_attention_gives_the_same_logits():
    tokens, segment_ids = packed_row_inputs()
    calls = []
    want = model.forward(PARAMS, tokens, CFG, segment_ids=segment_ids)  # [batch, seq, vocab]
    got = model.forward(PARAMS, tokens, CFG, segment_ids=segment_ids, attention_kernel=reference_kernel(calls))
    assert calls == [(BATCH, SEQ, CFG.num_heads, CFG.head_dim)]  # traced once: the layers are a scan
    real = np.asarray(segment_ids != 0)
    np.testing.assert_allclose(np.asarray(got)[real], np.asarray(want)[real], atol=1e-6, rtol=1e-6)


def test_the_kernel_replaces_the_attention():
    tokens, segment_ids = packed_row_inputs()
    want = model.forward(PARAMS, tokens, CFG, segment_ids=segment_ids)
    got = model.forward(PARAMS, tokens, CFG, segment_ids=segment_ids, attention_kernel=zero_kernel)
    assert float(jnp.max(jnp.abs(got - want))) > 1e-2
    hidden = model.hidden_states(PARAMS, tokens, CFG, segment_ids=segment_ids, attention_kernel=zero_kernel)
    np.testing.assert_allclose(got, jnp.einsum("bse,ev->bsv", hidden, model.unembed(PARAMS, CFG)), atol=1e-5)
