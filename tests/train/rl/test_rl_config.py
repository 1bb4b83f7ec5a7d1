"""The `rl` section's checks: objectives that stay exact on packed rows, aggregation and correction keys, and what
RL requires of the `optimizer` and `sampling` sections."""

import pytest

from jaxseeker.generation import SamplingConfig
from jaxseeker.train.optimizer import lr_schedule
from jaxseeker.train.recipe import RecipeError
from jaxseeker.train.rl.config import RLConfig, check_rl_sampling, rl_optimizer_config

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


@pytest.mark.parametrize("agg", ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm"])
@pytest.mark.parametrize("objective", ["policy_loss", "gspo"])
def test_the_builtin_objectives_pack_with_every_aggregation(objective, agg):
    """They reduce per segment of the batch's segment ids, so their per-sequence aggregations are exact packed."""
    assert RLConfig(pack=True, objective=objective, objective_kwargs={"agg": agg, "norm": 8192}).pack


def test_dr_grpo_aggregation_without_its_normaliser_is_refused_when_the_recipe_is_read():
    with pytest.raises(ValueError, match="rl.objective_kwargs: agg 'seq-mean-token-sum-norm' needs `norm`"):
        RLConfig(objective_kwargs={"agg": "seq-mean-token-sum-norm"})
    with pytest.raises(ValueError, match="rl.objective_kwargs: unknown agg 'sum'"):
        RLConfig(objective_kwargs={"agg": "sum"})


@pytest.mark.parametrize(
    "key, value, message",
    [
        ("filter_metric", "format", "filter_metric 'format' is not one of \\['correct', 'reward'\\]"),
        ("kl_reward_estimator", "k4", "kl_reward_estimator 'k4' is not one of"),
        ("entropy_coef", -0.1, "entropy_coef must be >= 0"),
        ("kl_reward_target", -1.0, "kl_reward_target \\(-1.0\\) and kl_reward_horizon \\(10000\\) must be > 0"),
        ("tis_cap", 0.0, "tis_cap must be > 0 or null"),
    ],
)
def test_bad_correction_keys_name_the_key(key, value, message):
    with pytest.raises(ValueError, match=message):
        RLConfig(**{key: value})


def test_the_schedule_counts_optimizer_updates_not_micro_batches():
    """grad_accum mini-batches make one update: 10 steps of 4 mini-batches, 2 epochs, accumulated 2 by 2, are 40
    updates (the lr schedule used to run out after half of them were taken as 80)."""
    rl = RLConfig(steps=10, mini_batches=4, epochs=2)
    assert rl_optimizer_config(rl, {"grad_accum": 2}).total_steps == 40
    assert rl_optimizer_config(rl, None).total_steps == 80
    assert rl_optimizer_config(rl, {"total_steps": 7}).total_steps == 7  # the recipe's own value wins
    with pytest.raises(RecipeError, match="optimizer.grad_accum=3 must divide rl.mini_batches=4"):
        rl_optimizer_config(rl, {"grad_accum": 3})


def test_rl_optimizer_defaults_are_the_literatures_by_what_trains():
    """With no `optimizer` keys: full fine-tuning at a constant 1e-6, LoRA at 1e-5, no weight decay, a warm-up over
    the first tenth of the updates; the schedule's lr at each update says so (the SFT defaults were 1e-3, decay 0.1,
    no warm-up)."""
    rl = RLConfig(steps=30, mini_batches=2)  # 60 updates
    full, lora = rl_optimizer_config(rl, None), rl_optimizer_config(rl, {}, lora=True)
    for cfg, lr in ((full, 1e-6), (lora, 1e-5)):
        assert (cfg.lr, cfg.min_lr, cfg.weight_decay, cfg.warmup_steps, cfg.total_steps) == (lr, lr, 0.0, 6, 60)
        schedule = lr_schedule(cfg)
        assert [float(schedule(n)) for n in (0, 3, 6, 30, 59)] == pytest.approx([0.0, lr / 2, lr, lr, lr])
    assert rl_optimizer_config(RLConfig(steps=9), None).warmup_steps == 0  # its first update would have lr 0
    assert rl_optimizer_config(RLConfig(steps=19), None).warmup_steps == 1
    given = rl_optimizer_config(rl, {"lr": 3e-6, "warmup_steps": 0})
    assert (given.lr, given.min_lr, given.warmup_steps, given.weight_decay) == (3e-6, 3e-6, 0, 0.0)
    decayed = rl_optimizer_config(rl, {"lr": 3e-6, "min_lr": 1e-7, "weight_decay": 0.01}, lora=True)
    assert (decayed.lr, decayed.min_lr, decayed.weight_decay) == (3e-6, 1e-7, 0.01)


@pytest.mark.parametrize(
    "sampling", [SamplingConfig(temperature=1.0, top_p=0.9), SamplingConfig(temperature=1.0, top_k=20)]
)
def test_truncated_sampling_is_refused_since_old_log_probs_are_untruncated(sampling):
    with pytest.raises(RecipeError, match="RL computes old log-probs under the untruncated softmax"):
        check_rl_sampling(sampling)
    check_rl_sampling(SamplingConfig(temperature=0.7))  # temperature alone is on-policy


def test_segment_ids_come_from_the_batch_not_the_recipe():
    with pytest.raises(ValueError, match="rl.objective_kwargs.segment_ids: the RL step passes the batch's"):
        RLConfig(objective="packing_objectives:gspo", objective_kwargs={"segment_ids": [1, 1, 2]})


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"negative_weight": -0.5}, "negative_weight must be >= 0, got -0.5"),
        ({"eps_low": 1.2}, "need 0 <= eps_low < 1"),
        ({"clip_c": 0.5}, "clip_c must be > 1"),
    ],
)
def test_the_objectives_own_checks_run_when_the_recipe_is_read(kwargs, message):
    with pytest.raises(ValueError, match=f"rl.objective_kwargs: {message}"):
        RLConfig(objective_kwargs=kwargs)
