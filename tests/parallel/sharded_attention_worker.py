"""`shard_attention` on 8 fake CPU devices against the unsharded kernel; prints one JSON line.

Run by `test_sharded_attention.py` in a subprocess whose `XLA_FLAGS` asks for 8 host devices (the flag
must be set before JAX starts). The kernel is the model's XLA attention (`layers.dot_attention` with the
mask of `segment_ids`), so the sharded result can be compared to the same function on whole arrays. Per
case: the largest output and gradient differences, the block shapes the kernel was traced with, the
partition specs used, and the collective ops in the compiled program. One more case runs the Pallas splash
kernel (interpreted) blockwise against itself on whole arrays; the last one trains: one SFT step of a tiny
`attention_impl: splash` model on a (data=2, fsdp=2, tensor=2) mesh against the XLA attention on one device,
with the splash operands that step traces and the whole-batch attention operands its compiled program gathers,
and the splash operands the RL update and old-log-prob pass trace on that mesh.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import re

import jax
import jax.extend as jex
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding

from jaxseeker import model
from jaxseeker.model import layers
from jaxseeker.parallel import MeshConfig, logical_sharding, make_mesh
from jaxseeker.parallel.rules import DEFAULT_RULES, batch_sharding, shard_batch
from jaxseeker.parallel.sharded_attention import attention_specs, shard_attention
from jaxseeker.train.optimizer import OptimizerConfig, make_optimizer
from jaxseeker.train.rl.rows import ROW_KEYS
from jaxseeker.train.rl.step import RLStepConfig, make_rl_step
from jaxseeker.train.sft.step import make_sft_step
from jaxseeker.train.state import abstract_train_state, train_state_from_params

os.environ["JAXSEEKER_INTERPRET_KERNELS"] = "1"  # the splash cases interpret the Pallas TPU kernel on CPU

# name: (mesh, batch, heads, kv_heads, whether the mesh is given as the context mesh instead of an argument)
CASES = {
    "data2_fsdp2_tensor2": (MeshConfig(2, 2, 2, 1), 4, 4, 2, False),
    "fsdp8": (MeshConfig(1, 8, 1, 1), 8, 4, 2, False),
    "tensor4_kv2": (MeshConfig(1, 2, 4, 1), 4, 8, 2, False),  # kv heads do not split 4 ways: heads stay whole
    "context_mesh": (MeshConfig(2, 1, 4, 1), 2, 8, 4, True),
}
SEQ, HEAD_DIM = 16, 8
traced: list[list[int]] = []  # q block shapes seen by the kernel, appended while tracing


def xla_attention(q, k, v, segment_ids):
    """Causal attention within segments with the model's XLA reference (records its q block shape)."""
    traced.append(list(q.shape))
    q_index = jnp.broadcast_to(jnp.arange(q.shape[1])[None, :], segment_ids.shape)
    return layers.dot_attention(q, k, v, layers.attention_mask(q_index, segment_ids, segment_ids), "xla")


def inputs(batch: int, heads: int, kv_heads: int) -> tuple[np.ndarray, ...]:
    """Random q, k, v and two packed segments then padding per row."""
    rng = np.random.default_rng(batch * 100 + heads)
    q = rng.standard_normal((batch, SEQ, heads, HEAD_DIM), np.float32)
    k, v = (rng.standard_normal((batch, SEQ, kv_heads, HEAD_DIM), np.float32) for _ in range(2))
    segment_ids = np.zeros((batch, SEQ), np.int32)
    for row in range(batch):
        first = 4 + row % 5
        segment_ids[row, :first], segment_ids[row, first : SEQ - 2] = 1, 2
    return q, k, v, segment_ids


def loss(attention, q, k, v, segment_ids, weights):
    """A scalar of the output on real query rows (padding rows are arbitrary in every kernel)."""
    out = attention(q, k, v, segment_ids)  # [batch, seq, heads, head_dim]
    return jnp.sum(out * weights * (segment_ids > 0)[:, :, None, None])


