import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxseeker.losses import (
    chunked_masked_nll,
    logprobs_from_logits,
    masked_nll,
    token_entropy,
    token_logprobs,
    token_logprobs_and_entropy,
)


def _log_softmax(z):
    z = z - z.max(-1, keepdims=True)
    return z - np.log(np.exp(z).sum(-1, keepdims=True))


def _problem(seed=0, batch=2, seq=10, embed=8, vocab=50):
    rng = np.random.default_rng(seed)
    hidden = rng.normal(size=(batch, seq, embed)).astype(np.float32)  # [batch, seq, embed]
    unembed = (rng.normal(size=(embed, vocab)) / np.sqrt(embed)).astype(np.float32)  # [embed, vocab]
    targets = rng.integers(0, vocab, size=(batch, seq)).astype(np.int32)  # [batch, seq]
    mask = (rng.uniform(size=(batch, seq)) < 0.6).astype(np.float32)  # [batch, seq]
    return hidden, unembed, targets, mask


def test_masked_nll_matches_hand_computed_numpy():
    logits = np.array([[[2.0, 0.0, -1.0], [0.5, 0.5, 0.5], [-1.0, 3.0, 0.0]]], dtype=np.float32)  # [1, 3, 3]
    targets = np.array([[0, 2, 2]])
    mask = np.array([[1, 0, 1]])  # the middle token is an observation
    loss, aux = jax.jit(masked_nll)(jnp.asarray(logits), jnp.asarray(targets), jnp.asarray(mask))
    logp = _log_softmax(logits)
    expected = -(logp[0, 0, 0] + logp[0, 2, 2]) / 2
    np.testing.assert_allclose(loss, expected, rtol=1e-6)
    assert float(aux["n_tokens"]) == 2.0
    np.testing.assert_allclose(aux["nll_sum"], 2 * expected, rtol=1e-6)
    assert float(aux["accuracy"]) == 0.5  # token 0 argmax is 0 (right), token 2 argmax is 1 (wrong)


def test_negative_weights_are_the_unlikelihood_loss():
    logits = np.array([[[2.0, 0.0, -1.0], [0.5, 0.5, 0.5], [-1.0, 3.0, 0.0]]], dtype=np.float32)  # [1, 3, 3]
    targets = np.array([[0, 2, 1]])
    weights = np.array([[1.0, 0.0, -0.5]])  # the last token is a repeat the policy should not write
    loss, aux = jax.jit(masked_nll)(jnp.asarray(logits), jnp.asarray(targets), jnp.asarray(weights))
    p = np.exp(_log_softmax(logits))
    expected = (-np.log(p[0, 0, 0]) - 0.5 * np.log(1 - p[0, 2, 1])) / 1.5
    np.testing.assert_allclose(loss, expected, rtol=1e-5)
    assert float(aux["n_tokens"]) == 1.5 and float(aux["accuracy"]) == 1.0  # accuracy over liked tokens only
    np.testing.assert_allclose(aux["rejected_p"], p[0, 2, 1], rtol=1e-6)
    grad = jax.jit(jax.grad(lambda z: masked_nll(z, jnp.asarray(targets), jnp.asarray(weights))[0]))(
        jnp.asarray(logits)
    )
    assert grad[0, 2, 1] > 0  # descending the loss lowers the rejected token's logit


def test_unlikelihood_stays_finite_and_pushes_when_the_rejected_token_is_near_certain():
    @jax.jit
    def loss(z):
        return masked_nll(z, jnp.array([[0]]), jnp.array([[-1.0]]))[0]

    grad = jax.jit(jax.grad(loss))
    near = jnp.array([[[9.0, 0.0]]])  # 1 - p(target 0) = 1.2e-4
    np.testing.assert_allclose(loss(near), -np.log(1e-6 + 1 / (1 + np.exp(9.0))), rtol=1e-3)
    assert grad(near)[0, 0, 0] > 0.5  # the exact gradient on the logit is p
    certain = jnp.array([[[60.0, 0.0]]])  # p rounds to 1 in float32: the loss is capped, nothing is nan
    assert np.isfinite(loss(certain)) and np.all(np.isfinite(grad(certain)))


def test_masked_nll_upcasts_bf16_logits():
    logits = jnp.array([[[10.0, 0.0]]], dtype=jnp.bfloat16)
    loss, _ = jax.jit(masked_nll)(logits, jnp.array([[1]]), jnp.array([[1]]))
    assert loss.dtype == jnp.float32
    np.testing.assert_allclose(loss, 10.0 + np.log1p(np.exp(-10.0)), rtol=1e-6)


