import jax.numpy as jnp
import numpy as np
import pytest

from jaxseeker.losses import (
    ADVANTAGES,
    POLICY_OBJECTIVES,
    get_advantage,
    get_policy_objective,
    group_advantages,
    gspo_loss,
    objective_aggregation,
    policy_loss,
)
from jaxseeker.losses.registry import packs_exactly, takes_segment_ids

USER_OBJECTIVE = '''
import jax.numpy as jnp

def reinforce(logp, old_logp, advantages, mask, **hyperparams):
    """Plain REINFORCE: -mean(A * logp) over policy tokens."""
    loss = -jnp.sum(advantages[:, None] * logp * mask) / jnp.sum(mask)
    return loss, {}
'''


USER_ADVANTAGE = '''
import jax.numpy as jnp

def best_of_group(rewards, group_size, *, bonus=1.0):
    """Only the best rollout of each question is reinforced."""
    grouped = rewards.reshape(-1, group_size)
    return (bonus * (grouped == grouped.max(axis=1, keepdims=True))).reshape(-1)
'''


def test_builtin_names_resolve():
    assert get_policy_objective("policy_loss") is policy_loss
    assert get_policy_objective("gspo") is gspo_loss and sorted(POLICY_OBJECTIVES) == ["gspo", "policy_loss"]
    assert get_advantage("grpo") is group_advantages
    assert sorted(ADVANTAGES) == ["dr_grpo", "grpo", "rloo"]


def test_a_users_function_is_named_by_module_path(tmp_path, monkeypatch):
    (tmp_path / "my_objectives.py").write_text(USER_OBJECTIVE)
    monkeypatch.syspath_prepend(str(tmp_path))
    objective = get_policy_objective("my_objectives:reinforce")
    loss, _ = objective(jnp.array([[-1.0, -2.0]]), None, jnp.array([2.0]), jnp.array([[1.0, 1.0]]))
    np.testing.assert_allclose(loss, 3.0)


def test_a_users_advantage_is_named_by_module_path(tmp_path, monkeypatch):
    (tmp_path / "my_advantages.py").write_text(USER_ADVANTAGE)
    monkeypatch.syspath_prepend(str(tmp_path))
    advantage = get_advantage("my_advantages:best_of_group")
    np.testing.assert_allclose(advantage(jnp.array([0.0, 1.0, 0.5, 0.2]), 2, bonus=2.0), [0.0, 2.0, 2.0, 0.0])


def test_unknown_names_give_errors_listing_what_is_known():
    with pytest.raises(ValueError, match="known names: gspo, policy_loss"):
        get_policy_objective("ppo")
    with pytest.raises(ValueError, match="cannot import module 'no_such_module'"):
        get_policy_objective("no_such_module:fn")
    with pytest.raises(ValueError, match="has no callable 'nope'"):
        get_policy_objective("jaxseeker.losses.policy:nope")
    with pytest.raises(ValueError, match="unknown advantage 'gae'; known names: dr_grpo, grpo, rloo"):
        get_advantage("gae")


def test_objectives_exact_on_packed_rows_take_segment_ids_or_are_marked_token_level():
    def gspo(logp, old_logp, advantages, mask, *, segment_ids=None, eps=3e-4):
        return 0.0, {}

    def row_mean(logp, old_logp, advantages, mask, *, eps=0.2):
        return 0.0, {}

    def token_mean(logp, old_logp, advantages, mask):
        return 0.0, {}

    token_mean.token_level = True
    assert takes_segment_ids(policy_loss) and packs_exactly(policy_loss)  # its seq-mean aggs reduce per segment
    assert takes_segment_ids(gspo) and packs_exactly(gspo)
    assert not takes_segment_ids(row_mean) and not packs_exactly(row_mean)
    assert not takes_segment_ids(token_mean) and packs_exactly(token_mean)
    assert takes_segment_ids(lambda logp, old_logp, advantages, mask, **hyperparams: (0.0, {}))


def test_the_aggregation_of_an_objective_comes_from_its_kwargs_its_defaults_or_token_mean():
    def reinforce(logp, old_logp, advantages, mask):
        return 0.0, {}

    assert objective_aggregation(policy_loss, {}) == ("token-mean", None)
    assert objective_aggregation(policy_loss, {"agg": "seq-mean-token-sum-norm", "norm": 8192}) == (
        "seq-mean-token-sum-norm",
        8192,
    )
    assert objective_aggregation(gspo_loss, {"eps_low": 1e-3}) == ("seq-mean-token-mean", None)
    assert objective_aggregation(reinforce, {}) == ("token-mean", None)
