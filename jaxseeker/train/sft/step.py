"""The supervised fine-tuning step: masked next-token NLL, gradients, one optimizer update, all under jit.

`make_sft_step` compiles `step(state, batch) -> (state, metrics)` with the state's shardings in
and out (the state is donated: updated in place) and the batch split along `batch`. The loss is
any pure `loss_fn(params, batch, model_cfg) -> (loss, aux)`; a researcher swaps it without
touching the step. A loss that runs the model should also take an optional keyword `attention_kernel` and
hand it to `model.hidden_states`: on a mesh of several devices the step passes the attention run blockwise
there (`mesh_attention_kernel`: splash or the blocked kernel per device; XLA would otherwise gather their
operands whole onto every device), and where the mesh splits the sequence (a `context` axis) the context
attention, with the batch permuted into the balanced order of `parallel.context_layout` (`with_context_layout`).

With LoRA (`lora` given), `state.params` are the adapters (`model.init_lora`) and the step is
`step(state, batch, base)`: the frozen base params come in as their own argument, placed by their shardings,
neither differentiated nor donated, and the loss sees them with the adapters attached (`policy_params`).
"""

from __future__ import annotations

import functools
import inspect
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import optax
from jax.sharding import Mesh, NamedSharding

from jaxseeker import losses, model
from jaxseeker.model.forward import Constrain
from jaxseeker.model.layers import splash_attention
from jaxseeker.model.lora import LoraConfig
from jaxseeker.parallel.context_layout import balanced_rows, context_layout, sequence_axes
from jaxseeker.parallel.rules import DEFAULT_RULES, Rules, activation_constraint, replicated
from jaxseeker.parallel.sharded_attention import Attention, context_attention, shard_attention
from jaxseeker.train.state import TrainState, cast_floating

Batch = Mapping[str, jax.Array]
LossFn = Callable[[Any, Batch, Any], tuple[jax.Array, dict[str, jax.Array]]]
StepFn = Callable[[TrainState, Batch], tuple[TrainState, dict[str, jax.Array]]]


def sft_loss(
    params: Any,
    batch: Batch,
    cfg: model.ModelConfig,
    *,
    chunk_size: int = 512,
    attention_kernel: Attention | None = None,
    constrain: Constrain | None = None,
) -> tuple[jax.Array, dict]:
    """Mean NLL over the trained tokens of the batch, logits built chunk by chunk (never `[batch, seq, vocab]`).

    batch: `tokens`, `targets`, `loss_mask`, `segment_ids` (0 = padding), `positions`, all `[batch, seq]`.
    attention_kernel, constrain: passed to `model.hidden_states` (None: the model's `attention_impl`; XLA's
    activation layout).
    """
    hidden, w = loss_inputs(params, batch, cfg, attention_kernel, constrain)  # [batch, seq, embed], [embed, vocab]
    return losses.chunked_masked_nll(hidden, w, batch["targets"], batch["loss_mask"], chunk_size=chunk_size)


def loss_inputs(
    params: Any, batch: Batch, cfg: model.ModelConfig, attention_kernel: Attention | None, constrain: Constrain | None
) -> tuple[jax.Array, jax.Array]:
    """(hidden states `[batch, seq, embed]`, unembedding `[embed, vocab]`) of the training forward over `batch`'s
    packed rows: what a chunked loss (SFT's NLL, RL's token log-probs) multiplies chunk by chunk."""
    hidden = model.hidden_states(
        params,
        batch["tokens"],
        cfg,
        positions=batch["positions"],
        segment_ids=batch["segment_ids"],
        attention_kernel=attention_kernel,
        constrain=constrain,
    )  # [batch, seq, embed]
    return hidden, loss_unembed(params, cfg, hidden.dtype, constrain)


def loss_unembed(params: Any, cfg: model.ModelConfig, dtype: Any, constrain: Constrain | None) -> jax.Array:
    """The unembedding `[embed, vocab]` a chunked loss multiplies by, in `dtype`. Under `constrain` it is laid out
    whole along `embed` (split by the `vocab` rule only) before the loss's chunk loop: the FSDP-split weight is
    gathered once per step, and the loop's forward, recompute and backward all read that copy (left to XLA, each
    chunk gathers it again, three times over). `jaxseeker plan` counts that copy and its gradient (`logits`)."""
    w = model.unembed(params, cfg).astype(dtype)  # [embed, vocab]
    return w if constrain is None else constrain(w, (None, "vocab"))