def _full_nll(hidden, unembed, targets, mask):
    return masked_nll(jnp.einsum("bse,ev->bsv", hidden, unembed), targets, mask)


def _chunked_nll(hidden, unembed, targets, mask):
    return chunked_masked_nll(hidden, unembed, targets, mask, chunk_size=4)


_full_value_and_grad = jax.jit(jax.value_and_grad(_full_nll, argnums=(0, 1), has_aux=True))
_chunked_value_and_grad = jax.jit(jax.value_and_grad(_chunked_nll, argnums=(0, 1), has_aux=True))


@pytest.mark.parametrize("rejected", [False, True])
def test_chunked_nll_equals_full_nll_in_value_and_gradient(rejected):
    hidden, unembed, targets, mask = _problem()  # seq 10 is not a multiple of chunk_size 4
    if rejected:  # some tokens weighted for the unlikelihood loss
        mask = np.where(np.arange(mask.size).reshape(mask.shape) % 3 == 0, -0.5, mask).astype(np.float32)
    (full, full_aux), full_grads = _full_value_and_grad(hidden, unembed, targets, mask)
    (loss, aux), grads = _chunked_value_and_grad(hidden, unembed, targets, mask)
    np.testing.assert_allclose(loss, full, atol=1e-5)
    for key in ("n_tokens", "nll_sum", "accuracy", "rejected_p"):
        np.testing.assert_allclose(aux[key], full_aux[key], atol=1e-5)
    for g, g_full in zip(grads, full_grads):
        np.testing.assert_allclose(g, g_full, atol=1e-5)


def test_targets_at_masked_positions_change_nothing():
    hidden, unembed, targets, mask = _problem()
    other_targets = np.where(mask == 0, (targets + 7) % unembed.shape[1], targets)
    assert np.any(other_targets != targets)
    (loss_a, _), grads_a = _chunked_value_and_grad(hidden, unembed, targets, mask)
    (loss_b, _), grads_b = _chunked_value_and_grad(hidden, unembed, other_targets, mask)
    np.testing.assert_array_equal(loss_a, loss_b)
    for a, b in zip(grads_a, grads_b):
        np.testing.assert_allclose(a, b, atol=1e-7)


def test_untrained_positions_never_reach_the_unembedding():
    hidden, unembed, targets, _ = _problem(seed=5, batch=2, seq=8)
    mask = np.zeros((2, 8), np.float32)
    mask[0, [1, 6]], mask[1, [0, 7]] = 1, 1  # two trained tokens per row: once gathered, one chunk of 2
    clean = np.where(mask[..., None] > 0, hidden, 0.0).astype(np.float32)
    poisoned = np.where(mask[..., None] > 0, hidden, np.nan).astype(np.float32)
    grad = jax.jit(
        jax.value_and_grad(lambda h, w: chunked_masked_nll(h, w, targets, mask, chunk_size=2)[0], argnums=(0, 1))
    )
    loss, (g_hidden, g_unembed) = grad(poisoned, unembed)
    (full, _), full_grads = _full_value_and_grad(clean, unembed, targets, mask)
    np.testing.assert_allclose(loss, full, atol=1e-5)
    assert np.isfinite(np.asarray(g_unembed)).all()  # a product over all positions would spread the NaNs here
    np.testing.assert_allclose(g_unembed, full_grads[1], atol=1e-5)
    np.testing.assert_allclose(np.where(mask[..., None] > 0, g_hidden, 0.0), full_grads[0], atol=1e-5)


def test_a_batch_without_trained_tokens_has_zero_loss_and_gradients():
    hidden, unembed, targets, mask = _problem(seed=6)
    loss, grads = jax.jit(
        jax.value_and_grad(
            lambda h, w: chunked_masked_nll(h, w, targets, np.zeros_like(mask), chunk_size=4)[0], argnums=(0, 1)
        )
    )(hidden, unembed)
    assert float(loss) == 0.0
    assert all(float(jnp.abs(g).max()) == 0.0 for g in grads)


def test_chunked_nll_applies_the_soft_cap():
    hidden, unembed, targets, mask = _problem(seed=1)
    logits = np.einsum("bse,ev->bsv", 5.0 * hidden, unembed)
    expected, _ = jax.jit(masked_nll)(jnp.asarray(3.0 * np.tanh(logits / 3.0)), targets, mask)
    loss, _ = jax.jit(chunked_masked_nll, static_argnames=("chunk_size", "soft_cap"))(
        5.0 * hidden, unembed, targets, mask, chunk_size=3, soft_cap=3.0
    )
    np.testing.assert_allclose(loss, expected, atol=1e-5)