def run_case(mesh_cfg: MeshConfig, batch: int, heads: int, kv_heads: int, in_context: bool) -> dict:
    """Sharded against whole-array attention: output and gradient differences, block shapes, specs, collectives."""
    mesh = make_mesh(mesh_cfg)
    q, k, v, segment_ids = inputs(batch, heads, kv_heads)
    weights = np.random.default_rng(1).standard_normal(q.shape, np.float32)
    want = xla_attention(q, k, v, segment_ids)
    want_grads = jax.grad(loss, argnums=(1, 2, 3))(xla_attention, q, k, v, segment_ids, weights)

    def place(x, axes):
        return jax.device_put(x, logical_sharding(axes, DEFAULT_RULES, mesh, x.shape))

    args = (
        place(q, ("batch", "seq", "heads", "head_dim")),
        place(k, ("batch", "seq", "kv_heads", "head_dim")),
        place(v, ("batch", "seq", "kv_heads", "head_dim")),
        place(segment_ids, ("batch", "seq")),
    )
    sharded = shard_attention(xla_attention, None if in_context else mesh)
    forward = jax.jit(sharded)
    backward = jax.jit(jax.grad(lambda *a: loss(sharded, *a, weights), argnums=(0, 1, 2)))
    traced.clear()
    if in_context:
        with jax.set_mesh(mesh):
            got, grads = forward(*args), backward(*args)
            hlo = forward.lower(*args).compile().as_text()
    else:
        got, grads = forward(*args), backward(*args)
        hlo = forward.lower(*args).compile().as_text()
    specs = attention_specs(mesh, q.shape, k.shape)
    return {
        "out_diff": float(np.max(np.abs(np.asarray(got) - np.asarray(want)))),
        "grad_diff": max(float(np.max(np.abs(np.asarray(g) - np.asarray(w)))) for g, w in zip(grads, want_grads)),
        "out_scale": float(np.max(np.abs(np.asarray(want)))),
        "block_shapes": sorted({tuple(s) for s in traced}),
        "specs": {name: str(spec) for name, spec in specs._asdict().items()},
        "out_spec": str(got.sharding.spec) if isinstance(got.sharding, NamedSharding) else None,
        "collectives": sorted(set(re.findall(r"\b(all-gather|all-reduce|all-to-all|collective-permute)\b", hlo))),
    }


def splash_case() -> float:
    """Largest difference on real query rows between the Pallas splash kernel (interpreted on CPU) on whole arrays
    and blockwise on a (data=2, tensor=4) mesh: the kernel `layers.splash_attention` would route through this."""
    mesh = make_mesh(MeshConfig(2, 1, 4, 1))
    rng = np.random.default_rng(2)
    q, k, v = (rng.standard_normal((2, 128, 4, 64), np.float32) for _ in range(3))  # [batch, seq, heads, head_dim]
    segment_ids = np.ones((2, 128), np.int32)
    segment_ids[:, 100:] = 0
    want = np.asarray(layers.splash_attention(q, k, v, segment_ids))
    got = np.asarray(jax.jit(shard_attention(layers.splash_attention, mesh))(q, k, v, segment_ids))
    return float(np.max(np.abs(got - want)[:, :100]))


SPLASH_CFG = model.ModelConfig.tiny(vocab_size=64, attention_impl="splash")  # 4 heads, 2 kv heads, head_dim 16
SPLASH_ROWS, SPLASH_SEQ = 4, 128  # 128: the kernel's tile
# lr 1e-4, eps 1e-6: Adam keeps reduction-order noise between meshes far under 1e-5 (see sharded_step_worker.py)
SPLASH_OPT = OptimizerConfig(lr=1e-4, warmup_steps=0, total_steps=10, eps=1e-6)


def splash_sft_batch() -> dict[str, np.ndarray]:
    """Rows of two packed documents then padding, `[rows, seq]` each; loss on every real token but the first."""
    tokens = np.random.default_rng(3).integers(1, SPLASH_CFG.vocab_size, (SPLASH_ROWS, SPLASH_SEQ + 1))
    segment_ids = np.zeros((SPLASH_ROWS, SPLASH_SEQ), np.int32)
    positions = np.zeros((SPLASH_ROWS, SPLASH_SEQ), np.int32)
    for row in range(SPLASH_ROWS):
        first = 40 + 7 * row
        segment_ids[row, :first], segment_ids[row, first:120] = 1, 2
        positions[row, :first], positions[row, first:120] = np.arange(first), np.arange(120 - first)
    loss_mask = ((positions >= 1) & (segment_ids > 0)).astype(np.int32)
    return {
        "tokens": tokens[:, :-1],
        "targets": tokens[:, 1:],
        "loss_mask": loss_mask,
        "segment_ids": segment_ids,
        "positions": positions,
    }


def pallas_operand_shapes(jaxpr: jex.core.Jaxpr) -> set[tuple[int, ...]]:
    """Shapes of the q / k / v-like operands (last axis head_dim) of every Pallas call in `jaxpr` and its
    sub-jaxprs (scan, remat, shard_map, custom VJP): the blocks the splash kernel runs on."""
    found = set()
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "pallas_call":
            found.update(tuple(v.aval.shape) for v in eqn.invars if v.aval.shape[-1:] == (SPLASH_CFG.head_dim,))
        for value in eqn.params.values():
            for sub in value if isinstance(value, (tuple, list)) else (value,):
                if isinstance(sub, jex.core.ClosedJaxpr):
                    found |= pallas_operand_shapes(sub.jaxpr)
                elif isinstance(sub, jex.core.Jaxpr):
                    found |= pallas_operand_shapes(sub)
    return found


