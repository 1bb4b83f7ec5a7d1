"""The RL update on episodes the real engine sampled: packed rows in micro-batches, episodes with A = 0 left out and
the engine's log-probs as old ones give the one-pass dense update's loss, gradients and new params."""

import dataclasses
import functools
import types

import jax
import numpy as np
import optax
import pytest

from jaxseeker import model
from jaxseeker.agent import Episode
from jaxseeker.generation import generate
from jaxseeker.parallel import DEFAULT_RULES, MeshConfig, make_mesh
from jaxseeker.train.checkpoint import Checkpointer
from jaxseeker.train.optimizer import OptimizerConfig, make_optimizer
from jaxseeker.train.rl.config import RLConfig
from jaxseeker.train.rl.midstep import finish_step, restore_mid_step, save_mid_step
from jaxseeker.train.rl.rows import episode_rows
from jaxseeker.train.rl.scoring import episode_advantages
from jaxseeker.train.rl.step import RLStepConfig, rl_loss
from jaxseeker.train.rl.update import UpdateStopped, row_length, update
from jaxseeker.train.state import create_train_state

CFG = model.ModelConfig.tiny(vocab_size=64)
TEMPERATURE = 0.8
CONTEXT = 64
EPS32 = 2.0**-24  # float32's unit roundoff
# Adam's epsilon at 1 makes its first step lr · g / (|g| + 1): within lr · |Δg| of another gradient's step.
OPT = OptimizerConfig(lr=1e-2, min_lr=1e-2, warmup_steps=0, total_steps=4, weight_decay=0.0, eps=1.0, clip_norm=None)
# rewards of 2 groups of 4: A = 0 exactly for the last two episodes of each (the group means)
REWARDS = np.array([[1.0, 0.0, 0.5, 0.5], [1.0, 0.0, 0.5, 0.5]])


@pytest.fixture(scope="module")
def sampled():
    """Initial params and 8 episodes the engine sampled from them at TEMPERATURE: a prompt (not trained), then
    sampled tokens with the engine's log-probs, cut to lengths from 3 to 24."""
    params = model.init_params(CFG, jax.random.key(0))
    rng = np.random.default_rng(1)
    prompts = [rng.integers(1, CFG.vocab_size, n).tolist() for n in rng.integers(4, 30, 8)]
    out = generate(params, CFG, prompts, max_new_tokens=24, temperature=TEMPERATURE, seed=2, slots=8)
    episodes = []
    for prompt, result, keep in zip(prompts, out, rng.integers(3, 25, 8)):
        tokens, logprobs = result.tokens[:keep], [float(x) for x in result.logprobs[:keep]]
        episodes.append(
            Episode(
                question="q",
                messages=[],
                token_ids=prompt + tokens,
                loss_mask=[0] * len(prompt) + [1] * len(tokens),
                logprobs=[0.0] * len(prompt) + logprobs,
                termination="answer",
            )
        )
    return params, episodes


def _run(**rl):
    """What `train.rl.update.update` reads of a run, on one CPU device."""
    config = RLConfig(batch_questions=2, group_size=4, **rl)
    step_cfg = RLStepConfig(
        objective_kwargs=dict(config.objective_kwargs), temperature=TEMPERATURE, chunk_size=8, kl_coef=config.kl_coef
    )
    mesh = make_mesh(MeshConfig(), jax.devices()[:1])
    return types.SimpleNamespace(
        rl=config, cfg=CFG, step_cfg=step_cfg, opt_cfg=OPT, mesh=mesh, rules=DEFAULT_RULES, lora=None, base=None,
        ref_params=None, kl_reward_coef=0.0,
    )  # fmt: skip


def _state(params, mesh):
    state, _ = create_train_state(lambda _: params, model.param_axes(CFG), make_optimizer(OPT), 0, mesh)
    return state