def mesh_attention_kernel(cfg: Any, mesh: Mesh, rules: Rules = DEFAULT_RULES) -> Attention | None:
    """The attention a step over `mesh` hands the model (None: the model's own attention; always on one device).
    Where the `seq` rule splits rows over mesh axes (`context`): `parallel.context_attention` with the model's
    `context_attention` ("all_gather" or "ring"): splash on the gathered rows with `attention_impl: splash` and
    all-gather, the blocked kernel per device otherwise. Else `attention_impl: splash`
    runs `model.layers.splash_attention` on each device's block of rows and heads (`parallel.shard_attention`),
    and `blocked` the blocked kernel likewise; other impls are the model's own."""
    impl = getattr(cfg, "attention_impl", None)
    if mesh.size <= 1:
        return None
    if sequence_axes(mesh, rules):
        return context_attention(
            getattr(cfg, "context_attention", "all_gather"),
            mesh,
            rules=rules,
            impl="splash" if impl == "splash" else "blocked",
        )
    if impl == "splash":
        return shard_attention(splash_attention, mesh, rules=rules)
    if impl == "blocked":
        return context_attention("all_gather", mesh, rules=rules)  # the sequence whole: each device's rows and heads
    return None


def with_context_layout(loss_fn: LossFn, mesh: Mesh, rules: Rules = DEFAULT_RULES) -> LossFn:
    """`loss_fn` on the batch permuted into the balanced order of `parallel.context_layout` (every `[batch, seq]`
    array: tokens, targets, masks, segment ids, positions, …) where the `seq` rule splits rows over `mesh`, so
    that each device holds a front and a back chunk of every row; `loss_fn` itself otherwise. For a loss whose
    model runs `parallel.context_attention` (causality from each token's index in the row as written); one that
    sums over tokens (or reduces per segment id) is unchanged by the order."""
    if not sequence_axes(mesh, rules):
        return loss_fn

    def balanced(params: Any, batch: Batch, model_cfg: Any) -> tuple[jax.Array, dict]:
        layout = context_layout(mesh, rules, batch["tokens"].shape[1])
        return loss_fn(params, balanced_rows(batch, layout), model_cfg)

    return balanced


def takes_keyword(fn: Callable, name: str) -> bool:
    """Whether `fn` accepts the keyword argument `name` (by that name or through `**kwargs`)."""
    return any(
        p.name == name or p.kind is inspect.Parameter.VAR_KEYWORD for p in inspect.signature(fn).parameters.values()
    )


def with_activation_layout(loss_fn: LossFn, mesh: Mesh, rules: Rules = DEFAULT_RULES) -> LossFn:
    """`loss_fn` with `constrain=parallel.activation_constraint(mesh, rules)` bound, so the model's residual stream
    stays split by rows over the mesh (`model.hidden_states`); `loss_fn` itself on one device or when it takes no
    `constrain` keyword (XLA then lays the activations out)."""
    if mesh.size <= 1 or not takes_keyword(loss_fn, "constrain"):
        return loss_fn
    return functools.partial(loss_fn, constrain=activation_constraint(mesh, rules))


def with_attention_kernel(loss_fn: LossFn, kernel: Attention | None) -> LossFn:
    """`loss_fn` with `attention_kernel=kernel` bound; `loss_fn` itself when `kernel` is None, or (with a
    warning) when it takes no `attention_kernel` keyword: the model's own attention then runs."""
    if kernel is None:
        return loss_fn
    if not takes_keyword(loss_fn, "attention_kernel"):
        warnings.warn(
            f"loss {getattr(loss_fn, '__name__', loss_fn)!r} takes no `attention_kernel` keyword: "
            "its attention does not run blockwise over the mesh (operands gathered onto every device)",
            stacklevel=2,
        )
        return loss_fn
    return functools.partial(loss_fn, attention_kernel=kernel)


def policy_params(trainable: Any, base: Any, lora: LoraConfig | None) -> Any:
    """The params the model runs with: the trained params themselves (full fine-tuning), or with `lora` the frozen
    `base` with the adapters `trainable` attached (`model.attach_lora`)."""
    return trainable if lora is None else model.attach_lora(base, trainable, lora)


