"""The RL update's rows and loss: only policy tokens enter any term (objective, KL, entropy) or the gradient."""

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxseeker import losses, model
from jaxseeker.losses.masked import segment_count, segment_mean
from jaxseeker.train.rl.rows import episode_rows, packed_episode_rows
from jaxseeker.train.rl.shaping import loss_scales
from jaxseeker.train.rl.step import RLStepConfig, rl_loss

pytestmark = pytest.mark.heavy  # a minute or more of CPU: runs first (tests/conftest.py)

CFG = model.ModelConfig.tiny(vocab_size=64)
STEP = RLStepConfig(kl_coef=0.1, kl_estimator="k3", chunk_size=16, temperature=0.8)
SEQ = 24
EPS32 = 2.0**-24  # float32's unit roundoff


def assert_gradients_close(actual, expected, n_terms: int):
    """The same gradients reduced in another order: float32 sums of at most `n_terms` terms (the batch's positions)
    differ by at most n_terms · 2^-24 relative to the terms' scale, taken as the leaf's largest element."""
    for a, b in zip(jax.tree.leaves(actual), jax.tree.leaves(expected), strict=True):
        a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
        np.testing.assert_allclose(a, b, rtol=0, atol=n_terms * EPS32 * np.abs(b).max())


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
    assert_gradients_close(grads_p, grads, n_terms=single["tokens"].size)

    # Without its segment ids the second episode of a packed row attends to the first: the loss moves.
    merged = dict(packed, segment_ids=(packed["segment_ids"] != 0).astype(np.int32))
    (loss_m, _), _ = loss_and_grad(params, merged)
    assert abs(float(loss_m) - float(loss)) > 1e-4


def _numpy_terms(params, rows, temperature):
    """float64 log π(target) and entropy per position `[rows, seq]`, from the model's full logits."""
    logits = (
        np.asarray(
            model.forward(params, rows["tokens"], CFG, positions=rows["positions"], segment_ids=rows["segment_ids"]),
            np.float64,
        )
        / temperature
    )
    log_probs = logits - logits.max(-1, keepdims=True)
    log_probs -= np.log(np.exp(log_probs).sum(-1, keepdims=True))
    logp = np.take_along_axis(log_probs, rows["targets"][..., None], axis=-1)[..., 0]
    return logp, -(np.exp(log_probs) * log_probs).sum(-1)


def _numpy_aggregate(per_token, mask, agg):
    """token-mean or seq-mean-token-mean over rows that are one episode each, float64."""
    keep = mask != 0
    if agg == "token-mean":
        return per_token[keep].sum() / keep.sum()
    means = [per_token[i][keep[i]].mean() for i in range(len(mask)) if keep[i].any()]
    return float(np.mean(means))