def _dense(params, episodes, run):
    """The reference: one padded row per episode, all of them in one pass, old log-probs the engine's; its loss and
    the params after one optimizer step."""
    advantages = episode_advantages(run.rl, REWARDS)
    seq = row_length(episodes, CONTEXT)
    ids, masks, logprobs = ([getattr(e, k) for e in episodes] for k in ("token_ids", "loss_mask", "logprobs"))
    rows = episode_rows(ids, masks, logprobs, advantages, seq)
    batch = {k: v for k, v in rows.items() if k != "episode"}
    loss_fn = functools.partial(rl_loss, cfg=CFG, step_cfg=run.step_cfg)
    (loss, _), grads = jax.jit(jax.value_and_grad(loss_fn, has_aux=True))(params, batch)
    optimizer = make_optimizer(OPT)
    updates, _ = optimizer.update(grads, optimizer.init(params), params)
    return float(loss), grads, optax.apply_updates(params, updates), int(rows["loss_mask"].sum())


def _assert_params_close(actual, expected, grads, n_terms):
    """New params within lr · (the gradients' float32 reduction-order bound: n_terms · 2^-24 · max |g|) per leaf."""
    for a, b, g in zip(jax.tree.leaves(actual), jax.tree.leaves(expected), jax.tree.leaves(grads), strict=True):
        a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
        tol = OPT.lr * n_terms * EPS32 * float(np.abs(np.asarray(g)).max()) + 4 * EPS32 * np.abs(b).max()
        np.testing.assert_allclose(a, b, rtol=0, atol=tol)


@pytest.mark.parametrize("agg", ["token-mean", "seq-mean-token-mean"])
def test_packed_micro_batches_without_zero_advantage_episodes_give_the_dense_update(sampled, agg):
    params, episodes = sampled
    run = _run(pack=True, update_tokens=CONTEXT, objective_kwargs={"agg": agg})  # one 64-token row per pass
    loss, grads, expected, tokens = _dense(params, episodes, run)
    state, metrics = update(run, _state(params, run.mesh), episodes, REWARDS, CONTEXT, step=0)
    assert metrics["dropped_episodes"] == 4 / 8  # A = 0: they never reach the update
    assert [len(episodes[i].token_ids) - 1 for i in (0, 1, 4, 5)] == [38, 37, 7, 23]
    assert metrics["micro_rows"] == 1 and metrics["update_rows"] == 2  # 38 + 23 and 37 + 7 tokens: 2 passes
    assert metrics["update_real_tokens"] == 38 + 23 + 37 + 7
    assert "logp_mismatch" not in metrics  # no old-log-prob forward: the engine's are the old ones
    # a sum of `tokens` terms A · r (r about 1): float32 sums in two orders differ by tokens · 2^-24 · max |A · r|
    max_term = 2 * np.abs(episode_advantages(run.rl, REWARDS)).max()
    assert abs(metrics["loss"] - loss) <= tokens * EPS32 * max_term
    _assert_params_close(state.params, expected, grads, n_terms=tokens * CFG.vocab_size)


def test_zero_advantage_episodes_stay_when_a_kl_term_acts_on_them(sampled):
    params, episodes = sampled
    run = _run(kl_coef=0.1)
    run.ref_params = params
    _, metrics = update(run, _state(params, run.mesh), episodes, REWARDS, CONTEXT, step=0)
    assert metrics["dropped_episodes"] == 0.0


