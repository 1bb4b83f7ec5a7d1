"""`rl.pack` puts several episodes in a row: the recipe check accepts only objectives that stay exact there."""

import pytest

from jaxseeker.train.rl_config import RLConfig

PACKING_OBJECTIVES = '''
import jax.numpy as jnp

from jaxseeker import losses
from jaxseeker.losses.masked import segment_count, segment_mean


def row_gspo(logp, old_logp, advantages, mask, *, eps=3e-4):
    """A sequence-level ratio per row: on a packed row, several episodes share it."""
    ratio = jnp.exp(losses.masked_mean(logp - old_logp, mask, axis=-1))  # [batch]
    return -jnp.mean(jnp.clip(ratio, 1 - eps, 1 + eps) * losses.masked_mean(advantages, mask, axis=-1)), {}


def gspo(logp, old_logp, advantages, mask, *, segment_ids=None, eps=3e-4):
    """The same per episode: one ratio per segment."""
    ratio = jnp.exp(segment_mean(logp - old_logp, mask, segment_ids))  # [batch, segments]
    per_seq = jnp.clip(ratio, 1 - eps, 1 + eps) * segment_mean(advantages, mask, segment_ids)
    return -losses.masked_mean(per_seq, segment_count(mask, segment_ids) > 0), {}


def reinforce(logp, old_logp, advantages, mask):
    """-mean over policy tokens of A * logp: no per-sequence step at all."""
    return -losses.masked_mean(advantages * logp, mask), {}


reinforce.token_level = True
'''


@pytest.fixture(autouse=True)
def packing_objectives(tmp_path, monkeypatch):
    (tmp_path / "packing_objectives.py").write_text(PACKING_OBJECTIVES)
    monkeypatch.syspath_prepend(str(tmp_path))


def test_a_segment_blind_objective_is_refused_with_pack_naming_both_ways_out():
    with pytest.raises(ValueError) as err:
        RLConfig(pack=True, objective="packing_objectives:row_gspo", objective_kwargs={"eps": 1e-3})
    message = str(err.value)
    assert message.startswith("rl.objective 'packing_objectives:row_gspo' takes no `segment_ids`")
    assert "add a `segment_ids` keyword parameter" in message and "set rl.pack: false" in message
    assert RLConfig(pack=False, objective="packing_objectives:row_gspo").objective == "packing_objectives:row_gspo"


def test_objectives_that_take_segment_ids_or_are_token_level_may_pack():
    assert RLConfig(pack=True, objective="packing_objectives:gspo", objective_kwargs={"eps": 1e-3}).pack
    assert RLConfig(pack=True, objective="packing_objectives:reinforce").pack


@pytest.mark.parametrize("agg", ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm"])
def test_the_builtin_policy_loss_packs_with_every_aggregation(agg):
    """It reduces per segment of the batch's segment ids, so its per-sequence aggregations are exact packed."""
    assert RLConfig(pack=True, objective_kwargs={"agg": agg}).pack


def test_segment_ids_come_from_the_batch_not_the_recipe():
    with pytest.raises(ValueError, match="rl.objective_kwargs.segment_ids: the RL step passes the batch's"):
        RLConfig(objective="packing_objectives:gspo", objective_kwargs={"segment_ids": [1, 1, 2]})
