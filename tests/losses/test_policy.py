import functools

import jax
import numpy as np
import pytest

from jaxseeker.losses import policy_loss

HYPER = ("eps_low", "eps_high", "agg", "norm", "clip_c", "negative_weight", "log_ratio_clamp")
AGGS = ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm"]
NORMS = {"seq-mean-token-sum-norm": 3.0}  # Dr. GRPO's L: the generation budget of these 3-token sequences
loss_and_grad = jax.jit(jax.value_and_grad(policy_loss, has_aux=True), static_argnames=HYPER)

# Two sequences of three tokens. log-ratios 0.5 / 0.1 / -0.5 give r = 1.6487 / 1.1052 / 0.6065.
OLD = np.zeros((2, 3), np.float32)
LOGP = np.array([[0.5, 0.1, -0.5], [0.5, -0.5, 0.1]], np.float32)
ADV = np.array([1.0, -1.0], np.float32)
MASK = np.array([[1, 1, 1], [1, 1, 0]], np.float32)  # the last token of sequence 1 is an observation
R = np.exp(LOGP)
# Hand-computed per-token losses -min(r A, clip(r, 0.8, 1.28) A):
#   seq 0, A=+1: r=1.6487 -> -1.28 (upper clip)   r=1.1052 -> -1.1052   r=0.6065 -> -0.6065 (no clip for A>0)
#   seq 1, A=-1: r=1.6487 -> +1.6487 (no clip)    r=0.6065 -> +0.8 (lower clip)
PER_TOKEN = np.array([[-1.28, -R[0, 1], -R[0, 2]], [R[1, 0], 0.8, 0.0]])


def test_token_mean_matches_hand_computed_values_and_metrics():
    (loss, metrics), grad = loss_and_grad(LOGP, OLD, ADV, MASK)
    np.testing.assert_allclose(loss, PER_TOKEN.sum() / 5, rtol=1e-6)
    np.testing.assert_allclose(metrics["clip_frac_high"], 1 / 5)
    np.testing.assert_allclose(metrics["clip_frac_low"], 1 / 5)
    np.testing.assert_allclose(metrics["ratio_max"], R[0, 0], rtol=1e-6)
    np.testing.assert_allclose(metrics["ratio_mean"], (R * MASK).sum() / 5, rtol=1e-6)
    log_r = LOGP * MASK
    np.testing.assert_allclose(metrics["approx_kl"], ((np.exp(log_r) - 1 - log_r) * MASK).sum() / 5, rtol=1e-5)
    # d/dlogp of -A r is -A r on unclipped tokens and 0 where a clip is active or the token is masked.
    expected_grad = np.array([[0.0, -R[0, 1], -R[0, 2]], [R[1, 0], 0.0, 0.0]]) / 5
    np.testing.assert_allclose(grad, expected_grad, rtol=1e-6)


def test_negative_weight_scales_the_tokens_of_negative_advantage():
    (loss, _), grad = loss_and_grad(LOGP, OLD, ADV, MASK, negative_weight=0.25)
    np.testing.assert_allclose(loss, (PER_TOKEN[0].sum() + 0.25 * PER_TOKEN[1].sum()) / 5, rtol=1e-6)
    _, full = loss_and_grad(LOGP, OLD, ADV, MASK)
    np.testing.assert_allclose(grad, full * np.array([[1.0], [0.25]]), rtol=1e-6)
    (_, _), positive_only = loss_and_grad(LOGP, OLD, ADV, MASK, negative_weight=0.0)  # PSR: failures teach nothing
    np.testing.assert_array_equal(positive_only[1], 0.0)


def test_sequence_aggregations():
    seq_sums = PER_TOKEN.sum(axis=1)
    loss, _ = policy_loss(LOGP, OLD, ADV, MASK, agg="seq-mean-token-mean")
    np.testing.assert_allclose(loss, np.mean([seq_sums[0] / 3, seq_sums[1] / 2]), rtol=1e-6)
    loss, _ = policy_loss(LOGP, OLD, ADV, MASK, agg="seq-mean-token-sum")
    np.testing.assert_allclose(loss, np.mean(seq_sums), rtol=1e-6)
    loss, _ = policy_loss(LOGP, OLD, ADV, MASK, agg="seq-mean-token-sum-norm", norm=4096.0)
    np.testing.assert_allclose(loss, np.mean(seq_sums / 4096.0), rtol=1e-6)  # divided by L, not the row length


