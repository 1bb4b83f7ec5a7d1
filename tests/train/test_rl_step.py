"""The RL update's rows and loss: only policy tokens enter any term (objective, KL, entropy) or the gradient."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxseeker import losses, model
from jaxseeker.losses.masked import segment_count, segment_mean
from jaxseeker.train.rl_step import RLStepConfig, episode_rows, packed_episode_rows, rl_loss

CFG = model.ModelConfig.tiny(vocab_size=64)
STEP = RLStepConfig(kl_coef=0.1, kl_estimator="k3", chunk_size=16, temperature=0.8)
SEQ = 24


def test_episode_rows_shift_targets_and_mask_by_one_token():
    ids, mask, logp = [5, 6, 7, 8, 9], [0, 0, 1, 1, 0], [0.0, 0.0, -0.5, -0.25, 0.0]
    rows = episode_rows([ids], [mask], [logp], [1.5], seq_len=6)
    assert rows["tokens"][0].tolist() == [5, 6, 7, 8, 0, 0]
    assert rows["targets"][0].tolist() == [6, 7, 8, 9, 0, 0]  # tokens[t] predicts ids[t + 1]
    assert rows["loss_mask"][0].tolist() == [0, 1, 1, 0, 0, 0]  # 1 where the target was sampled
    assert rows["old_logp"][0].tolist() == [0.0, -0.5, -0.25, 0.0, 0.0, 0.0]
    assert rows["segment_ids"][0].tolist() == [1, 1, 1, 1, 0, 0]
    assert rows["advantages"][0].tolist() == [1.5] * 4 + [0.0] * 2
    with pytest.raises(ValueError, match="sampled tokens past seq_len"):
        episode_rows([ids], [mask], [logp], [1.5], seq_len=2)


def _random_episodes(rng, layout):
    """(token ids, loss masks, log-probs) of episodes laid out as (prompt, turn, observation, turn) lengths."""
    ids, masks, logps = [], [], []
    for prompt, turn1, obs, turn2 in layout:
        n = prompt + turn1 + obs + turn2
        ids.append(rng.integers(0, CFG.vocab_size, n).tolist())
        masks.append([0] * prompt + [1] * turn1 + [0] * obs + [1] * turn2)
        logps.append((-rng.random(n)).tolist())
    return ids, masks, logps


def _episodes(rng):
    """Two episodes: prompt, a sampled turn, an observation, a second sampled turn (the second row is padded)."""
    ids, masks, logps = _random_episodes(rng, [(6, 5, 7, 5), (4, 3, 6, 2)])
    rows = episode_rows(ids, masks, logps, [1.0, -0.5], SEQ)
    rows["advantages"] = rng.normal(size=(2, SEQ)).astype(np.float32)  # per-token advantages are allowed too
    rows["ref_logp"] = (rows["old_logp"] - 0.3 * rng.random((2, SEQ))).astype(np.float32)
    return rows


@pytest.fixture(scope="module")
def loss_and_grad():
    loss_fn = functools.partial(rl_loss, cfg=CFG, step_cfg=STEP)
    return jax.jit(jax.value_and_grad(loss_fn, has_aux=True))


def test_observation_prompt_and_padding_tokens_enter_no_term_and_no_gradient(loss_and_grad):
    params = model.init_params(CFG, jax.random.key(0))
    rng = np.random.default_rng(0)
    batch = _episodes(rng)
    off = batch["loss_mask"] == 0  # prompt, observation and padding targets
    assert off.sum() > 20 and (~off).sum() == 15

    perturbed = {k: v.copy() for k, v in batch.items()}
    perturbed["targets"][off] = rng.integers(0, CFG.vocab_size, off.sum())
    for key, scale in (("old_logp", 50.0), ("ref_logp", 50.0), ("advantages", 100.0)):
        perturbed[key][off] = scale * rng.normal(size=off.sum())

    (loss, aux), grads = loss_and_grad(params, batch)
    (loss_p, aux_p), grads_p = loss_and_grad(params, perturbed)
    assert np.isfinite(loss) and loss != 0
    assert set(aux) >= {"kl", "entropy", "clip_frac_low", "clip_frac_high", "ratio_mean", "approx_kl"}
    np.testing.assert_allclose(loss_p, loss, rtol=1e-6)
    for key in aux:
        np.testing.assert_allclose(aux_p[key], aux[key], rtol=1e-6, atol=1e-7, err_msg=key)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-8), grads_p, grads)

    # The same perturbation on one policy token does change the loss: the check above can fail.
    on = np.argwhere(~off)[0]
    touched = {k: v.copy() for k, v in batch.items()}
    touched["old_logp"][tuple(on)] -= 1.0
    (loss_t, _), _ = loss_and_grad(params, touched)
    assert abs(float(loss_t) - float(loss)) > 1e-4


def test_packed_rows_hold_several_episodes_each_in_its_own_segment():
    ids = [[1, 2, 3, 4, 5], [6, 7, 8], [9, 10, 11, 12]]
    masks = [[0, 0, 1, 1, 1], [0, 1, 1], [0, 0, 1, 1]]
    logps = [[0.0, 0.0, -0.1, -0.2, -0.3], [0.0, -0.4, -0.5], [0.0, 0.0, -0.6, -0.7]]
    rows = packed_episode_rows(ids, masks, logps, [1.0, -1.0, 0.5], seq_len=7, row_multiple=4)
    assert rows["tokens"].shape == (4, 7)  # two rows used (4 + 3 | 2 tokens), rounded up to four
    assert rows["tokens"][0].tolist() == [1, 2, 3, 4, 9, 10, 11]  # longest first, then the next that fits
    assert rows["segment_ids"][0].tolist() == [1, 1, 1, 1, 2, 2, 2]
    assert rows["positions"][0].tolist() == [0, 1, 2, 3, 0, 1, 2]
    assert rows["targets"][0].tolist() == [2, 3, 4, 5, 10, 11, 12]  # no target crosses into the next episode
    assert rows["loss_mask"][0].tolist() == [0, 1, 1, 1, 0, 1, 1]
    assert rows["advantages"][0].tolist() == [1.0] * 4 + [0.5] * 3
    np.testing.assert_allclose(rows["old_logp"][1], [-0.4, -0.5, 0, 0, 0, 0, 0])
    assert rows["segment_ids"][1].tolist() == [1, 1, 0, 0, 0, 0, 0]
    assert not rows["segment_ids"][2:].any() and not rows["loss_mask"][2:].any()
    with pytest.raises(ValueError, match="row_multiple must be >= 1"):
        packed_episode_rows(ids, masks, logps, [1.0, -1.0, 0.5], seq_len=7, row_multiple=0)


def test_packed_rows_give_the_one_row_per_episode_loss_and_gradient(loss_and_grad):
    """With the token-mean objective (and KL, entropy), packing changes how rows are laid out, not what is computed."""
    params = model.init_params(CFG, jax.random.key(1))
    rng = np.random.default_rng(1)
    ids, masks, logps = _random_episodes(rng, [(6, 5, 7, 5), (4, 3, 6, 2), (3, 4, 0, 0), (5, 2, 3, 3)])
    advantages = [1.0, -0.5, 0.25, -1.5]
    single = episode_rows(ids, masks, logps, advantages, SEQ)
    packed = packed_episode_rows(ids, masks, logps, advantages, SEQ, row_multiple=1)
    assert packed["tokens"].shape == (3, SEQ) and packed["segment_ids"].max() == 2
    for rows in (single, packed):
        rows["ref_logp"] = np.where(rows["loss_mask"] != 0, rows["old_logp"] - 0.2, 0.0).astype(np.float32)
    (loss, aux), grads = loss_and_grad(params, single)
    (loss_p, aux_p), grads_p = loss_and_grad(params, packed)
    np.testing.assert_allclose(loss_p, loss, rtol=1e-5)
    for key in ("kl", "entropy", "ratio_mean", "approx_kl"):
        np.testing.assert_allclose(aux_p[key], aux[key], rtol=1e-5, atol=1e-7, err_msg=key)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6), grads_p, grads)

    # Without its segment ids the second episode of a packed row attends to the first: the loss moves.
    merged = dict(packed, segment_ids=(packed["segment_ids"] != 0).astype(np.int32))
    (loss_m, _), _ = loss_and_grad(params, merged)
    assert abs(float(loss_m) - float(loss)) > 1e-4


def sequence_clip(logp, old_logp, advantages, mask, *, segment_ids=None, eps=0.2):
    """A user's GSPO-style objective: one clipped ratio per episode, exp(mean_t log r_t), then a mean over episodes."""
    has_tokens = segment_count(mask, segment_ids) > 0  # [batch, segments]
    ratio = jnp.exp(segment_mean(logp - jax.lax.stop_gradient(old_logp), mask, segment_ids))  # [batch, segments]
    adv = segment_mean(advantages, mask, segment_ids)  # [batch, segments]
    per_seq = jnp.maximum(-adv * ratio, -adv * jnp.clip(ratio, 1 - eps, 1 + eps))  # [batch, segments]
    return losses.masked_mean(per_seq, has_tokens), {"ratio_mean": losses.masked_mean(ratio, has_tokens)}


