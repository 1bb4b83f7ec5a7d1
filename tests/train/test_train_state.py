"""The train state is born sharded, keeps f32 master params and gives its optimizer state the params' shardings."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxseeker.train.optimizer import OptimizerConfig, make_optimizer
from jaxseeker.train.state import abstract_train_state, train_state_from_params


def test_created_state_is_sharded_and_f32(toy_state):
    state, shardings = toy_state.state, toy_state.shardings  # made by create_train_state (see conftest)
    assert int(state.step) == 0 and state.rng.shape == (2,) and state.rng.dtype == jnp.uint32
    assert {x.dtype for x in jax.tree.leaves(state.params)} == {jnp.dtype(jnp.float32)}  # bf16 init, f32 master
    for array, sharding in zip(jax.tree.leaves(state), jax.tree.leaves(shardings)):
        assert array.sharding == sharding
    adam = state.opt_state.inner_opt_state[1][0]  # MultiSteps(chain(clip, adamw)) -> ScaleByAdamState
    assert jax.tree.map(lambda x: x.sharding, adam.mu) == shardings.params
    assert jax.tree.map(lambda x: x.sharding, state.opt_state.acc_grads) == shardings.params


def test_abstract_state_matches_the_real_one(toy, toy_state):
    abstract = abstract_train_state(toy_state.init, toy.axes, toy_state.tx, toy_state.mesh)
    assert all(isinstance(x, jax.ShapeDtypeStruct) for x in jax.tree.leaves(abstract))
    assert jax.tree.map(lambda x: (x.shape, x.dtype, x.sharding), abstract) == jax.tree.map(
        lambda x: (x.shape, x.dtype, x.sharding), toy_state.state
    )


def test_state_from_given_params_keeps_their_values(toy, toy_state):
    params = jax.device_get(toy_state.state.params)
    state, shardings = train_state_from_params(params, toy.axes, make_optimizer(OptimizerConfig()), 7, toy_state.mesh)
    np.testing.assert_array_equal(state.params["lm_head"], params["lm_head"])
    assert state.params["lm_head"].sharding == shardings.params["lm_head"]
    np.testing.assert_array_equal(state.rng, jax.random.PRNGKey(7))
