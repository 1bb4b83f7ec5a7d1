import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxseeker.losses import entropy_from_logits, kl_penalty, token_entropy

LOGP = np.array([[-1.0, -2.0, -0.5]], np.float32)
REF = np.array([[-1.5, -1.0, -0.5]], np.float32)
MASK = np.array([[1, 1, 0]], np.float32)
D = (REF - LOGP)[0, :2]  # log(pi_ref / pi) on the two kept tokens: -0.5, +1.0


@pytest.mark.parametrize(
    "estimator, per_token",
    [("k1", -D), ("k2", 0.5 * D**2), ("k3", np.exp(D) - 1 - D)],
)
def test_kl_estimators_match_hand_computed_values(estimator, per_token):
    kl, metrics = kl_penalty(LOGP, REF, MASK, estimator=estimator)
    np.testing.assert_allclose(kl, per_token.mean(), rtol=1e-6)
    np.testing.assert_allclose(metrics["kl"], kl)


def test_kl_is_reduced_with_the_policy_losss_aggregation():
    """Two sequences of 3 and 1 kept tokens, packed in one row as segments 1 and 2: token-mean weighs every token
    alike; seq-mean-token-mean averages the two sequences' means; seq-mean-token-sum-norm their sums over L."""
    rng = np.random.default_rng(0)
    logp = rng.normal(size=(1, 5)).astype(np.float32) - 2.0
    ref = rng.normal(size=(1, 5)).astype(np.float32) - 2.0
    mask = np.array([[1, 1, 1, 1, 0]], np.float32)
    segment_ids = np.array([[1, 1, 1, 2, 0]], np.int32)
    d = ref[0, :4].astype(np.float64) - logp[0, :4]
    k3 = np.exp(d) - 1 - d
    expected = {
        "token-mean": k3.mean(),
        "seq-mean-token-mean": (k3[:3].mean() + k3[3]) / 2,
        "seq-mean-token-sum-norm": (k3[:3].sum() + k3[3]) / 2 / 100.0,
    }
    for agg, value in expected.items():
        kl, _ = kl_penalty(
            logp, ref, mask, agg=agg, norm=100.0 if agg.endswith("norm") else None, segment_ids=segment_ids
        )
        np.testing.assert_allclose(kl, value, rtol=1e-6, err_msg=agg)


def test_k3_gradient_flows_to_logp_only_on_kept_tokens():
    grad = jax.grad(lambda lp: kl_penalty(lp, REF, MASK)[0])(LOGP)
    # d/dlogp [exp(ref - logp) - 1 - (ref - logp)] = 1 - exp(ref - logp)
    np.testing.assert_allclose(grad[0], [(1 - np.exp(D[0])) / 2, (1 - np.exp(D[1])) / 2, 0.0], rtol=1e-6)


def test_masked_positions_change_nothing_even_when_extreme():
    other = np.where(MASK == 0, -200.0, LOGP)  # exp(ref - logp) would overflow
    value_a, grad_a = jax.value_and_grad(lambda lp: kl_penalty(lp, REF, MASK)[0])(LOGP)
    value_b, grad_b = jax.value_and_grad(lambda lp: kl_penalty(lp, REF, MASK)[0])(other)
    np.testing.assert_array_equal(value_a, value_b)
    np.testing.assert_array_equal(grad_a, grad_b)


def test_unknown_estimator_lists_the_known_ones():
    with pytest.raises(ValueError, match="allowed values: k1, k2, k3"):
        kl_penalty(LOGP, REF, MASK, estimator="k4")


def test_entropy_of_uniform_and_peaked_distributions():
    logits = jnp.array([[[0.0, 0.0, 0.0, 0.0], [100.0, 0.0, 0.0, 0.0]]])  # [1, 2, 4]
    np.testing.assert_allclose(token_entropy(logits)[0], [np.log(4.0), 0.0], atol=1e-6)
    np.testing.assert_allclose(entropy_from_logits(logits, jnp.array([[1, 0]])), np.log(4.0), rtol=1e-6)
    np.testing.assert_allclose(entropy_from_logits(logits, jnp.array([[1, 1]])), np.log(4.0) / 2, rtol=1e-6)