def sft_step_on(cfg: model.ModelConfig, params, mesh) -> tuple:
    """(params after one SFT step, loss, the step's splash operand shapes, all-gather result shapes) on `mesh`."""
    tx = make_optimizer(SPLASH_OPT)
    state, shardings = train_state_from_params(params, model.param_axes(cfg), tx, 0, mesh)
    sharding = batch_sharding(mesh, (SPLASH_ROWS, SPLASH_SEQ))
    step = make_sft_step(cfg, tx, mesh=mesh, state_shardings=shardings, batch_sharding=sharding)
    batch = shard_batch(splash_sft_batch(), sharding)
    blocks = pallas_operand_shapes(jax.make_jaxpr(step)(state, batch).jaxpr)
    hlo = step.lower(state, batch).compile().as_text()
    gathers = {
        tuple(int(n) for n in dims.split(",") if n) for dims in re.findall(r"= \w+\[([\d,]*)\]\S* all-gather\(", hlo)
    }
    state, metrics = step(state, batch)
    return state.params, float(metrics["loss"]), blocks, gathers


def splash_sft_case() -> dict:
    """One SFT step of the tiny splash model on (data=2, fsdp=2, tensor=2) against `attention_impl: xla` on one
    device: loss and param differences, the splash operand shapes, and the all-gathers of a whole-batch q, k or v
    (in the model's `[batch, seq, heads, head_dim]` or the kernel's `[batch, heads, seq, head_dim]` layout)."""
    cfg = SPLASH_CFG
    params = jax.device_get(jax.jit(model.init_params, static_argnums=0)(cfg, jax.random.PRNGKey(0)))
    one_device = make_mesh(MeshConfig(1, 1, 1, 1), jax.devices()[:1])
    want_params, want_loss, _, _ = sft_step_on(dataclasses.replace(cfg, attention_impl="xla"), params, one_device)
    got_params, got_loss, blocks, gathers = sft_step_on(cfg, params, make_mesh(MeshConfig(2, 2, 2, 1)))
    whole = {(SPLASH_ROWS, SPLASH_SEQ, heads, cfg.head_dim) for heads in (cfg.num_heads, cfg.num_kv_heads)}
    whole |= {(SPLASH_ROWS, heads, SPLASH_SEQ, cfg.head_dim) for heads in (cfg.num_heads, cfg.num_kv_heads)}
    return {
        "loss": got_loss,
        "loss_diff": abs(got_loss - want_loss),
        "param_diff": max_diff(got_params, want_params),
        "params_moved": max_diff(got_params, params),
        "kernel_operands": sorted(blocks),
        "whole_operand_gathers": sorted(gathers & whole),
    }


def splash_rl_case() -> dict[str, list]:
    """The splash operand shapes of the RL update and old-log-prob pass on (data=2, fsdp=2, tensor=2), traced
    from abstract inputs (no compile)."""
    cfg, mesh = SPLASH_CFG, make_mesh(MeshConfig(2, 2, 2, 1))
    fns = make_rl_step(cfg, RLStepConfig(), SPLASH_OPT, mesh=mesh, rows=SPLASH_ROWS, seq=SPLASH_SEQ)
    state = abstract_train_state(
        functools.partial(model.init_params, cfg), model.param_axes(cfg), make_optimizer(SPLASH_OPT), mesh
    )
    batch = {
        key: jax.ShapeDtypeStruct(
            (SPLASH_ROWS, SPLASH_SEQ),
            jnp.float32 if key in ("old_logp", "advantages") else jnp.int32,
            sharding=fns.batch_sharding,
        )
        for key in ROW_KEYS
    }
    return {
        "update": sorted(pallas_operand_shapes(jax.jit(fns.update).trace(state, batch).jaxpr.jaxpr)),
        "logprobs": sorted(pallas_operand_shapes(fns.logprobs.trace(state.params, batch).jaxpr.jaxpr)),
    }


def max_diff(a, b) -> float:
    """Largest absolute difference over two pytrees of arrays."""
    return max(
        float(np.max(np.abs(np.asarray(x) - np.asarray(y)))) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b))
    )


def main() -> None:
    """Every case; one JSON line."""
    assert jax.device_count() == 8, jax.devices()
    report = {name: run_case(*case) for name, case in CASES.items()}
    report["splash"] = splash_case()
    report["splash_sft_step"] = splash_sft_case()
    report["splash_rl_step"] = splash_rl_case()
    report["no_mesh"] = float(
        np.max(
            np.abs(
                np.asarray(shard_attention(xla_attention)(*inputs(2, 4, 2)))
                - np.asarray(xla_attention(*inputs(2, 4, 2)))
            )
        )
    )
    print(json.dumps(report))


if __name__ == "__main__":
    main()
