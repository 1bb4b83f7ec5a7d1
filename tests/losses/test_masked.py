import jax
import jax.numpy as jnp
import numpy as np

from jaxseeker.losses import masked_count, masked_mean, masked_sum
from jaxseeker.losses.masked import segment_count, segment_mean, segment_sum


def test_masked_sum_and_mean_keep_only_unmasked_entries():
    x = jnp.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    mask = jnp.array([[1, 0, 1], [0, 0, 1]])
    assert float(masked_sum(x, mask)) == 10.0
    assert float(masked_count(x, mask)) == 3.0
    np.testing.assert_allclose(masked_mean(x, mask), 10.0 / 3.0)
    np.testing.assert_allclose(masked_mean(x, mask, axis=-1), [2.0, 6.0])
    np.testing.assert_allclose(masked_sum(x, mask, axis=0), [1.0, 0.0, 9.0])


def test_masked_mean_of_nothing_is_zero_not_nan():
    x = jnp.array([[1.0, 2.0], [3.0, 4.0]])
    mask = jnp.array([[0, 0], [1, 0]])
    np.testing.assert_allclose(masked_mean(x, mask, axis=-1), [0.0, 3.0])


def test_non_finite_values_at_masked_positions_give_zero_value_and_gradient():
    mask = jnp.array([1.0, 1.0, 0.0])
    x = jnp.array([1.0, 2.0, jnp.inf])  # padding garbage sits under the mask
    value, grad = jax.value_and_grad(lambda x: masked_mean(x, mask))(x)
    np.testing.assert_allclose(value, 1.5)
    np.testing.assert_allclose(grad, [0.5, 0.5, 0.0])


def test_float_mask_broadcasts_over_trailing_axes():
    x = jnp.ones((2, 3))
    mask = jnp.array([[1.0], [0.0]])  # [batch, 1]
    assert float(masked_sum(x, mask)) == 3.0


def test_segment_reductions_give_one_slot_per_episode_of_a_packed_row():
    x = jnp.array([[1.0, 2.0, 3.0, 4.0, 5.0, 0.0], [6.0, 7.0, 8.0, 9.0, 0.0, 0.0]])
    mask = jnp.array([[0, 1, 1, 1, 1, 0], [1, 1, 0, 1, 0, 0]])
    segment_ids = jnp.array([[1, 1, 1, 2, 2, 0], [1, 1, 1, 1, 0, 0]])  # row 0: two episodes; row 1: one
    np.testing.assert_allclose(segment_sum(x, mask, segment_ids), [[5, 9, 0, 0, 0, 0], [22, 0, 0, 0, 0, 0]])
    np.testing.assert_allclose(segment_count(mask, segment_ids), [[2, 2, 0, 0, 0, 0], [3, 0, 0, 0, 0, 0]])
    np.testing.assert_allclose(segment_mean(x, mask, segment_ids), [[2.5, 4.5, 0, 0, 0, 0], [22 / 3, 0, 0, 0, 0, 0]])
    # None: each row is one segment, i.e. masked_sum / masked_mean over the row
    np.testing.assert_allclose(segment_sum(x, mask)[:, 0], masked_sum(x, mask, axis=-1))
    np.testing.assert_allclose(segment_mean(x, mask)[:, 0], masked_mean(x, mask, axis=-1))


def test_segment_mean_gradient_reaches_only_the_kept_tokens_of_each_segment():
    mask = jnp.array([[1, 1, 0, 1]])
    segment_ids = jnp.array([[1, 1, 2, 2]])
    x = jnp.array([[1.0, 2.0, jnp.inf, 4.0]])  # an observation's garbage under the mask
    weights = jnp.array([[10.0, 100.0, 0.0, 0.0]])  # segment 1 counts ×10, segment 2 ×100
    grad = jax.jit(jax.grad(lambda x: jnp.sum(weights * segment_mean(x, mask, segment_ids))))(x)
    np.testing.assert_allclose(grad, [[5.0, 5.0, 0.0, 100.0]])