@pytest.mark.parametrize("agg", ["token-mean", "seq-mean-token-mean"])
def test_kl_and_entropy_terms_are_reduced_with_the_objectives_aggregation(agg):
    """loss(kl_coef=0.1, entropy_coef=0.05) - loss(0, 0) = 0.1 · agg(k3) - 0.05 · agg(H), with agg the objective's."""
    params = model.init_params(CFG, jax.random.key(3))
    rows = _episodes(np.random.default_rng(3))
    base = RLStepConfig(chunk_size=16, temperature=0.8, objective_kwargs={"agg": agg})
    terms = dataclasses.replace(base, kl_coef=0.1, entropy_coef=0.05)
    plain, _ = jax.jit(lambda p: rl_loss(p, rows, CFG, step_cfg=base))(params)
    shaped, aux = jax.jit(lambda p: rl_loss(p, rows, CFG, step_cfg=terms))(params)
    logp, entropy = _numpy_terms(params, rows, 0.8)
    d = rows["ref_logp"].astype(np.float64) - logp
    kl = _numpy_aggregate(np.exp(d) - 1 - d, rows["loss_mask"], agg)
    bonus = _numpy_aggregate(entropy, rows["loss_mask"], agg)
    np.testing.assert_allclose(aux["kl"], kl, rtol=1e-4)
    np.testing.assert_allclose(float(shaped) - float(plain), 0.1 * kl - 0.05 * bonus, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(aux["entropy"], _numpy_aggregate(entropy, rows["loss_mask"], "token-mean"), rtol=1e-5)

    # the bonus's gradient is the entropy's, through the chunked logits as through the model's full ones
    def full_entropy(p):
        logits = (
            model.forward(p, rows["tokens"], CFG, positions=rows["positions"], segment_ids=rows["segment_ids"]) / 0.8
        )
        return losses.aggregate(losses.token_entropy(logits), rows["loss_mask"], agg, rows["segment_ids"])

    bonus_only = dataclasses.replace(base, entropy_coef=0.05)
    no_advantage = {**rows, "advantages": np.zeros_like(rows["advantages"])}  # the policy term is 0, so is its gradient
    chunked = jax.jit(jax.grad(lambda p: rl_loss(p, no_advantage, CFG, step_cfg=bonus_only)[0]))(params)
    reference = jax.tree.map(lambda g: -0.05 * g, jax.jit(jax.grad(full_entropy))(params))
    assert_gradients_close(chunked, reference, n_terms=rows["tokens"].size * CFG.vocab_size)


@pytest.mark.parametrize("agg", ["token-mean", "seq-mean-token-mean"])
def test_accumulated_micro_batches_weighed_by_their_counts_give_the_whole_batch_gradient(agg):
    """Two micro-batches of one optimizer update (grad_accum 2: the optimizer takes the mean of their gradients),
    of 3 episodes (15 policy tokens) and 1 (2): with each loss weighed by `loss_scales` the mean gradient is the
    whole batch's, whose token-mean divides by all 17 tokens (DAPO); the unweighed mean of the two means is not."""
    step_cfg = RLStepConfig(chunk_size=16, temperature=0.8, kl_coef=0.1, objective_kwargs={"agg": agg})
    grad = jax.jit(jax.grad(lambda p, b: rl_loss(p, b, CFG, step_cfg=step_cfg)[0]))
    params = model.init_params(CFG, jax.random.key(4))
    ids, masks, logps = _random_episodes(
        np.random.default_rng(4), [(6, 5, 7, 5), (4, 3, 6, 0), (3, 2, 0, 0), (5, 1, 3, 1)]
    )
    advantages = [1.0, -0.5, 0.25, -1.5]
    whole = episode_rows(ids, masks, logps, advantages, SEQ)
    parts = [{k: v[:3] for k, v in whole.items()}, {k: v[3:] for k, v in whole.items()}]
    assert [int(p["loss_mask"].sum()) for p in parts] == [15, 2]
    for rows in (whole, *parts):
        rows["ref_logp"] = np.where(rows["loss_mask"] != 0, rows["old_logp"] - 0.2, 0.0).astype(np.float32)
    count = jax.jit(losses.aggregation_count, static_argnums=1)
    counts = [float(count(p["loss_mask"], agg, p["segment_ids"])) for p in parts]
    scales = loss_scales(counts, 2)
    accumulated = jax.tree.map(
        lambda a, b: (a + b) / 2, *[grad(params, {**p, "loss_scale": np.float32(s)}) for p, s in zip(parts, scales)]
    )
    assert_gradients_close(accumulated, grad(params, whole), n_terms=whole["tokens"].size)
    # loss_scale 1 is the unweighed loss (what the update uses when none is given) and reuses the compiled grads
    unweighed = jax.tree.map(
        lambda a, b: (a + b) / 2, *[grad(params, {**p, "loss_scale": np.float32(1.0)}) for p in parts]
    )
    gap = max(
        float(np.abs(np.asarray(a) - np.asarray(b)).max())
        for a, b in zip(jax.tree.leaves(unweighed), jax.tree.leaves(grad(params, whole)))
    )
    assert gap > 1e-2


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


@pytest.mark.parametrize(
    "objective, kwargs",
    [
        (sequence_clip, {}),
        (losses.policy_loss, {"agg": "seq-mean-token-mean"}),
        (losses.policy_loss, {"agg": "seq-mean-token-sum"}),
        (losses.policy_loss, {"agg": "seq-mean-token-sum-norm", "norm": 16.0}),
        (losses.gspo_loss, {"eps_low": 0.2, "eps_high": 0.2}),
    ],
)
def test_sequence_level_objectives_that_take_segment_ids_are_exact_on_packed_rows(objective, kwargs):
    """rl_loss passes the batch's segment ids to an objective that declares them: each episode of a packed row is one
    sequence, so packing changes neither the loss nor the gradient (nor the KL and entropy terms, reduced alike)."""
    step_cfg = RLStepConfig(chunk_size=16, objective_kwargs=kwargs, kl_coef=0.05, entropy_coef=0.01)
    loss_and_grad = jax.jit(
        jax.value_and_grad(functools.partial(rl_loss, cfg=CFG, step_cfg=step_cfg, objective=objective), has_aux=True)
    )
    params = model.init_params(CFG, jax.random.key(2))
    ids, masks, logps = _random_episodes(np.random.default_rng(2), [(6, 5, 7, 5), (4, 3, 6, 2), (3, 4, 0, 0)])
    advantages = [1.0, -0.5, 0.25]
    single = episode_rows(ids, masks, logps, advantages, SEQ)
    packed = packed_episode_rows(ids, masks, logps, advantages, SEQ)
    assert packed["tokens"].shape == (2, SEQ) and packed["segment_ids"].max() == 2
    for rows in (single, packed):
        rows["ref_logp"] = np.where(rows["loss_mask"] != 0, rows["old_logp"] - 0.3, 0.0).astype(np.float32)
    (loss, _), grads = loss_and_grad(params, single)
    (loss_p, _), grads_p = loss_and_grad(params, packed)
    np.testing.assert_allclose(loss_p, loss, rtol=1e-5)
    assert max(float(np.abs(g).max()) for g in jax.tree.leaves(grads)) > 1e-4
    assert_gradients_close(grads_p, grads, n_terms=single["tokens"].size)

    if objective is sequence_clip:  # the same objective blind to segments sees a row, not an episode
        blind = functools.partial(rl_loss, cfg=CFG, step_cfg=step_cfg, objective=row_clip)
        assert abs(float(jax.jit(blind)(params, packed)[0]) - float(loss)) > 1e-3


def test_an_objective_registered_anew_under_its_name_is_the_one_the_update_runs():
    """`make_rl_step` caches its compiled steps; the cache is keyed by the objective function, not its name, so
    editing a notebook's objective and registering it again under the same name takes effect."""
    from jaxseeker.parallel import MeshConfig, make_mesh
    from jaxseeker.train.optimizer import OptimizerConfig, make_optimizer
    from jaxseeker.train.rl.step import make_rl_step
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
        state, _ = create_train_state(
            functools.partial(model.init_params, CFG), model.param_axes(CFG), make_optimizer(opt), 0, mesh
        )
        _, metrics = after.update(state, jax.device_put(rows, after.batch_sharding))
        assert float(metrics["edited"]) == 1.0
    finally:
        del losses.POLICY_OBJECTIVES["test_notebook_objective"]


def test_compiler_options_reach_the_update_and_the_old_log_prob_compiles():
    """`rl.compiler_options` go to both programs' XLA compiles: YNNPACK's dots give the update and the old
    log-probs of plain XLA:CPU within float32 reduction-order error, and an option XLA lacks fails each compile,
    naming it."""
    from jaxseeker.parallel import MeshConfig, make_mesh
    from jaxseeker.train.optimizer import OptimizerConfig, make_optimizer
    from jaxseeker.train.rl.step import make_rl_step
    from jaxseeker.train.state import create_train_state

    mesh, opt = make_mesh(MeshConfig(), jax.devices()[:1]), OptimizerConfig(lr=1e-3, warmup_steps=0, total_steps=4)
    rows = _episodes(np.random.default_rng(0))
    del rows["ref_logp"]
    step_cfg = RLStepConfig(chunk_size=16)
    ynn = {"xla_cpu_experimental_ynn_fusion_type": "LIBRARY_FUSION_TYPE_DOT"}
    results = {}
    for name, options in (("xla", None), ("ynn", ynn)):
        fns = make_rl_step(CFG, step_cfg, opt, mesh=mesh, rows=2, seq=SEQ, compiler_options=options)
        state, _ = create_train_state(
            functools.partial(model.init_params, CFG), model.param_axes(CFG), make_optimizer(opt), 0, mesh
        )
        batch = jax.device_put(rows, fns.batch_sharding)
        logp = fns.logprobs(state.params, batch)
        _, metrics = fns.update(state, batch)
        results[name] = (np.asarray(logp, np.float64), float(metrics["loss"]))
    # A dot of K float32 terms summed in another order moves by at most K·u of its scale; about 7 dots a layer, the
    # longest of max(hidden, intermediate) terms, chained over the layers, bound a log-prob's change by that many
    # times u of the log-probs' scale (worst case: every rounding one way).
    bound = 7 * CFG.num_layers * max(CFG.hidden_size, CFG.intermediate_size) * EPS32
    scale = np.abs(results["xla"][0]).max()
    np.testing.assert_allclose(results["ynn"][0], results["xla"][0], rtol=0, atol=bound * scale)
    assert results["ynn"][1] == pytest.approx(results["xla"][1], rel=bound)
    bad = make_rl_step(CFG, step_cfg, opt, mesh=mesh, rows=2, seq=SEQ, compiler_options={"xla_no_such_option": 1})
    with pytest.raises(Exception, match="xla_no_such_option"):
        bad.logprobs(state.params, batch)