def with_base(fn: Callable, base: Any) -> Callable:
    """A LoRA run's `fn(state_or_params, batch, base)` (a step, a log-prob pass) as `fn(state_or_params, batch)`
    over the frozen `base`."""
    return lambda x, batch: fn(x, batch, base)


def mesh_loss(loss_fn: LossFn, model_cfg: Any, mesh: Mesh, rules: Rules = DEFAULT_RULES) -> LossFn:
    """`loss_fn` as a step over `mesh` computes it: with the mesh's attention kernel (`mesh_attention_kernel`),
    the activation layout (`with_activation_layout`) and, when it took the kernel, the context order of the
    batch (`with_context_layout`: the kernels follow each token's index, the model's own attention does not)."""
    with_kernel = with_attention_kernel(loss_fn, mesh_attention_kernel(model_cfg, mesh, rules))
    laid_out = with_activation_layout(with_kernel, mesh, rules)
    return laid_out if with_kernel is loss_fn else with_context_layout(laid_out, mesh, rules)


def sft_update(
    state: TrainState,
    batch: Batch,
    *,
    model_cfg: Any,
    optimizer: optax.GradientTransformation,
    loss_fn: LossFn = sft_loss,
    learning_rate: Callable[[jax.Array], jax.Array] | None = None,
    compute_dtype: Any = None,
    lora: LoraConfig | None = None,
    base: Any = None,
) -> tuple[TrainState, dict[str, jax.Array]]:
    """One un-jitted SFT update: grads of `loss_fn` at the params cast to `compute_dtype`, then the optimizer.

    Gradients flow back through the cast, so they and the update are in the master dtype.
    With `lora`, `state.params` are the adapters and the loss runs on `base` with them attached
    (`policy_params`): only the adapters get gradients and updates.
    Metrics: loss, n_tokens (trained tokens), grad_norm (before clipping), lr (if `learning_rate`
    is given) and every scalar of the loss's aux dict.
    """

    def compute_loss(trainable):
        return loss_fn(cast_floating(policy_params(trainable, base, lora), compute_dtype), batch, model_cfg)

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
    rules: Rules = DEFAULT_RULES,
    learning_rate: Callable[[jax.Array], jax.Array] | None = None,
    compute_dtype: Any = "model",
    compiler_options: dict[str, Any] | None = None,
    lora: LoraConfig | None = None,
    base_shardings: Any = None,
) -> StepFn:
    """The jitted, sharded SFT step `step(state, batch) -> (state, metrics)`; `state` is donated. With `lora`:
    `step(state, batch, base)`, the state's params the adapters, `base` the frozen params placed by
    `base_shardings` (`parallel.param_shardings`) and not donated; `with_base` binds it.

    rules: the logical-axis rules of the shardings; the loss runs as `mesh_loss(loss_fn, model_cfg, mesh, rules)`
      (the mesh's attention kernel and activation layout when it takes those keywords, the batch in the
      balanced context order where the mesh splits the sequence).
    learning_rate: micro-step -> lr for the `lr` metric, e.g.
      `functools.partial(optimizer.learning_rate_at, opt_cfg)`.
    compute_dtype: dtype the params are cast to for the forward pass; "model" uses
      `model_cfg.compute_dtype`, None keeps the master dtype.
    compiler_options: XLA options for this compile, e.g. `{"xla_backend_optimization_level": 0}`
      to trade step speed for compile time in tests.
    """
    if isinstance(compute_dtype, str) and compute_dtype == "model":
        compute_dtype = getattr(model_cfg, "compute_dtype", None)
    loss_fn = mesh_loss(loss_fn, model_cfg, mesh, rules)

    def step(state: TrainState, batch: Batch, base: Any = None) -> tuple[TrainState, dict[str, jax.Array]]:
        return sft_update(
            state,
            batch,
            model_cfg=model_cfg,
            optimizer=optimizer,
            loss_fn=loss_fn,
            learning_rate=learning_rate,
            compute_dtype=compute_dtype,
            lora=lora,
            base=base,
        )

    in_shardings = (state_shardings, batch_sharding) + (() if lora is None else (base_shardings,))
    return jax.jit(
        step,
        in_shardings=in_shardings,
        out_shardings=(state_shardings, replicated(mesh)),
        donate_argnums=0,
        compiler_options=compiler_options,
    )
