import jax
import jax.numpy as jnp
import numpy as np

from jaxseeker.losses import masked_count, masked_mean, masked_sum


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
