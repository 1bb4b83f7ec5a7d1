import jax.numpy as jnp
import numpy as np
import pytest

from jaxseeker.losses import get_policy_objective, policy_loss

USER_OBJECTIVE = '''
import jax.numpy as jnp

def reinforce(logp, old_logp, advantages, mask, **hyperparams):
    """Plain REINFORCE: -mean(A * logp) over policy tokens."""
    loss = -jnp.sum(advantages[:, None] * logp * mask) / jnp.sum(mask)
    return loss, {}
'''


def test_builtin_name_resolves():
    assert get_policy_objective("policy_loss") is policy_loss


def test_a_users_function_is_named_by_module_path(tmp_path, monkeypatch):
    (tmp_path / "my_objectives.py").write_text(USER_OBJECTIVE)
    monkeypatch.syspath_prepend(str(tmp_path))
    objective = get_policy_objective("my_objectives:reinforce")
    loss, _ = objective(jnp.array([[-1.0, -2.0]]), None, jnp.array([2.0]), jnp.array([[1.0, 1.0]]))
    np.testing.assert_allclose(loss, 3.0)


def test_unknown_names_give_errors_listing_what_is_known():
    with pytest.raises(ValueError, match="known names: policy_loss"):
        get_policy_objective("ppo")
    with pytest.raises(ValueError, match="cannot import module 'no_such_module'"):
        get_policy_objective("no_such_module:fn")
    with pytest.raises(ValueError, match="has no callable 'nope'"):
        get_policy_objective("jaxseeker.losses.policy:nope")