def row_clip(logp, old_logp, advantages, mask, *, eps=0.2):
    """The same objective blind to segments: on a packed row it takes the row for one episode."""
    return sequence_clip(logp, old_logp, advantages, mask, eps=eps)


@pytest.mark.parametrize("objective, agg", [(sequence_clip, None), (losses.policy_loss, "seq-mean-token-mean"),
                                            (losses.policy_loss, "seq-mean-token-sum-norm")])
def test_sequence_level_objectives_that_take_segment_ids_are_exact_on_packed_rows(objective, agg):
    """rl_loss passes the batch's segment ids to an objective that declares them: each episode of a packed row is one
    sequence, so packing changes neither the loss nor the gradient."""
    step_cfg = RLStepConfig(chunk_size=16, objective_kwargs={"agg": agg} if agg else {})
    loss_and_grad = jax.jit(jax.value_and_grad(
        functools.partial(rl_loss, cfg=CFG, step_cfg=step_cfg, objective=objective), has_aux=True))
    params = model.init_params(CFG, jax.random.key(2))
    ids, masks, logps = _random_episodes(np.random.default_rng(2), [(6, 5, 7, 5), (4, 3, 6, 2), (3, 4, 0, 0)])
    advantages = [1.0, -0.5, 0.25]
    single = episode_rows(ids, masks, logps, advantages, SEQ)
    packed = packed_episode_rows(ids, masks, logps, advantages, SEQ)
    assert packed["tokens"].shape == (2, SEQ) and packed["segment_ids"].max() == 2
    (loss, _), grads = loss_and_grad(params, single)
    (loss_p, _), grads_p = loss_and_grad(params, packed)
    np.testing.assert_allclose(loss_p, loss, rtol=1e-5)
    assert max(float(np.abs(g).max()) for g in jax.tree.leaves(grads)) > 1e-4
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6), grads_p, grads)

    if objective is sequence_clip:  # the same objective blind to segments sees a row, not an episode
        blind = functools.partial(rl_loss, cfg=CFG, step_cfg=step_cfg, objective=row_clip)
        assert abs(float(jax.jit(blind)(params, packed)[0]) - float(loss)) > 1e-3


