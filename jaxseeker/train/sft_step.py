"""The supervised fine-tuning step: masked next-token NLL, gradients, one optimizer update, all under jit.

`make_sft_step` compiles `step(state, batch) -> (state, metrics)` with the state's shardings in
and out (the state is donated: updated in place) and the batch split along `batch`. The loss is
any pure `loss_fn(params, batch, model_cfg) -> (loss, aux)`; a researcher swaps it without
touching the step.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import optax
from jax.sharding import Mesh, NamedSharding

from jaxseeker import losses, model
from jaxseeker.parallel.rules import replicated
from jaxseeker.train.state import TrainState, cast_floating

Batch = Mapping[str, jax.Array]
LossFn = Callable[[Any, Batch, Any], tuple[jax.Array, dict[str, jax.Array]]]
StepFn = Callable[[TrainState, Batch], tuple[TrainState, dict[str, jax.Array]]]


def sft_loss(params: Any, batch: Batch, cfg: model.ModelConfig, *, chunk_size: int = 512) -> tuple[jax.Array, dict]:
    """Mean NLL over the trained tokens of the batch, logits built chunk by chunk (never `[batch, seq, vocab]`).

    batch: `tokens`, `targets`, `loss_mask`, `segment_ids` (0 = padding), `positions`, all `[batch, seq]`.
    """
    hidden = model.hidden_states(
        params, batch["tokens"], cfg, positions=batch["positions"], segment_ids=batch["segment_ids"]
    )  # [batch, seq, embed]
    w = model.unembed(params, cfg).astype(hidden.dtype)  # [embed, vocab]
    return losses.chunked_masked_nll(hidden, w, batch["targets"], batch["loss_mask"], chunk_size=chunk_size)


def sft_update(
    state: TrainState,
    batch: Batch,
    *,
    model_cfg: Any,
    optimizer: optax.GradientTransformation,
    loss_fn: LossFn = sft_loss,
    learning_rate: Callable[[jax.Array], jax.Array] | None = None,
    compute_dtype: Any = None,
) -> tuple[TrainState, dict[str, jax.Array]]:
    """One un-jitted SFT update: grads of `loss_fn` at the params cast to `compute_dtype`, then the optimizer.

    Gradients flow back through the cast, so they and the update are in the master dtype.
    Metrics: loss, n_tokens (trained tokens), grad_norm (before clipping), lr (if `learning_rate`
    is given) and every scalar of the loss's aux dict.
    """
    def compute_loss(params):
        return loss_fn(cast_floating(params, compute_dtype), batch, model_cfg)

    (loss, aux), grads = jax.value_and_grad(compute_loss, has_aux=True)(state.params)
    updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    metrics = {k: v for k, v in aux.items() if jnp.ndim(v) == 0}
    metrics.update(
        loss=loss,
        n_tokens=jnp.sum(batch["loss_mask"] != 0).astype(jnp.int32),
        grad_norm=optax.tree.norm(grads),
    )
    if learning_rate is not None:
        metrics["lr"] = jnp.asarray(learning_rate(state.step), jnp.float32)
    new_state = state.replace(step=state.step + 1, params=params, opt_state=opt_state)
    return new_state, metrics


def make_sft_step(
    model_cfg: Any,
    optimizer: optax.GradientTransformation,
    loss_fn: LossFn = sft_loss,
    *,
    mesh: Mesh,
    state_shardings: TrainState,
    batch_sharding: NamedSharding,
    learning_rate: Callable[[jax.Array], jax.Array] | None = None,
    compute_dtype: Any = "model",
    compiler_options: dict[str, Any] | None = None,
) -> StepFn:
    """The jitted, sharded SFT step `step(state, batch) -> (state, metrics)`; `state` is donated.

    learning_rate: micro-step -> lr for the `lr` metric, e.g.
      `functools.partial(optimizer.learning_rate_at, opt_cfg)`.
    compute_dtype: dtype the params are cast to for the forward pass; "model" uses
      `model_cfg.compute_dtype`, None keeps the master dtype.
    compiler_options: XLA options for this compile, e.g. `{"xla_backend_optimization_level": 0}`
      to trade step speed for compile time in tests.
    """
    if isinstance(compute_dtype, str) and compute_dtype == "model":
        compute_dtype = getattr(model_cfg, "compute_dtype", None)

    def step(state: TrainState, batch: Batch) -> tuple[TrainState, dict[str, jax.Array]]:
        return sft_update(
            state, batch, model_cfg=model_cfg, optimizer=optimizer, loss_fn=loss_fn,
            learning_rate=learning_rate, compute_dtype=compute_dtype,
        )

    return jax.jit(
        step,
        in_shardings=(state_shardings, batch_sharding),
        out_shardings=(state_shardings, replicated(mesh)),
        donate_argnums=0,
        compiler_options=compiler_options,
    )
