"""The train state (step, params, optimizer state, RNG) and its shardings, born sharded on the mesh.

Params and every params-shaped part of the optimizer state (Adam moments, accumulated gradients)
get the shardings the logical-axis rules give; counters and the RNG are replicated. The state is
built inside `jax.jit(..., out_shardings=...)`, so no device ever holds the whole model.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import flax.struct
import jax
import jax.numpy as jnp
import optax
from jax.sharding import Mesh

from jaxseeker.parallel.rules import DEFAULT_RULES, Rules, replicated, tree_shardings


@flax.struct.dataclass
class TrainState:
    """Everything a training step reads and writes; a pytree, saved whole in checkpoints."""

    step: jax.Array  # [] int32: micro-steps done (one per batch seen)
    params: Any  # model parameters, master dtype (float32)
    opt_state: Any  # optax state
    rng: jax.Array  # [2] uint32 raw PRNG key


def cast_floating(tree: Any, dtype: Any) -> Any:
    """`tree` with every floating-point leaf cast to `dtype` (integer leaves untouched); None = as is."""
    if dtype is None:
        return tree
    dtype = jnp.dtype(dtype)
    return jax.tree.map(lambda x: x.astype(dtype) if jnp.issubdtype(x.dtype, jnp.floating) else x, tree)


def raw_key(rng: jax.Array | int) -> jax.Array:
    """A `[2]` uint32 PRNG key from a seed, a raw key or a typed `jax.random.key`."""
    if isinstance(rng, int):
        return jax.random.PRNGKey(rng)
    if jnp.issubdtype(rng.dtype, jax.dtypes.prng_key):
        return jax.random.key_data(rng)
    return rng


def _state_from_params(params: Any, optimizer: optax.GradientTransformation, rng: jax.Array) -> TrainState:
    """A fresh TrainState (step 0) around `params`."""
    return TrainState(step=jnp.zeros((), jnp.int32), params=params, opt_state=optimizer.init(params), rng=rng)


def _init_state(
    init_params: Callable[[jax.Array], Any],
    optimizer: optax.GradientTransformation,
    master_dtype: Any,
    rng: jax.Array,
) -> TrainState:
    """Pure initialiser: params from `init_params(params_rng)`, cast to the master dtype."""
    params_rng, state_rng = jax.random.split(rng)
    params = cast_floating(init_params(params_rng), master_dtype)
    return _state_from_params(params, optimizer, state_rng)


def train_state_shardings(
    abstract_state: TrainState,
    param_axes: Any,
    optimizer: optax.GradientTransformation,
    mesh: Mesh,
    rules: Rules = DEFAULT_RULES,
) -> TrainState:
    """A TrainState of `NamedSharding`s: params by the rules, params-shaped optimizer state alike, rest replicated."""
    param_shardings = tree_shardings(param_axes, abstract_state.params, mesh, rules)
    opt_shardings = optax.tree_map_params(
        optimizer,
        lambda _, sharding: sharding,
        abstract_state.opt_state,
        param_shardings,
        transform_non_params=lambda _: replicated(mesh),
    )
    return TrainState(step=replicated(mesh), params=param_shardings, opt_state=opt_shardings, rng=replicated(mesh))


def abstract_train_state(
    init_params: Callable[[jax.Array], Any],
    param_axes: Any,
    optimizer: optax.GradientTransformation,
    mesh: Mesh,
    rules: Rules = DEFAULT_RULES,
    *,
    master_dtype: Any = jnp.float32,
) -> TrainState:
    """The TrainState as `ShapeDtypeStruct`s carrying their shardings (a checkpoint restore target); no compute."""
    init = functools.partial(_init_state, init_params, optimizer, master_dtype)
    abstract = jax.eval_shape(init, jax.random.PRNGKey(0))
    shardings = train_state_shardings(abstract, param_axes, optimizer, mesh, rules)
    return jax.tree.map(lambda x, s: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s), abstract, shardings)


def create_train_state(
    init_params: Callable[[jax.Array], Any],
    param_axes: Any,
    optimizer: optax.GradientTransformation,
    rng: jax.Array | int,
    mesh: Mesh,
    rules: Rules = DEFAULT_RULES,
    *,
    master_dtype: Any = jnp.float32,
    compiler_options: dict[str, Any] | None = None,
) -> tuple[TrainState, TrainState]:
    """A fresh TrainState born sharded on `mesh`, and its shardings (for the step's in/out shardings).

    `init_params(rng) -> params` is e.g. `functools.partial(model.init_params, cfg)`; `param_axes`
    its logical axes (`model.param_axes(cfg)`). Floating params are kept in `master_dtype`.
    `compiler_options` go to the XLA compile of the initialiser.
    """
    init = functools.partial(_init_state, init_params, optimizer, master_dtype)
    rng = raw_key(rng)
    abstract = jax.eval_shape(init, rng)
    shardings = train_state_shardings(abstract, param_axes, optimizer, mesh, rules)
    state = jax.jit(init, out_shardings=shardings, compiler_options=compiler_options)(rng)
    return state, shardings


def train_state_from_params(
    params: Any,
    param_axes: Any,
    optimizer: optax.GradientTransformation,
    rng: jax.Array | int,
    mesh: Mesh,
    rules: Rules = DEFAULT_RULES,
    *,
    master_dtype: Any = jnp.float32,
) -> tuple[TrainState, TrainState]:
    """A step-0 TrainState around given params (e.g. an HF checkpoint), sharded on `mesh`, and its shardings.
    Params already placed by those shardings (`model.load_hf(..., shardings=...)`) are cast shard by shard."""

    def init(params: Any, rng: jax.Array) -> TrainState:
        return _state_from_params(cast_floating(params, master_dtype), optimizer, rng)

    rng = raw_key(rng)
    abstract = jax.eval_shape(init, params, rng)
    shardings = train_state_shardings(abstract, param_axes, optimizer, mesh, rules)
    params = jax.device_put(params, shardings.params)
    state = jax.jit(init, in_shardings=(shardings.params, shardings.rng), out_shardings=shardings)(params, rng)
    return state, shardings