def test_an_objective_registered_anew_under_its_name_is_the_one_the_update_runs():
    """`make_rl_step` caches its compiled steps; the cache is keyed by the objective function, not its name, so
    editing a notebook's objective and registering it again under the same name takes effect."""
    from jaxseeker.parallel import MeshConfig, make_mesh
    from jaxseeker.train.optimizer import OptimizerConfig, make_optimizer
    from jaxseeker.train.rl_step import make_rl_step
    from jaxseeker.train.state import create_train_state

    def first(logp, old_logp, advantages, mask):
        return losses.policy_loss(logp, old_logp, advantages, mask)

    def edited(logp, old_logp, advantages, mask):
        loss, aux = losses.policy_loss(logp, old_logp, advantages, mask)
        return loss, {**aux, "edited": loss * 0 + 1}

    mesh, opt = make_mesh(MeshConfig(), jax.devices()[:1]), OptimizerConfig(lr=1e-3, warmup_steps=0, total_steps=4)
    rows = _episodes(np.random.default_rng(0))
    del rows["ref_logp"]
    try:
        losses.POLICY_OBJECTIVES["test_notebook_objective"] = first
        step_cfg = RLStepConfig(objective="test_notebook_objective", chunk_size=16)
        before = make_rl_step(CFG, step_cfg, opt, mesh=mesh, rows=2, seq=SEQ)
        assert make_rl_step(CFG, step_cfg, opt, mesh=mesh, rows=2, seq=SEQ) is before  # same function: cached
        losses.POLICY_OBJECTIVES["test_notebook_objective"] = edited
        after = make_rl_step(CFG, step_cfg, opt, mesh=mesh, rows=2, seq=SEQ)
        assert after is not before
        state, _ = create_train_state(functools.partial(model.init_params, CFG), model.param_axes(CFG),
                                      make_optimizer(opt), 0, mesh)
        _, metrics = after.update(state, jax.device_put(rows, after.batch_sharding))
        assert float(metrics["edited"]) == 1.0
    finally:
        del losses.POLICY_OBJECTIVES["test_notebook_objective"]