def test_chunked_nll_gradient_matches_central_differences_in_float64():
    with jax.enable_x64(True):
        hidden, unembed, targets, mask = _problem(seed=2, batch=1, seq=5, embed=3, vocab=7)
        params = (hidden.astype(np.float64), unembed.astype(np.float64))
        value_and_grad = jax.jit(
            jax.value_and_grad(lambda p: chunked_masked_nll(p[0], p[1], targets, mask, chunk_size=2)[0])
        )
        _, grads = value_and_grad(params)
        rng = np.random.default_rng(0)
        for _ in range(3):
            direction = tuple(rng.normal(size=p.shape) for p in params)
            step = 1e-5
            plus = value_and_grad(tuple(p + step * d for p, d in zip(params, direction)))[0]
            minus = value_and_grad(tuple(p - step * d for p, d in zip(params, direction)))[0]
            numeric = (plus - minus) / (2 * step)
            analytic = sum(np.vdot(g, d) for g, d in zip(grads, direction))
            np.testing.assert_allclose(analytic, numeric, rtol=1e-6, atol=1e-9)


def test_token_logprobs_and_entropy_match_full_logits_at_a_temperature():
    hidden, unembed, targets, _ = _problem(seed=4)
    logits = jnp.asarray(np.einsum("bse,ev->bsv", hidden, unembed) / 0.7)  # [batch, seq, vocab]
    static = ("chunk_size",)  # temperature may be traced
    logp, entropy = jax.jit(token_logprobs_and_entropy, static_argnames=static)(
        hidden, unembed, targets, chunk_size=3, temperature=0.7
    )
    np.testing.assert_allclose(logp, jax.jit(logprobs_from_logits)(logits, targets), atol=1e-5)
    np.testing.assert_allclose(entropy, jax.jit(token_entropy)(logits), atol=1e-5)
    only_logp = jax.jit(token_logprobs, static_argnames=static)(hidden, unembed, targets, chunk_size=3, temperature=0.7)
    np.testing.assert_allclose(only_logp, logp, atol=1e-6)
    assert logp.shape == targets.shape


def _temp_bytes(loss_fn, batch, seq, embed, vocab):
    """XLA's temporary-buffer size of the compiled gradient of `loss_fn` at these shapes."""
    args = (
        jax.ShapeDtypeStruct((batch, seq, embed), jnp.float32),
        jax.ShapeDtypeStruct((embed, vocab), jnp.float32),
        jax.ShapeDtypeStruct((batch, seq), jnp.int32),
        jax.ShapeDtypeStruct((batch, seq), jnp.float32),
    )
    grad = jax.jit(jax.grad(lambda h, w, t, m: loss_fn(h, w, t, m)[0], argnums=(0, 1)))
    return grad.lower(*args).compile().memory_analysis().temp_size_in_bytes


def test_chunked_gradient_never_materialises_full_logits():
    batch, embed, vocab, chunk = 2, 32, 2048, 64

    def chunked(h, w, t, m):
        return chunked_masked_nll(h, w, t, m, chunk_size=chunk)

    logits_bytes = batch * 2048 * vocab * 4
    # The full loss holds (at least) the [batch, seq, vocab] logits.
    assert _temp_bytes(_full_nll, batch, 2048, embed, vocab) >= logits_bytes
    chunked_temp = {seq: _temp_bytes(chunked, batch, seq, embed, vocab) for seq in (256, 2048)}
    # The chunked loss holds a few [batch, chunk, vocab] blocks whatever the sequence length.
    chunk_logits_bytes = batch * chunk * vocab * 4
    assert chunked_temp[2048] < 4 * chunk_logits_bytes + 8 * batch * 2048 * embed * 4
    assert chunked_temp[2048] < 1.5 * chunked_temp[256]
    # a small fraction of the full logits (the rest is a few [batch, seq, embed] arrays: the hidden states
    # sorted trained-first and their gradient; embed = vocab / 64 here)
    assert chunked_temp[2048] < logits_bytes / 6


def test_bad_shapes_name_the_argument():
    hidden, unembed, targets, mask = _problem()
    with pytest.raises(ValueError, match="loss_mask has shape"):
        chunked_masked_nll(hidden, unembed, targets, mask[:, :3])
    with pytest.raises(ValueError, match="unembed has shape"):
        chunked_masked_nll(hidden, unembed.T, targets, mask)
    with pytest.raises(ValueError, match="targets has shape"):
        masked_nll(jnp.zeros((2, 10, 5)), targets[:1], mask)
    with pytest.raises(ValueError, match="chunk_size"):
        token_logprobs(hidden, unembed, targets, chunk_size=0)


