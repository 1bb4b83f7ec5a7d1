"""GSPO: one clipped importance ratio per sequence, checked against float64 numpy."""

import jax
import numpy as np
import pytest

from jaxseeker.losses import gspo_loss, policy_loss

HYPER = ("eps_low", "eps_high", "agg", "norm", "log_ratio_clamp")
loss_and_grad = jax.jit(jax.value_and_grad(gspo_loss, has_aux=True), static_argnames=HYPER)
loss_only = jax.jit(gspo_loss, static_argnames=HYPER)

# Three sequences (rows) of up to 4 tokens; the last token of row 1 and two of row 2 are masked out.
RNG = np.random.default_rng(0)
OLD = (RNG.normal(size=(3, 4)) * 0.3 - 1.0).astype(np.float32)
LOGP = (OLD + np.array([[0.3, 0.1, 0.2, 0.2], [-0.02, 0.01, 0.03, 5.0], [-0.4, -0.2, 9.0, 9.0]])).astype(np.float32)
MASK = np.array([[1, 1, 1, 1], [1, 1, 1, 0], [1, 1, 0, 0]], np.float32)
ADV = np.array([1.0, -0.5, -2.0], np.float32)
EPS = 0.1


def reference(logp=LOGP, old=OLD, mask=MASK, adv=ADV):
    """(loss, d loss / d logp) of GSPO (arXiv 2507.18071) in float64: s_i = exp(mean_t log r_it),
    loss = mean_i -min(s_i A_i, clip(s_i, 1 - eps, 1 + eps) A_i); the gradient per kept token is
    -A_i s_i / |y_i| / n where the clip is inactive, 0 where it is active."""
    logp, old, mask = (np.asarray(x, np.float64) for x in (logp, old, mask))
    n_tok = mask.sum(1)
    s = np.exp(((logp - old) * mask).sum(1) / n_tok)  # [seq]
    unclipped, clipped = -adv * s, -adv * np.clip(s, 1 - EPS, 1 + EPS)
    loss = np.maximum(unclipped, clipped).mean()
    active = clipped > unclipped  # the clip term is the max: no gradient
    grad = np.where(active, 0.0, -adv * s / n_tok)[:, None] * mask / len(adv)
    return loss, grad, s


def test_loss_and_gradient_match_the_sequence_level_objective():
    (loss, metrics), grad = loss_and_grad(LOGP, OLD, ADV, MASK, eps_low=EPS, eps_high=EPS)
    ref_loss, ref_grad, s = reference()
    assert s[0] > 1 + EPS and 1 - EPS < s[1] < 1 + EPS and s[2] < 1 - EPS  # one sequence in each regime
    np.testing.assert_allclose(loss, ref_loss, rtol=1e-6)
    np.testing.assert_allclose(grad, ref_grad, rtol=1e-5, atol=1e-7)
    assert grad[0].max() == 0.0 and grad[2].max() == 0.0 and np.abs(grad[1, :3]).min() > 0  # clips stop gradients
    np.testing.assert_allclose(metrics["ratio_mean"], s.mean(), rtol=1e-6)
    np.testing.assert_allclose(metrics["ratio_max"], s.max(), rtol=1e-6)
    np.testing.assert_allclose(metrics["clip_frac_high"], 4 / 9)  # sequence 0's four tokens, A > 0, s > 1 + eps
    np.testing.assert_allclose(metrics["clip_frac_low"], 2 / 9)  # sequence 2's two tokens, A < 0, s < 1 - eps


def test_packed_sequences_are_exact_with_segment_ids():
    """The three sequences packed into one row of 12 (segments 1, 2, 3) give the same loss and gradient."""
    segment_ids = np.repeat(np.array([[1, 2, 3]]), 4, axis=1)  # [1, 12]
    adv_tokens = np.repeat(ADV[:, None], 4, axis=1).reshape(1, 12)

    def pack(x):
        return x.reshape(1, 12)

    (loss, _), grad = loss_and_grad(
        pack(LOGP), pack(OLD), adv_tokens, pack(MASK), eps_low=EPS, eps_high=EPS, segment_ids=segment_ids
    )
    ref_loss, ref_grad, _ = reference()
    np.testing.assert_allclose(loss, ref_loss, rtol=1e-6)
    np.testing.assert_allclose(grad, pack(ref_grad), rtol=1e-5, atol=1e-7)
    blind, _ = loss_only(pack(LOGP), pack(OLD), adv_tokens, pack(MASK), eps_low=EPS, eps_high=EPS)  # one ratio per row
    assert abs(float(blind) - ref_loss) > 1e-2


def test_with_one_token_per_sequence_it_is_the_token_level_objective():
    """A sequence of one token has s_i = r_i: GSPO and the PPO surrogate agree, with the same clip range."""
    logp, old = LOGP[:, :1], OLD[:, :1]
    mask = np.ones((3, 1), np.float32)
    gspo, _ = loss_only(logp, old, ADV, mask, eps_low=EPS, eps_high=EPS)
    ppo, _ = jax.jit(policy_loss, static_argnames=HYPER)(
        logp, old, ADV, mask, eps_low=EPS, eps_high=EPS, agg="seq-mean-token-mean"
    )
    np.testing.assert_allclose(gspo, ppo, rtol=1e-6)


def test_values_at_masked_positions_change_nothing_and_the_log_ratio_is_clamped():
    other = np.where(MASK == 0, 200.0, LOGP)  # exp(200) overflows float32 if it leaks
    (a, _), grad_a = loss_and_grad(LOGP, OLD, ADV, MASK)
    (b, _), grad_b = loss_and_grad(other, OLD, ADV, MASK)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(grad_a, grad_b)
    huge = LOGP.copy()
    huge[0] += 100.0  # mean log-ratio of sequence 0 is 100.2: s_0 would overflow
    (loss, metrics), grad = loss_and_grad(huge, OLD, ADV, MASK)
    assert np.isfinite(loss) and np.all(np.isfinite(grad))
    np.testing.assert_allclose(metrics["log_ratio_clamp_frac"], 4 / 9)
    with pytest.raises(ValueError, match="log_ratio_clamp must be > 0"):
        gspo_loss(LOGP, OLD, ADV, MASK, log_ratio_clamp=-1.0)
