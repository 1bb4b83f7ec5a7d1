import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxseeker.losses import group_advantages, leave_one_out_advantages, mean_centred_advantages


def test_grpo_advantages_are_group_zscores():
    rewards = jnp.array([1.0, 0.0, 0.0, 1.0, 0.5, 0.5, 0.5, 0.5])  # two groups of 4
    adv = group_advantages(rewards, 4)
    # group 1: mean 0.5, population std 0.5 -> +-1; group 2: all equal -> 0
    np.testing.assert_allclose(adv, [1, -1, -1, 1, 0, 0, 0, 0], atol=1e-5)


def test_hand_computed_group_of_three():
    rewards = jnp.array([0.0, 0.3, 0.9])
    mean = 0.4
    std = np.sqrt(((0.0 - mean) ** 2 + (0.3 - mean) ** 2 + (0.9 - mean) ** 2) / 3)
    expected = (np.array([0.0, 0.3, 0.9]) - mean) / (std + 1e-6)
    np.testing.assert_allclose(group_advantages(rewards, 3), expected, rtol=1e-5)


def test_without_std_it_is_dr_grpo_mean_centring():
    rewards = jnp.array([2.0, 0.0, 1.0, 1.0])
    np.testing.assert_allclose(group_advantages(rewards, 2, normalize_std=False), [1.0, -1.0, 0.0, 0.0])


def test_leave_one_out_baselines_each_rollout_on_the_others():
    rewards = jnp.array([1.0, 0.0, 0.0, 0.5, 1.0, 1.0])  # two groups of 3
    # rollout 0: 1 - mean(0, 0) = 1; rollout 3: 0.5 - mean(1, 1) = -0.5
    np.testing.assert_allclose(leave_one_out_advantages(rewards, 3), [1.0, -0.5, -0.5, -0.5, 0.25, 0.25], atol=1e-6)
    rng = np.random.default_rng(0)
    rewards = jnp.asarray(rng.uniform(size=12), jnp.float32)
    np.testing.assert_allclose(
        leave_one_out_advantages(rewards, 4), 4 / 3 * mean_centred_advantages(rewards, 4), rtol=1e-5, atol=1e-6
    )
    with pytest.raises(ValueError, match="need group_size >= 2"):
        leave_one_out_advantages(jnp.zeros(3), 1)


@pytest.mark.parametrize("fn", [group_advantages, mean_centred_advantages, leave_one_out_advantages])
@pytest.mark.parametrize("reward", [1.2, 0.2, 0.1, 1 / 3])
def test_a_group_of_equal_rewards_gets_exactly_zero_advantage_in_float32(fn, reward):
    """WebExplorer's reward 1.2 for a solved episode, G = 8: the float32 mean is one rounding step off 1.2, and
    (R - mean) / (std + 1e-6) gave every rollout A = +0.1065 (0.2, an all-wrong well-formatted group: -0.0147)."""
    rewards = jnp.full(8, reward, jnp.float32)
    np.testing.assert_array_equal(fn(rewards, 8), np.zeros(8))


def test_a_group_within_flat_tol_is_flat_and_a_group_beyond_it_is_not():
    rewards = jnp.array([1.0, 1.0 + 4e-7, 1.0, 1.0, 0.0, 1e-5, 0.0, 0.0])  # spreads 4e-7 and 1e-5
    adv = np.asarray(group_advantages(rewards, 4))
    np.testing.assert_array_equal(adv[:4], 0.0)
    second = np.float32([0.0, 1e-5, 0.0, 0.0]).astype(np.float64)
    reference = (second - second.mean()) / (second.std() + 1e-6)
    np.testing.assert_allclose(adv[4:], reference, rtol=1e-6)
    with pytest.raises(ValueError, match="flat_tol must be >= 0"):
        group_advantages(rewards, 4, flat_tol=-1.0)


def test_under_x64_the_group_statistics_are_float64():
    rng = np.random.default_rng(0)
    rewards = rng.uniform(size=16)
    grouped = rewards.reshape(2, 8)
    reference = ((grouped - grouped.mean(1, keepdims=True)) / (grouped.std(1, keepdims=True) + 1e-6)).reshape(-1)
    with jax.enable_x64(True):
        adv = group_advantages(jnp.asarray(rewards, jnp.float64), 8)
        assert adv.dtype == jnp.float64
        np.testing.assert_allclose(adv, reference, rtol=1e-12)


def test_jits_with_static_group_size():
    adv = jax.jit(group_advantages, static_argnums=1)(jnp.array([0.0, 1.0]), 2)
    np.testing.assert_allclose(adv, [-1.0, 1.0], atol=1e-5)


def test_bad_inputs_name_the_argument():
    with pytest.raises(ValueError, match="multiple of group_size=4"):
        group_advantages(jnp.zeros(6), 4)
    with pytest.raises(ValueError, match="rewards has shape"):
        group_advantages(jnp.zeros((2, 4)), 4)
    with pytest.raises(ValueError, match="group_size"):
        group_advantages(jnp.zeros(4), 0)