def test_float_mask_weights_tokens_in_both_nll_paths():
    hidden, unembed, targets, mask = _problem(seed=7)
    weights = np.where(mask > 0, 1.0, 0.25).astype(np.float32)  # agent tokens 1, the rest 0.25
    logits = np.einsum("bse,ev->bsv", hidden, unembed)
    logp = np.take_along_axis(jax.nn.log_softmax(logits, axis=-1), targets[..., None], axis=-1)[..., 0]
    expected = -(weights * logp).sum() / weights.sum()
    dense, aux = jax.jit(masked_nll)(logits, targets, weights)
    chunked, _ = jax.jit(chunked_masked_nll, static_argnames="chunk_size")(
        hidden, unembed, targets, weights, chunk_size=4
    )
    np.testing.assert_allclose([dense, chunked], [expected, expected], rtol=1e-5)
    np.testing.assert_allclose(aux["n_tokens"], weights.sum(), rtol=1e-6)


EPS32 = 2.0**-24  # float32's unit roundoff


@pytest.mark.parametrize("entropy", [False, True])
def test_token_logprobs_at_trained_positions_equal_the_dense_ones_in_value_and_gradient(entropy):
    """Built at the trained positions only (sorted first, chunks past the longest row's count skipped), the
    log-probs and entropies there, and the gradient of any masked sum of them, are the dense path's; elsewhere 0.
    Tolerance: a logit is a float32 dot product of `embed` terms, so two evaluation orders differ by at most
    embed · 2^-24 · Σ_e |h_e w_e|, and a log-prob (logit − logsumexp over the vocabulary, at most vocab more
    rounded terms) by twice that plus vocab · 2^-24."""
    hidden, unembed, targets, mask = _problem(seed=7, batch=3, seq=13)
    mask[2] = 0  # a row without any trained token
    weights = np.random.default_rng(8).normal(size=mask.shape).astype(np.float32)  # [batch, seq]
    fn = token_logprobs_and_entropy if entropy else token_logprobs

    def stats(h, w, m):
        out = fn(h, w, targets, chunk_size=4, temperature=0.7, loss_mask=m)
        return out if entropy else (out, out)

    def weighted(h, w, m):
        logp, ent = stats(h, w, m)
        return jnp.sum(jnp.where(mask != 0, weights * (logp + ent), 0.0))  # a masked loss of both

    dense = jax.jit(lambda h, w: stats(h, w, None))(hidden, unembed)
    sparse = jax.jit(lambda h, w: stats(h, w, mask))(hidden, unembed)
    embed, vocab = unembed.shape
    scale = np.abs(np.einsum("bse,ev->bsv", np.abs(hidden), np.abs(unembed))).max() / 0.7
    tol = 2 * embed * EPS32 * scale + vocab * EPS32
    for d, s in zip(dense, sparse):
        d, s = np.asarray(d), np.asarray(s)
        np.testing.assert_allclose(s[mask != 0], d[mask != 0], rtol=0, atol=2 * tol)
        assert (s[mask == 0] == 0).all()
    grad_sparse = jax.jit(jax.grad(lambda h, w: weighted(h, w, mask), argnums=(0, 1)))(hidden, unembed)
    grad_dense = jax.jit(jax.grad(lambda h, w: weighted(h, w, None), argnums=(0, 1)))(hidden, unembed)
    n_terms = mask.size * vocab  # the positions and vocabulary entries a gradient element sums over
    for a, b in zip(grad_sparse, grad_dense):
        a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
        np.testing.assert_allclose(a, b, rtol=0, atol=n_terms * EPS32 * np.abs(b).max())


def test_token_logprobs_never_build_logits_at_untrained_positions():
    """NaN hidden states at every untrained position reach neither the log-probs nor the unembedding's gradient:
    their logits are never built (two trained tokens per row, chunks of 2: one chunk, the rest skipped)."""
    hidden, unembed, targets, _ = _problem(seed=5, batch=2, seq=8)
    mask = np.zeros((2, 8), np.float32)
    mask[0, [1, 6]], mask[1, [0, 7]] = 1, 1
    poisoned = np.where(mask[..., None] > 0, hidden, np.nan).astype(np.float32)

    def loss(h, w):
        return jnp.sum(token_logprobs(h, w, targets, chunk_size=2, loss_mask=mask))

    value, g_unembed = jax.jit(jax.value_and_grad(loss, argnums=1))(poisoned, unembed)
    clean_value, clean_grad = jax.jit(jax.value_and_grad(loss, argnums=1))(hidden, unembed)
    assert np.isfinite(value) and np.isfinite(np.asarray(g_unembed)).all()
    np.testing.assert_allclose(value, clean_value, rtol=1e-6)
    np.testing.assert_allclose(g_unembed, clean_grad, rtol=1e-6, atol=1e-7)
