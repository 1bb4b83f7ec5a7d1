"""The host-side corrections of the RL update: KL in the reward, its adaptive coefficient, truncated importance
sampling, overlong filtering and the micro-batch weights of gradient accumulation, against float64 numpy."""

import numpy as np
import pytest

from jaxseeker import losses
from jaxseeker.agent import Episode
from jaxseeker.train.rl import shaping

# Two rows: episodes 1 and 2 packed in row 0, episode 3 in row 1 (1 + index; 0 = padding).
EPISODE = np.array([[1, 1, 1, 2, 2, 0], [3, 3, 3, 3, 0, 0]])
MASK = np.array([[0, 1, 1, 0, 1, 0], [0, 1, 0, 1, 0, 0]])
RNG = np.random.default_rng(0)
OLD = RNG.normal(size=(2, 6)) - 1.0
REF = OLD + RNG.normal(scale=0.2, size=(2, 6))


def test_episode_sums_and_kl_in_the_reward():
    k1 = OLD - REF  # Schulman's k1 estimate of KL(π_old ‖ π_ref) per token
    sums, counts = shaping.episode_token_sums(k1, MASK, EPISODE, 4)
    expected = [k1[0, 1] + k1[0, 2], k1[0, 4], k1[1, 1] + k1[1, 3], 0.0]  # episode 4 has no row here
    np.testing.assert_allclose(sums, expected, rtol=1e-12)
    np.testing.assert_array_equal(counts, [2, 1, 2, 0])
    rewards = np.array([[1.0, 0.0], [0.5, 0.5]])
    np.testing.assert_allclose(
        shaping.kl_shaped_rewards(rewards, sums, 0.1), rewards - 0.1 * np.asarray(expected).reshape(2, 2), rtol=1e-12
    )
    per_token = np.asarray(losses.kl_per_token(OLD.astype(np.float32), REF.astype(np.float32), estimator="k1"))
    np.testing.assert_allclose(shaping.episode_token_sums(per_token, MASK, EPISODE, 4)[0], expected, rtol=1e-6)


def test_adaptive_kl_coefficient_follows_its_target_at_most_20_percent_per_horizon():
    # KL 50% above target: the error clips at +0.2; β grows by 0.2 · n / horizon
    assert shaping.adaptive_kl_coef(0.1, 0.15, target=0.1, horizon=1000, n_steps=64) == pytest.approx(
        0.1 * (1 + 0.2 * 64 / 1000)
    )
    assert shaping.adaptive_kl_coef(0.1, 0.095, target=0.1, horizon=1000, n_steps=64) == pytest.approx(
        0.1 * (1 - 0.05 * 64 / 1000)
    )
    assert shaping.adaptive_kl_coef(0.1, 0.0, target=0.1, horizon=64, n_steps=64) == pytest.approx(0.08)


def test_truncated_importance_weights_and_that_scaled_advantages_weigh_the_token_loss():
    """w_t = min(π_old / π_sampler, C) off the sampler's log-probs; A_t · w_t in the clipped objective is
    w_t · l_t (positive homogeneity), computed here in float64."""
    sampler = OLD + np.array([[0.0, -1.0, 0.3, 0.0, 0.01, 0.0], [0.0, 0.2, 0.0, -0.05, 0.0, 0.0]])
    weights, metrics = shaping.tis_weights(OLD, sampler, MASK, cap=2.0)
    keep = MASK != 0
    ratio = np.exp(OLD - sampler)
    np.testing.assert_allclose(weights[keep], np.minimum(ratio, 2.0)[keep], rtol=1e-12)
    np.testing.assert_array_equal(weights[~keep], 1.0)
    assert metrics["tis_clip_frac"] == pytest.approx(1 / 5)  # e^1 > 2 on one of five kept tokens
    assert metrics["tis_weight_mean"] == pytest.approx(np.minimum(ratio, 2.0)[keep].mean())

    logp = OLD + RNG.normal(scale=0.3, size=OLD.shape)
    adv = np.array([[0.7] * 6, [-1.2] * 6])
    loss, _ = losses.policy_loss(
        logp.astype(np.float32),
        OLD.astype(np.float32),
        (adv * weights).astype(np.float32),
        MASK.astype(np.float32),
        clip_c=3.0,
    )
    r = np.exp(logp - OLD)
    per_token = np.maximum(-adv * r, -adv * np.clip(r, 0.8, 1.28))
    per_token = np.where(adv < 0, np.minimum(per_token, -3.0 * adv), per_token)
    np.testing.assert_allclose(loss, (weights * per_token)[keep].sum() / keep.sum(), rtol=1e-5)


def test_overlong_episodes_are_those_cut_by_the_context_or_tool_call_limit():
    episodes = [
        Episode(question="q", messages=[], token_ids=[1], loss_mask=[1], logprobs=[0.0], termination=t)
        for t in ("answer", "max_context", "max_tool_calls", "format_error", "timeout")
    ]
    assert shaping.overlong_episodes(episodes).tolist() == [False, True, True, False, False]


def test_accumulated_micro_batches_weigh_by_their_share_of_the_updates_count():
    # two updates of two micro-batches: token counts 3 and 9, then 4 and 4
    assert shaping.loss_scales([3.0, 9.0, 4.0, 4.0], 2) == pytest.approx([0.5, 1.5, 1.0, 1.0])
    assert shaping.loss_scales([3.0, 9.0], 1) == [1.0, 1.0]  # no accumulation: each its own update
    assert shaping.loss_scales([None, None], 2) == [2.0, 2.0]  # a fixed norm: the mean of two needs x2
    assert shaping.loss_scales([0.0, 0.0], 2) == [0.0, 0.0]  # nothing to train on (all filtered)
    with pytest.raises(ValueError, match="3 mini-batches do not split into updates of grad_accum=2"):
        shaping.loss_scales([1.0, 2.0, 3.0], 2)