@pytest.mark.parametrize("agg, denominator", [("token-mean", 5), ("seq-mean-token-mean", 2), ("seq-mean-token-sum", 2)])
def test_a_fixed_norm_replaces_the_count_of_every_aggregation(agg, denominator):
    """With `norm` the loss is the same numerator over a constant: it no longer depends on the batch's counts."""
    counted, _ = policy_loss(LOGP, OLD, ADV, MASK, agg=agg)
    fixed, _ = policy_loss(LOGP, OLD, ADV, MASK, agg=agg, norm=64.0)
    np.testing.assert_allclose(fixed, counted * denominator / 64.0, rtol=1e-6)


def test_dr_grpo_normaliser_does_not_depend_on_the_row_layout():
    """The same two episodes in rows of 256 and of 512 tokens give one loss: the padded row length is no normaliser
    (with it as L these gave 0.0396 and 0.0198)."""
    rng = np.random.default_rng(3)
    episodes = [rng.normal(scale=0.1, size=40), rng.normal(scale=0.1, size=120)]  # log-ratios, old log-probs 0
    adv = np.array([1.0, -0.5])
    values = []
    for width in (256, 512):
        logp, mask = np.zeros((2, width), np.float32), np.zeros((2, width), np.float32)
        for i, log_ratio in enumerate(episodes):
            logp[i, : len(log_ratio)], mask[i, : len(log_ratio)] = log_ratio, 1.0
        values.append(
            float(
                policy_loss(
                    logp, np.zeros_like(logp), adv.astype(np.float32), mask, agg="seq-mean-token-sum-norm", norm=4096.0
                )[0]
            )
        )
    # float64: the mean over the episodes of sum_t -min(r A, clip(r, 0.8, 1.28) A), over L = 4096
    r = [np.exp(log_ratio) for log_ratio in episodes]
    reference = np.mean([np.maximum(-a * ri, -a * np.clip(ri, 0.8, 1.28)).sum() / 4096.0 for a, ri in zip(adv, r)])
    np.testing.assert_allclose(values, [reference] * 2, rtol=1e-5)  # float32 sums of <= 120 terms: <= 120 * 2^-24
    with pytest.raises(ValueError, match="'seq-mean-token-sum-norm' needs `norm`"):
        policy_loss(LOGP, OLD, ADV, MASK, agg="seq-mean-token-sum-norm")


def test_a_huge_log_ratio_is_clamped_and_counted_not_an_infinite_loss():
    """log r = 100 on a token of negative advantage without dual clip: exp(100) overflows float32; the clamp at 20
    keeps the loss finite (-A e^20 on that token) and stops that token's gradient."""
    logp = np.array([[100.0, 0.1]], np.float32)
    old = np.zeros((1, 2), np.float32)
    adv, mask = np.array([-1.0], np.float32), np.ones((1, 2), np.float32)
    (loss, metrics), grad = loss_and_grad(logp, old, adv, mask)
    expected = (np.exp(np.float64(20.0)) + np.exp(np.float64(0.1))) / 2  # l = -A r with A = -1, no clip for A < 0
    np.testing.assert_allclose(loss, expected, rtol=1e-6)
    np.testing.assert_allclose(grad, [[0.0, np.exp(0.1) / 2]], rtol=1e-6)  # the clamped token gets no gradient
    np.testing.assert_allclose(metrics["log_ratio_clamp_frac"], 0.5)
    (loss, _), grad = loss_and_grad(logp, old, adv, mask, log_ratio_clamp=200.0)  # unclamped, as before the fix
    assert not np.isfinite(loss)


def test_sequence_without_policy_tokens_is_left_out_of_the_sequence_mean():
    mask = MASK.copy()
    mask[1] = 0
    loss, _ = policy_loss(LOGP, OLD, ADV, mask, agg="seq-mean-token-mean")
    np.testing.assert_allclose(loss, PER_TOKEN[0].sum() / 3, rtol=1e-6)


def test_dual_clip_bounds_the_loss_of_negative_advantages():
    (loss, metrics), _ = loss_and_grad(LOGP, OLD, ADV, MASK, clip_c=1.5)
    per_token = PER_TOKEN.copy()
    per_token[1, 0] = 1.5  # min(1.6487, 1.5 * |A|)
    np.testing.assert_allclose(loss, per_token.sum() / 5, rtol=1e-6)
    np.testing.assert_allclose(metrics["dual_clip_frac"], 1 / 5)


def test_per_token_advantages_broadcast_like_per_sequence_ones():
    per_seq, _ = policy_loss(LOGP, OLD, ADV, MASK)
    per_token, _ = policy_loss(LOGP, OLD, np.repeat(ADV[:, None], 3, axis=1), MASK)
    np.testing.assert_allclose(per_seq, per_token, rtol=1e-7)


