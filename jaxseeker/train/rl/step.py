"""The group-relative RL update: padded `[batch, seq]` rows (`rows.py`) → clipped policy loss → one optimizer step.

An objective that declares a `segment_ids` keyword gets the batch's, so that sequence-level ones
(`losses.policy_loss`'s seq-mean aggregations, a user's GSPO) reduce per episode, not per row (see
`losses.registry`). The update's batch holds the rows' keys (`rows.ROW_KEYS`, and `ref_logp` when a KL term is in
the loss) and `loss_scale` (the weight of each micro-batch's loss in its optimizer update; 1
when absent). One optimizer update takes `[micro, rows, seq]` (or one `[rows, seq]` micro-batch): the gradients of
the micro-batches are summed in a scan, one forward and backward of `[rows, seq]` at a time, and a micro-batch
without a trained token is skipped (`accumulated_update`), so the update's memory is that of one micro-batch
whatever the mini-batch holds.
The log-probs of the update and of the old-log-prob pass come from the same forward
(`model.hidden_states` + chunked `losses.token_logprobs`, logits built at trained positions only) at the sampling
temperature, so a recomputed old log-prob makes the ratio exactly 1 on the first mini-batch of a step.
`make_rl_step` compiles both, sharded (splash attention blockwise over the mesh, see
`sft.step.mesh_attention_kernel`), and keeps them for later runs of the same shapes in the process (one compile
per shape, not per run).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import Mesh, NamedSharding

from jaxseeker import losses, model
from jaxseeker.losses.registry import objective_aggregation, takes_segment_ids
from jaxseeker.model.forward import Constrain
from jaxseeker.model.lora import LoraConfig
from jaxseeker.parallel import batch_sharding, global_array, param_shardings
from jaxseeker.parallel.context_layout import balanced_rows, context_layout, from_balanced
from jaxseeker.parallel.rules import DEFAULT_RULES, Rules, activation_constraint, replicated
from jaxseeker.parallel.sharded_attention import Attention
from jaxseeker.train.optimizer import OptimizerConfig, learning_rate_at, make_optimizer
from jaxseeker.train.rl.rows import ROW_KEYS
from jaxseeker.train.sft.step import loss_inputs, mesh_attention_kernel, mesh_loss, policy_params, with_base
from jaxseeker.train.state import TrainState, abstract_train_state, cast_floating

Batch = Mapping[str, jax.Array]


@dataclasses.dataclass(frozen=True)
class RLStepConfig:
    """What the compiled update computes (hashable: it keys the compile cache).

    objective: a name for `losses.get_policy_objective` ("policy_loss" or "package.module:function"),
    called as `objective(logp, old_logp, advantages, mask, **objective_kwargs)`, with `segment_ids=` the
    batch's when it declares that keyword (`losses.registry.takes_segment_ids`).
    kl_coef > 0 adds kl_coef · KL(π ‖ π_ref) (estimator k1 / k2 / k3) and needs `ref_logp` in the batch;
    entropy_coef > 0 subtracts entropy_coef · H(π) (an entropy bonus); both are reduced with the objective's own
    aggregation (`losses.objective_aggregation`). temperature: the sampling temperature (log-probs are those of
    softmax(logits / T)). entropy: compute the entropy (always, with an entropy bonus).
    """

    objective: str = "policy_loss"
    objective_kwargs: tuple[tuple[str, Any], ...] = ()
    kl_coef: float = 0.0
    kl_estimator: str = "k3"
    temperature: float = 1.0
    chunk_size: int = 512
    entropy: bool = True
    entropy_coef: float = 0.0

    def __post_init__(self):
        if isinstance(self.objective_kwargs, Mapping):
            object.__setattr__(self, "objective_kwargs", tuple(sorted(self.objective_kwargs.items())))
        losses.get_policy_objective(self.objective)  # fails early, naming the known objectives
        for name in ("kl_coef", "entropy_coef"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.kl_estimator not in losses.KL_ESTIMATORS:
            raise ValueError(f"kl_estimator {self.kl_estimator!r} is not one of {list(losses.KL_ESTIMATORS)}")
        if self.temperature <= 0:
            raise ValueError(f"temperature must be > 0 (greedy rollouts cannot be trained on), got {self.temperature}")
        if self.chunk_size < 1:
            raise ValueError(f"chunk_size must be >= 1, got {self.chunk_size}")


def policy_logprobs(
    params: Any,
    batch: Batch,
    cfg: model.ModelConfig,
    *,
    temperature: float = 1.0,
    chunk_size: int = 512,
    entropy: bool = False,
    attention_kernel: Attention | None = None,
    constrain: Constrain | None = None,
) -> tuple[jax.Array, jax.Array | None]:
    """(log π(target) `[batch, seq]`, entropy `[batch, seq]` or None) with the training forward, chunked over seq,
    built at the batch's `loss_mask` positions only (0 elsewhere).
    attention_kernel, constrain: passed to `model.hidden_states` (None: the model's `attention_impl`; XLA's
    activation layout)."""
    hidden, w = loss_inputs(params, batch, cfg, attention_kernel, constrain)  # [batch, seq, embed], [embed, vocab]
    kwargs = dict(chunk_size=chunk_size, temperature=temperature, loss_mask=batch["loss_mask"])
    if entropy:
        return losses.token_logprobs_and_entropy(hidden, w, batch["targets"], **kwargs)
    return losses.token_logprobs(hidden, w, batch["targets"], **kwargs), None


def rl_loss(
    params: Any,
    batch: Batch,
    cfg: model.ModelConfig,
    *,
    step_cfg: RLStepConfig,
    objective: Callable | None = None,
    attention_kernel: Attention | None = None,
    constrain: Constrain | None = None,
) -> tuple[jax.Array, dict]:
    """loss_scale · [objective(logp, old_logp, A, mask[, segment_ids]) + kl_coef · KL(π ‖ π_ref)
    − entropy_coef · H], every term masked to policy tokens, the KL and entropy terms reduced with the objective's
    aggregation.
    `objective` defaults to the function `step_cfg.objective` names.

    Metrics: the objective's (clip fractions, ratio, approx KL), `entropy` (token-mean policy entropy over
    policy tokens) and `kl` (to the reference) when on.
    """
    want_entropy = step_cfg.entropy or step_cfg.entropy_coef > 0
    logp, entropy = policy_logprobs(
        params,
        batch,
        cfg,
        temperature=step_cfg.temperature,
        chunk_size=step_cfg.chunk_size,
        entropy=want_entropy,
        attention_kernel=attention_kernel,
        constrain=constrain,
    )  # [batch, seq]
    mask, segment_ids = batch["loss_mask"], batch["segment_ids"]
    objective = objective or losses.get_policy_objective(step_cfg.objective)
    kwargs = dict(step_cfg.objective_kwargs)
    agg, norm = objective_aggregation(objective, kwargs)
    if takes_segment_ids(objective):
        kwargs["segment_ids"] = segment_ids  # [batch, seq]: the episodes of packed rows
    loss, aux = objective(logp, batch["old_logp"], batch["advantages"], mask, **kwargs)
    aux = dict(aux)
    if step_cfg.kl_coef > 0:
        kl, kl_aux = losses.kl_penalty(
            logp, batch["ref_logp"], mask, estimator=step_cfg.kl_estimator, agg=agg, norm=norm, segment_ids=segment_ids
        )
        loss = loss + step_cfg.kl_coef * kl
        aux.update(kl_aux)
    if entropy is not None:
        aux["entropy"] = losses.masked_mean(jax.lax.stop_gradient(entropy), mask)
        if step_cfg.entropy_coef > 0:
            loss = loss - step_cfg.entropy_coef * losses.aggregate(entropy, mask, agg, segment_ids, norm=norm)
    if "loss_scale" in batch:
        loss = loss * batch["loss_scale"]
    return loss, aux


def accumulated_update(
    state: TrainState,
    batch: Batch,
    base: Any = None,
    *,
    model_cfg: model.ModelConfig,
    optimizer: Any,
    loss_fn: Callable,
    learning_rate: Callable[[jax.Array], jax.Array] | None = None,
    compute_dtype: Any = None,
    lora: LoraConfig | None = None,
) -> tuple[TrainState, dict[str, jax.Array]]:
    """One optimizer update from the summed gradients of the micro-batches of `batch` (leaves `[micro, rows, seq]`,
    `loss_scale` `[micro]`), un-jitted: a scan computes one micro-batch's loss and gradients at a time (a micro-batch
    without a trained token is skipped by a `lax.cond`), so activations are held for one micro-batch only. Each
    micro-batch's loss carries its `loss_scale`, so the sum is the mini-batch's loss (`rl.update`).

    Metrics: loss (the sum), n_tokens, grad_norm (before clipping), lr, and the loss's scalar aux averaged over the
    micro-batches weighted by their trained tokens (those named `*_max`: the largest)."""

    def compute_loss(trainable: Any, micro: Batch) -> tuple[jax.Array, dict]:
        return loss_fn(cast_floating(policy_params(trainable, base, lora), compute_dtype), micro, model_cfg)

    def run(micro: Batch) -> tuple[Any, jax.Array, dict]:
        (loss, aux), grads = jax.value_and_grad(compute_loss, has_aux=True)(state.params, micro)
        return grads, loss, {k: v.astype(jnp.float32) for k, v in aux.items() if jnp.ndim(v) == 0}

    first = jax.tree.map(lambda x: x[0], batch)
    shapes = jax.eval_shape(run, first)

    def skip(micro: Batch) -> tuple[Any, jax.Array, dict]:
        return jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), shapes)

    def body(carry: tuple, micro: Batch) -> tuple[tuple, None]:
        acc, loss_sum, aux_sum, n_sum = carry
        n = jnp.sum(micro["loss_mask"] != 0).astype(jnp.float32)
        grads, loss, aux = jax.lax.cond(n > 0, run, skip, micro)
        acc = jax.tree.map(jnp.add, acc, grads)
        aux_sum = {k: jnp.maximum(aux_sum[k], v) if k.endswith("_max") else aux_sum[k] + n * v for k, v in aux.items()}
        return (acc, loss_sum + loss, aux_sum, n_sum + n), None

    zeros = skip(first)
    (grads, loss, aux_sum, n_tokens), _ = jax.lax.scan(body, (zeros[0], zeros[1], zeros[2], jnp.float32(0.0)), batch)
    updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    metrics = {k: v if k.endswith("_max") else v / jnp.maximum(n_tokens, 1.0) for k, v in aux_sum.items()}
    metrics.update(loss=loss, n_tokens=n_tokens.astype(jnp.int32), grad_norm=optax.tree.norm(grads))
    if learning_rate is not None:
        metrics["lr"] = jnp.asarray(learning_rate(state.step), jnp.float32)
    return state.replace(step=state.step + 1, params=params, opt_state=opt_state), metrics


class RLStep(NamedTuple):
    """The compiled pieces of an RL step for one `[rows, seq]` micro-batch shape (with LoRA each takes the frozen base
    params as a third argument until `with_base` binds them)."""

    # donates the state; batch: `[micro, rows, seq]` rows (or one `[rows, seq]` micro-batch) + loss_scale
    update: Callable[[TrainState, Batch], tuple[TrainState, dict]]
    logprobs: Callable[[Any, Batch], jax.Array]  # (params, batch) -> [rows, seq] log-probs, 0 off the mask
    state_shardings: TrainState
    batch_sharding: NamedSharding  # of a [rows, seq] micro-batch
    micro_sharding: NamedSharding  # of [micro, rows, seq] micro-batches

    def with_base(self, base: Any) -> RLStep:
        """A LoRA step's `update(state, batch)` and `logprobs(adapters, batch)` over the frozen `base`; the step itself
        when `base` is None (full fine-tuning)."""
        if base is None:
            return self
        return self._replace(update=with_base(self.update, base), logprobs=with_base(self.logprobs, base))


def make_rl_step(
    cfg: model.ModelConfig,
    step_cfg: RLStepConfig,
    opt_cfg: OptimizerConfig,
    *,
    mesh: Mesh,
    rows: int,
    seq: int,
    rules: Rules = DEFAULT_RULES,
    compute_dtype: Any = "model",
    lora: LoraConfig | None = None,
    compiler_options: Mapping[str, Any] | None = None,
) -> RLStep:
    """The jitted, sharded update (`accumulated_update` of `rl_loss` over `[micro, rows, seq]` micro-batches) and
    old-log-prob pass for `[rows, seq]` batches.

    The optimizer is `make_optimizer(opt_cfg)`; the state must have been built with the same config
    (its shardings follow the rules). With `lora` the state's params are the adapters and both pieces take the
    frozen base params as a third argument (`RLStep.with_base`). Results are cached per argument set, so a second
    run with the same shapes in one process compiles nothing. compiler_options: XLA options for both compiles
    (`rl.compiler_options`).
    """
    objective = losses.get_policy_objective(step_cfg.objective)  # the function, not its name, keys the cache
    return _make_rl_step(
        cfg,
        step_cfg,
        objective,
        opt_cfg,
        mesh,
        rows,
        seq,
        tuple(sorted(rules.items())),
        compute_dtype,
        lora,
        tuple(sorted((compiler_options or {}).items())),
    )


@functools.lru_cache(maxsize=16)
def _make_rl_step(
    cfg, step_cfg, objective, opt_cfg, mesh, rows, seq, rules_items, compute_dtype, lora, option_items
) -> RLStep:
    """`make_rl_step`'s work, cached: a function registered anew under an old name compiles anew."""
    rules, options = dict(rules_items), dict(option_items) or None
    optimizer = make_optimizer(opt_cfg)
    init, axes, base_shardings = functools.partial(model.init_params, cfg), model.param_axes(cfg), None
    if lora is not None:
        init, axes = functools.partial(model.init_lora, cfg, lora), model.lora_axes(cfg, lora)
        base_shardings = param_shardings(cfg, mesh, rules)
    abstract = abstract_train_state(init, axes, optimizer, mesh, rules)
    shardings = jax.tree.map(lambda x: x.sharding, abstract)
    bsh = batch_sharding(mesh, (rows, seq), rules)
    loss_fn = mesh_loss(functools.partial(rl_loss, step_cfg=step_cfg, objective=objective), cfg, mesh, rules)
    keys = ROW_KEYS + (("ref_logp",) if step_cfg.kl_coef > 0 else ())
    scalar = replicated(mesh)
    dtype = cfg.compute_dtype if compute_dtype == "model" else compute_dtype
    step = functools.partial(
        accumulated_update,
        model_cfg=cfg,
        optimizer=optimizer,
        loss_fn=loss_fn,
        learning_rate=functools.partial(learning_rate_at, opt_cfg),
        compute_dtype=dtype,
        lora=lora,
    )
    micro_sharding = NamedSharding(mesh, jax.sharding.PartitionSpec(None, *bsh.spec))  # [micro, rows, seq]
    compiled = {}  # by the batch's rank: [rows, seq] (one micro-batch) or [micro, rows, seq]
    for rank, (rows_sh, scale_sh) in {2: (bsh, scalar), 3: (micro_sharding, scalar)}.items():

        def one(state: TrainState, batch: Batch, *base: Any, _rank: int = rank) -> tuple[TrainState, dict]:
            if _rank == 2:
                batch = jax.tree.map(lambda x: x[None], batch)  # one micro-batch
            return step(state, batch, *base)

        batch_sh = {**{k: rows_sh for k in keys}, "loss_scale": scale_sh}
        in_sh = (shardings, batch_sh) + (() if lora is None else (base_shardings,))
        compiled[rank] = jax.jit(
            one, in_shardings=in_sh, out_shardings=(shardings, scalar), donate_argnums=0, compiler_options=options
        )

    def update(state: TrainState, batch: Batch, *base: Any) -> tuple[TrainState, dict]:
        """The compiled step on the keys it reads (the host's `episode` is dropped), `loss_scale` 1 per micro-batch
        if absent; with LoRA, `base` is the frozen base params."""
        rank = jnp.ndim(batch["tokens"])
        ones = np.ones((batch["tokens"].shape[0],) if rank == 3 else (), np.float32)
        scale = batch["loss_scale"] if "loss_scale" in batch else global_array(ones, scalar)
        return compiled[rank](state, {**{k: batch[k] for k in keys}, "loss_scale": scale}, *base)

    kernel = mesh_attention_kernel(cfg, mesh, rules)
    constrain = activation_constraint(mesh, rules) if mesh.size > 1 else None
    layout = context_layout(mesh, rules, seq)  # rows in the balanced order where the mesh splits the sequence

    def logprobs(params: Any, batch: Batch, base: Any = None) -> jax.Array:
        params = cast_floating(policy_params(params, base, lora), dtype)
        logp, _ = policy_logprobs(
            params,
            balanced_rows(batch, layout),
            cfg,
            temperature=step_cfg.temperature,
            chunk_size=step_cfg.chunk_size,
            attention_kernel=kernel,
            constrain=constrain,
        )  # [rows, seq]
        return jnp.where(batch["loss_mask"] != 0, from_balanced(logp, layout), 0.0)

    in_shardings = (shardings.params, bsh) if lora is None else (shardings.params, bsh, base_shardings)
    logprob_fn = jax.jit(logprobs, in_shardings=in_shardings, out_shardings=bsh, compiler_options=options)
    return RLStep(update, logprob_fn, shardings, bsh, micro_sharding)
