"""The jitted SFT step: metrics, masking, memorisation and bf16 compute over f32 master weights."""

from __future__ import annotations

import functools
import types

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jax.sharding import AbstractMesh

from jaxseeker import model
from jaxseeker.parallel import MeshConfig, batch_sharding, make_mesh, shard_batch
from jaxseeker.parallel.mesh_config import MESH_AXES
from jaxseeker.train.optimizer import OptimizerConfig, learning_rate_at, make_optimizer
from jaxseeker.train.sft import step as sft_step
from jaxseeker.train.sft.step import make_sft_step
from jaxseeker.train.state import create_train_state

OPT = OptimizerConfig(lr=0.05, min_lr=0.005, warmup_steps=2, total_steps=30, weight_decay=0.0)


@jax.jit
def fresh_copy(tree):
    """A copy of a state (the step donates, i.e. consumes, its input state)."""
    return jax.tree.map(jnp.copy, tree)


def make_step(toy, state_shardings, mesh, compute_dtype="model"):
    """The jitted SFT step of the toy model and its batch sharding."""
    sharding = batch_sharding(mesh, toy.batch["tokens"].shape)
    step = make_sft_step(
        toy.cfg,
        make_optimizer(OPT),
        toy.loss,
        mesh=mesh,
        state_shardings=state_shardings,
        batch_sharding=sharding,
        learning_rate=functools.partial(learning_rate_at, OPT),
        compute_dtype=compute_dtype,
        compiler_options=toy.compiler_options,
    )
    return step, sharding


@pytest.fixture(scope="module")
def f32(toy):
    """A state and one compiled float32 step shared by this module's tests (each starts from a fresh copy)."""
    mesh = make_mesh(MeshConfig())
    state, shardings = create_train_state(
        toy.init, toy.axes, make_optimizer(OPT), 0, mesh, compiler_options=toy.compiler_options
    )
    step, sharding = make_step(toy, shardings, mesh)
    return types.SimpleNamespace(state=state, shardings=shardings, mesh=mesh, step=step, sharding=sharding)


def test_metrics_report_loss_tokens_grad_norm_and_lr(toy, f32):
    batch = toy.batch

    @functools.partial(jax.jit, compiler_options=toy.compiler_options)
    def loss_and_norm(params):
        loss, grads = jax.value_and_grad(lambda p: toy.loss(p, batch, toy.cfg)[0])(params)
        return loss, optax.tree.norm(grads)

    expected_loss, expected_norm = loss_and_norm(f32.state.params)
    state, metrics = f32.step(fresh_copy(f32.state), shard_batch(batch, f32.sharding))
    assert float(metrics["loss"]) == pytest.approx(float(expected_loss), rel=1e-5)
    assert int(metrics["n_tokens"]) == int(batch["loss_mask"].sum()) == 16
    assert float(metrics["grad_norm"]) == pytest.approx(float(expected_norm), rel=1e-4)
    assert float(metrics["lr"]) == 0.0  # first warmup step
    assert int(state.step) == 1
    _, metrics = f32.step(state, shard_batch(batch, f32.sharding))
    assert float(metrics["lr"]) == pytest.approx(0.025)


def test_loss_falls_on_a_memorisation_batch(toy, f32):
    state, batch = fresh_copy(f32.state), shard_batch(toy.batch, f32.sharding)
    losses = []
    for _ in range(25):
        state, metrics = f32.step(state, batch)
        losses.append(float(metrics["loss"]))
    assert losses[-1] < 0.3 * losses[0]


def test_targets_outside_the_loss_mask_change_nothing(toy, f32):
    batch = toy.batch
    changed = dict(batch, targets=np.where(batch["loss_mask"] == 1, batch["targets"], 0))
    _, a = f32.step(fresh_copy(f32.state), shard_batch(batch, f32.sharding))
    _, b = f32.step(fresh_copy(f32.state), shard_batch(changed, f32.sharding))
    assert float(a["loss"]) == float(b["loss"]) and float(a["grad_norm"]) == float(b["grad_norm"])


def test_bf16_compute_keeps_f32_master_params(toy, f32):
    bf16_step, _ = make_step(toy, f32.shardings, f32.mesh, compute_dtype=jnp.bfloat16)
    batch = shard_batch(toy.batch, f32.sharding)
    new, metrics = bf16_step(fresh_copy(f32.state), batch)
    _, metrics32 = f32.step(fresh_copy(f32.state), batch)
    assert {x.dtype for x in jax.tree.leaves(new.params)} == {jnp.dtype(jnp.float32)}
    assert float(metrics["loss"]) == pytest.approx(float(metrics32["loss"]), rel=2e-2)
    assert float(metrics["loss"]) != float(metrics32["loss"])  # it really ran in bf16


def test_kernels_xla_cannot_partition_and_split_sequences_get_a_blockwise_kernel():
    splash, xla = model.ModelConfig.tiny(attention_impl="splash"), model.ModelConfig.tiny(attention_impl="xla")
    eight = AbstractMesh((2, 2, 2, 1, 1), MESH_AXES)  # the 8-device runs: tests/parallel/test_sharded_attention.py
    assert callable(sft_step.mesh_attention_kernel(splash, eight))
    assert callable(sft_step.mesh_attention_kernel(xla.replace(attention_impl="blocked"), eight))
    assert sft_step.mesh_attention_kernel(splash, make_mesh(MeshConfig())) is None  # one device: the model's own
    assert sft_step.mesh_attention_kernel(xla, eight) is None  # XLA partitions its own attention
    # a context axis: ring / all-gather attention whatever the impl (tests/parallel/test_context_parallel.py)
    assert callable(sft_step.mesh_attention_kernel(xla, AbstractMesh((2, 1, 1, 1, 4), MESH_AXES)))


def test_the_kernel_is_bound_to_losses_that_take_it(toy):
    splash, fsdp8 = model.ModelConfig.tiny(attention_impl="splash"), AbstractMesh((1, 8, 1, 1, 1), MESH_AXES)
    kernel = sft_step.mesh_attention_kernel(splash, fsdp8)
    assert sft_step.with_attention_kernel(sft_step.sft_loss, kernel).keywords == {"attention_kernel": kernel}
    assert sft_step.with_attention_kernel(sft_step.sft_loss, None) is sft_step.sft_loss
    with pytest.warns(UserWarning, match="takes no `attention_kernel`"):
        assert sft_step.with_attention_kernel(toy.loss, kernel) is toy.loss  # runs, with the model's own attention


def test_rows_go_into_the_balanced_context_order_only_for_losses_that_run_the_context_kernel(toy):
    cfg, context4 = model.ModelConfig.tiny(), AbstractMesh((2, 1, 1, 1, 4), MESH_AXES)
    assert sft_step.mesh_loss(sft_step.sft_loss, cfg, context4).__name__ == "balanced"
    # the model's own attention masks by position in the row as held: the rows keep their order
    with pytest.warns(UserWarning, match="takes no `attention_kernel`"):
        assert sft_step.mesh_loss(toy.loss, cfg, context4) is toy.loss
    fsdp8 = AbstractMesh((1, 8, 1, 1, 1), MESH_AXES)  # no context axis: no permutation
    assert sft_step.mesh_loss(sft_step.sft_loss, cfg.replace(attention_impl="blocked"), fsdp8).func is sft_step.sft_loss