@pytest.mark.parametrize("agg", AGGS)
def test_segment_ids_make_every_aggregation_exact_on_packed_rows(agg):
    """The two sequences in rows of 6 (padded), or packed into one row of 6 as segments 1 and 2."""

    def pad(x):  # [2, 3] -> [2, 6]
        return np.pad(x, ((0, 0), (0, 3)))

    def pack(x):  # [2, 3] -> [1, 6]: sequence 0, then sequence 1
        return x.reshape(1, 6)

    adv_tokens = np.repeat(ADV[:, None], 3, axis=1)  # [2, 3]: the RL step's per-token advantages
    segment_ids = np.array([[1, 1, 1, 2, 2, 2]], np.int32)
    norm = NORMS.get(agg)
    (loss, _), grad = loss_and_grad(pad(LOGP), pad(OLD), ADV, pad(MASK), agg=agg, norm=norm)
    (packed, _), packed_grad = loss_and_grad(
        pack(LOGP), pack(OLD), pack(adv_tokens), pack(MASK), agg=agg, norm=norm, segment_ids=segment_ids
    )
    np.testing.assert_allclose(packed, loss, rtol=1e-6)
    np.testing.assert_allclose(packed_grad, pack(grad[:, :3]), rtol=1e-6)
    blind, _ = policy_loss(
        pack(LOGP), pack(OLD), pack(adv_tokens), pack(MASK), agg=agg, norm=norm
    )  # the row as one sequence
    assert (abs(float(blind) - float(loss)) > 1e-3) == (agg != "token-mean")


@pytest.mark.parametrize("agg", AGGS)
def test_values_at_masked_positions_change_nothing(agg):
    other_logp = np.where(MASK == 0, 80.0, LOGP)  # exp(80) overflows float32 if it leaks
    other_old = np.where(MASK == 0, -3.0, OLD)
    norm = NORMS.get(agg)
    (loss_a, metrics_a), grad_a = loss_and_grad(LOGP, OLD, ADV, MASK, agg=agg, norm=norm, clip_c=3.0)
    (loss_b, metrics_b), grad_b = loss_and_grad(other_logp, other_old, ADV, MASK, agg=agg, norm=norm, clip_c=3.0)
    np.testing.assert_array_equal(loss_a, loss_b)
    np.testing.assert_array_equal(grad_a, grad_b)
    for key in metrics_a:
        np.testing.assert_array_equal(metrics_a[key], metrics_b[key])


def test_gradient_matches_central_differences_in_float64():
    with jax.enable_x64(True):
        rng = np.random.default_rng(0)
        old = rng.normal(size=(3, 4)) * 0.1
        logp = old + rng.normal(size=(3, 4)) * 0.1  # ratios near 1, away from the clip kinks
        adv = rng.normal(size=(3,))
        mask = (rng.uniform(size=(3, 4)) < 0.7).astype(np.float64)
        for agg in AGGS:
            fn = jax.jit(
                functools.partial(
                    lambda lp, agg: policy_loss(lp, old, adv, mask, agg=agg, norm=NORMS.get(agg))[0], agg=agg
                )
            )
            grad = np.asarray(jax.grad(fn)(logp))
            direction = rng.normal(size=logp.shape)
            step = 1e-6
            numeric = (fn(logp + step * direction) - fn(logp - step * direction)) / (2 * step)
            np.testing.assert_allclose(np.vdot(grad, direction), numeric, rtol=1e-6, atol=1e-10)


def test_bad_arguments_give_clear_errors():
    with pytest.raises(
        ValueError, match="allowed values: token-mean, seq-mean-token-mean, seq-mean-token-sum, seq-mean-token-sum-norm"
    ):
        policy_loss(LOGP, OLD, ADV, MASK, agg="sum")
    with pytest.raises(ValueError, match="norm must be > 0 or None, got 0"):
        policy_loss(LOGP, OLD, ADV, MASK, norm=0.0)
    with pytest.raises(ValueError, match="log_ratio_clamp must be > 0"):
        policy_loss(LOGP, OLD, ADV, MASK, log_ratio_clamp=0.0)
    with pytest.raises(ValueError, match="advantages has shape"):
        policy_loss(LOGP, OLD, np.zeros(5, np.float32), MASK)
    with pytest.raises(ValueError, match="clip_c must be > 1"):
        policy_loss(LOGP, OLD, ADV, MASK, clip_c=0.5)
    with pytest.raises(ValueError, match="negative_weight must be >= 0, got -1"):
        policy_loss(LOGP, OLD, ADV, MASK, negative_weight=-1.0)
    with pytest.raises(ValueError, match="must all be \\[batch, seq\\]"):
        policy_loss(LOGP, OLD[:1], ADV, MASK)
    with pytest.raises(ValueError, match="segment_ids has shape \\(1, 3\\), expected \\(2, 3\\)"):
        policy_loss(LOGP, OLD, ADV, MASK, segment_ids=np.ones((1, 3), np.int32))