def test_the_engines_log_probs_are_the_recomputed_ones_within_float32_rounding(sampled):
    """The engine (KV cache, its own kernels) and the training forward compute the same log-probs in another order:
    per token, each of the 2 layers' residual additions and the logit's dot products round at 2^-24 relative to
    values whose scale the logits bound, so |Δ log p| stays below (layers + 1) · (hidden + mlp + context) · 2^-24
    · (1 + max |logit|). The update with either then differs by the ratio's change, exp(Δ) - 1, on each token's
    A · r: the loss by at most max |A| · (exp(max Δ) - 1)."""
    params, episodes = sampled
    state = _state(params, make_mesh(MeshConfig(), jax.devices()[:1]))
    logits = np.asarray(model.forward(params, np.asarray([episodes[0].token_ids]), CFG))  # [1, seq, vocab]
    bound = (CFG.num_layers + 1) * (CFG.hidden_size + CFG.intermediate_size + CONTEXT) * EPS32
    bound *= 1 + np.abs(logits).max() / TEMPERATURE
    recomputed = _run(recompute_old_logp=True)
    state_r, m_r = update(recomputed, state, episodes, REWARDS, CONTEXT, step=0)
    assert 0 < m_r["logp_mismatch"] <= m_r["logp_mismatch_max"] <= bound
    engine = _run()
    _, m_e = update(engine, _state(params, engine.mesh), episodes, REWARDS, CONTEXT, step=0)
    assert "logp_mismatch" not in m_e and not engine.rl.recompute_old_logp
    max_advantage = np.abs(episode_advantages(engine.rl, REWARDS)).max()
    assert abs(m_e["loss"] - m_r["loss"]) <= max_advantage * np.expm1(m_r["logp_mismatch_max"]) + 1e-7
    assert m_r["ratio_mean"] == 1.0 and m_r["approx_kl"] == 0.0  # recomputed: exactly the update's forward
    assert abs(m_e["ratio_mean"] - 1.0) <= np.expm1(m_r["logp_mismatch_max"])


def test_recompute_is_required_where_the_trainer_and_the_engine_are_compared():
    with pytest.raises(ValueError, match="recompute_old_logp"):
        RLConfig(recompute_old_logp=False, tis_cap=2.0)
    assert RLConfig(tis_cap=2.0).recompute_old_logp and RLConfig(kl_reward_coef=0.1).recompute_old_logp
    assert not RLConfig().recompute_old_logp and RLConfig().pack  # the built-in objective packs exactly
    assert not dataclasses.replace(RLConfig(), pack=False).pack


def test_an_update_stopped_between_mini_batches_resumes_without_losing_or_repeating_one(sampled, tmp_path):
    """A stop after the 2nd of 4 mini-batches: the state and progress go through a real checkpoint (orbax, the
    progress files beside it), and the resumed update applies mini-batches 3 and 4 only: 4 optimizer steps in all,
    and the params and metrics of the update that was never stopped. The old log-probs are recomputed from the
    starting params, so the saved rows must carry them (recomputing after 2 steps would give others)."""
    params, episodes = sampled
    run = _run(mini_batches=4, recompute_old_logp=True)
    whole, expected = update(run, _state(params, run.mesh), episodes, REWARDS, CONTEXT, step=0)
    asked = []

    def stop() -> bool:  # the signal arrives during the 2nd mini-batch
        asked.append(True)
        return len(asked) == 2

    with pytest.raises(UpdateStopped) as stopped:
        update(run, _state(params, run.mesh), episodes, REWARDS, CONTEXT, step=0, stop=stop)
    assert stopped.value.progress.done == 2 and int(stopped.value.state.step) == 2
    stopped.value.progress.step_metrics = {"reward": 0.5, "update_episodes": 4.0}
    checkpointer = Checkpointer(tmp_path / "checkpoints", async_save=False)
    save_mid_step(checkpointer, stopped.value, 0, {"pool": [1]}, {"name": "toy"})
    assert restore_mid_step(Checkpointer(tmp_path / "other"), _state(params, run.mesh)) is None  # none saved there

    run.engine = types.SimpleNamespace(unload=lambda: None)
    restored, progress = restore_mid_step(checkpointer, _state(params, run.mesh))
    assert restored.step == 1 and restored.data_state == {"pool": [1]} and progress.done == 2
    state, metrics = finish_step(run, restored.state, progress)
    assert int(state.step) == int(whole.step) == 4
    for a, b in zip(jax.tree.leaves(state.params), jax.tree.leaves(whole.params), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert metrics["reward"] == 0.5 and metrics["update_episodes"] == 4.0
    for key in ("loss", "grad_norm", "update_rows", "logp_mismatch"):
        assert metrics[key] == expected[key], key
