"""Context parallelism on 8 fake CPU devices against one device; prints one JSON line.

Run by `test_context_parallel.py` and `test_context_parallel_parts.py` in a subprocess whose `XLA_FLAGS` asks for 8
host devices (the flag must be set before JAX starts). Arguments: the parts to run.

  steps   the SFT loss and gradients (`train.sft.step.mesh_loss`, what the step differentiates) and one SFT step, and
          the RL loss and gradients, one RL update and the old-log-prob pass (`make_rl_step`), of packed rows on
          meshes with context = 4 (ring and all-gather attention) and of the blocked kernel on a mesh without
          one, against `attention_impl: xla` on one device.
  splash  splash attention over context = 4 (all-gather, `q_seq_shards`; interpreted off TPU) against the XLA
          reference, forward and gradients, and the SFT loss and gradients of an `attention_impl: splash` model on
          (data=2, fsdp=2, context=2) against `attention_impl: xla` on one device.
  memory  the compiled SFT step's bytes per device on context = 1, 2, 4, 8 (the other axes 1), and `plan`'s.
  decode  greedy tokens of the generation engine on a mesh with context = 4 against one device, and how its KV
          cache is split.
  hlo     the array shapes in the compiled forward and backward of the blocked kernel (one device), of ring
          attention (context = 8) and of the SFT loss of a one-layer `attention_impl: blocked` model (one device)
          at seq = 8192.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import re
import sys

import jax
import jax.numpy as jnp
import numpy as np

from jaxseeker import model
from jaxseeker.generation import Engine, SamplingConfig
from jaxseeker.model import layers
from jaxseeker.model.blocked_attention import blocked_attention, row_coords
from jaxseeker.parallel import MeshConfig, batch_sharding, logical_sharding, make_mesh, param_shardings, shard_batch
from jaxseeker.parallel.context_layout import context_layout, from_balanced, to_balanced
from jaxseeker.parallel.rules import DEFAULT_RULES
from jaxseeker.parallel.sharded_attention import context_attention
from jaxseeker.planning.command import make_plan
from jaxseeker.train.optimizer import OptimizerConfig, make_optimizer
from jaxseeker.train.rl.rows import packed_episode_rows
from jaxseeker.train.rl.step import RLStepConfig, make_rl_step, rl_loss
from jaxseeker.train.sft.step import make_sft_step, mesh_loss, sft_loss
from jaxseeker.train.state import abstract_train_state, train_state_from_params

os.environ["JAXSEEKER_INTERPRET_KERNELS"] = "1"  # the splash cases interpret the Pallas TPU kernel on CPU

CFG = model.ModelConfig.tiny(vocab_size=128)  # 4 heads, 2 kv heads, head_dim 16, 2 layers, float32
ROWS, SEQ = 4, 64  # 64 = 2 × 4 context shards × chunks of 8 tokens: the balanced order applies
MESHES = {  # name: (mesh, the model's fields)
    "context4_ring": (MeshConfig(data=2, fsdp=1, context=4), {"context_attention": "ring"}),
    "context4_all_gather": (MeshConfig(data=2, fsdp=1, context=4), {"context_attention": "all_gather"}),
    "tensor2_context4_ring": (MeshConfig(data=1, fsdp=1, tensor=2, context=4), {"context_attention": "ring"}),
    # no context axis: the blocked kernel on each device's rows and heads
    "data2_fsdp2_tensor2_blocked": (MeshConfig(data=2, fsdp=2, tensor=2), {"attention_impl": "blocked"}),
}
# Adam turns gradient noise d into update noise up to lr · d / (4 · eps) where a gradient entry is near 0
# (see sharded_step_worker.py): lr 1e-4, eps 1e-6 keep it far under the 1e-5 tolerance.
OPT = OptimizerConfig(lr=1e-4, warmup_steps=0, total_steps=10, eps=1e-6)


def sft_batch() -> dict[str, np.ndarray]:
    """Rows of packed documents whose boundaries fall inside the context chunks, then padding."""
    rng = np.random.default_rng(0)
    tokens = rng.integers(1, CFG.vocab_size, (ROWS, SEQ + 1))
    segment_ids, positions = np.zeros((ROWS, SEQ), np.int32), np.zeros((ROWS, SEQ), np.int32)
    for row in range(ROWS):
        bounds = [0, 11 + 5 * row, 37 + row, 58 - row]
        for segment, (start, end) in enumerate(zip(bounds, bounds[1:]), 1):
            segment_ids[row, start:end], positions[row, start:end] = segment, np.arange(end - start)
    loss_mask = ((positions >= 2) & (segment_ids > 0)).astype(np.int32)
    return {
        "tokens": tokens[:, :-1],
        "targets": tokens[:, 1:],
        "loss_mask": loss_mask,
        "segment_ids": segment_ids,
        "positions": positions,
    }


def rl_batch() -> dict[str, np.ndarray]:
    """Packed RL rows: episodes of 9 to 40 tokens with prompt, policy and observation spans, random advantages."""
    rng = np.random.default_rng(1)
    ids, masks, logps, advantages = [], [], [], []
    for length in (40, 23, 31, 9, 17, 26, 12, 35):
        mask = np.zeros(length, np.int32)
        mask[length // 3 : 2 * length // 3] = 1
        mask[-3:] = 1
        ids.append(rng.integers(1, CFG.vocab_size, length))
        masks.append(mask)
        logps.append(-rng.uniform(0.1, 3.0, length))
        advantages.append(float(rng.normal()))
    rows = packed_episode_rows(ids, masks, logps, advantages, SEQ, row_multiple=ROWS)
    assert rows["tokens"].shape == (ROWS, SEQ), rows["tokens"].shape
    return rows


def max_diff(a, b) -> float:
    """Largest absolute difference over two pytrees of arrays."""
    return max(
        float(np.max(np.abs(np.asarray(x) - np.asarray(y)))) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b))
    )


def loss_and_grads(loss_fn, cfg, params, batch, mesh):
    """(loss, grads) of `loss_fn` as the step over `mesh` computes it, params and batch placed by the rules."""
    fn = jax.jit(jax.value_and_grad(mesh_loss(loss_fn, cfg, mesh), has_aux=True), static_argnums=2)
    params = jax.device_put(params, param_shardings(cfg, mesh))
    (loss, _), grads = fn(params, shard_batch(batch, batch_sharding(mesh, batch["tokens"].shape)), cfg)
    return float(loss), jax.device_get(grads)


def sft_step_params(cfg, params, batch, mesh):
    """(loss, params) after one SFT step on `mesh`."""
    tx = make_optimizer(OPT)
    state, shardings = train_state_from_params(params, model.param_axes(cfg), tx, 0, mesh)
    bsh = batch_sharding(mesh, (ROWS, SEQ))
    state, metrics = make_sft_step(cfg, tx, mesh=mesh, state_shardings=shardings, batch_sharding=bsh)(
        state, shard_batch(batch, bsh)
    )
    return float(metrics["loss"]), jax.device_get(state.params)


def rl_step_results(cfg, params, batch, mesh):
    """(old log-probs, loss, params) of the RL step's log-prob pass and one update on `mesh`."""
    fns = make_rl_step(cfg, RLStepConfig(), OPT, mesh=mesh, rows=ROWS, seq=SEQ)
    state, _ = train_state_from_params(params, model.param_axes(cfg), make_optimizer(OPT), 0, mesh)
    placed = shard_batch(batch, fns.batch_sharding)
    logp = np.asarray(fns.logprobs(state.params, placed))
    state, metrics = fns.update(state, shard_batch({**batch, "old_logp": logp}, fns.batch_sharding))
    return logp, float(metrics["loss"]), jax.device_get(state.params)


def steps() -> dict:
    """Every mesh of `MESHES` against one device (attention_impl xla there): losses, gradients, one step each."""
    params = jax.device_get(jax.jit(model.init_params, static_argnums=0)(CFG, jax.random.PRNGKey(0)))
    sft, rl = sft_batch(), rl_batch()
    rl_fn = functools.partial(rl_loss, step_cfg=RLStepConfig())
    one = make_mesh(MeshConfig(fsdp=1), jax.devices()[:1])
    want = {
        "sft": loss_and_grads(sft_loss, CFG, params, sft, one),
        "rl": loss_and_grads(rl_fn, CFG, params, rl, one),
        "sft_step": sft_step_params(CFG, params, sft, one),
        "rl_step": rl_step_results(CFG, params, rl, one),
    }
    report = {
        "grad_scale": max(float(np.max(np.abs(g))) for g in jax.tree.leaves(want["sft"][1])),
        "rl_grad_scale": max(float(np.max(np.abs(g))) for g in jax.tree.leaves(want["rl"][1])),
    }
    for name, (mesh_cfg, fields) in MESHES.items():
        cfg, mesh = dataclasses.replace(CFG, **fields), make_mesh(mesh_cfg)
        sft_got, rl_got = loss_and_grads(sft_loss, cfg, params, sft, mesh), loss_and_grads(rl_fn, cfg, params, rl, mesh)
        step_loss, step_params = sft_step_params(cfg, params, sft, mesh)
        logp, rl_step_loss, rl_params = rl_step_results(cfg, params, rl, mesh)
        report[name] = {
            "sft_loss_diff": abs(sft_got[0] - want["sft"][0]),
            "sft_grad_diff": max_diff(sft_got[1], want["sft"][1]),
            "rl_loss_diff": abs(rl_got[0] - want["rl"][0]),
            "rl_grad_diff": max_diff(rl_got[1], want["rl"][1]),
            "sft_step_loss_diff": abs(step_loss - want["sft_step"][0]),
            "sft_step_param_diff": max_diff(step_params, want["sft_step"][1]),
            "params_moved": max_diff(step_params, params),
            "logprobs_diff": max_diff(logp, want["rl_step"][0]),
            "rl_step_loss_diff": abs(rl_step_loss - want["rl_step"][1]),
            "rl_step_param_diff": max_diff(rl_params, want["rl_step"][2]),
        }
    return report


def splash() -> dict:
    """Splash across the context axis against the XLA reference (module docstring)."""
    b, s, h, kvh, d = 2, 512, 4, 2, 64  # 512 / 4 = 128 tokens per device: one splash tile
    rng = np.random.default_rng(4)
    q = rng.standard_normal((b, s, h, d), np.float32)
    k, v = (rng.standard_normal((b, s, kvh, d), np.float32) for _ in range(2))
    segment_ids = np.zeros((b, s), np.int32)
    segment_ids[0, :130], segment_ids[0, 130:500], segment_ids[1, :300], segment_ids[1, 300:] = 1, 2, 1, 2
    real = segment_ids != 0
    cot = rng.standard_normal(q.shape).astype(np.float32) * real[:, :, None, None]
    mesh = make_mesh(MeshConfig(data=2, fsdp=1, context=4))
    layout = context_layout(mesh, DEFAULT_RULES, s)
    attention = context_attention("all_gather", mesh, impl="splash")

    def whole_rows(q, k, v):  # the kernel on rows in the balanced order, its output back in the row's order
        return from_balanced(attention(*(to_balanced(x, layout) for x in (q, k, v, segment_ids))), layout)

    def reference(q, k, v):
        return layers.dot_attention(
            q, k, v, layers.attention_mask(np.arange(s)[None].repeat(b, 0), segment_ids, segment_ids)
        )

    got, want = (np.asarray(jax.jit(f)(q, k, v)) for f in (whole_rows, reference))
    grads = [
        jax.jit(jax.grad(lambda q, k, v, f=f: jnp.sum(f(q, k, v) * cot), argnums=(0, 1, 2)))(q, k, v)
        for f in (whole_rows, reference)
    ]
    cfg = dataclasses.replace(CFG, attention_impl="splash")
    params = jax.device_get(jax.jit(model.init_params, static_argnums=0)(cfg, jax.random.PRNGKey(0)))
    batch = {key: np.repeat(x, 256 // SEQ, axis=1)[:, :256] for key, x in sft_batch().items()}
    batch["positions"] = np.concatenate([np.arange(256)[None]] * ROWS)  # one document of 256 per row
    batch["segment_ids"] = np.ones((ROWS, 256), np.int32)
    one = make_mesh(MeshConfig(fsdp=1), jax.devices()[:1])
    want_loss, want_grads = loss_and_grads(sft_loss, dataclasses.replace(cfg, attention_impl="xla"), params, batch, one)
    mesh = make_mesh(MeshConfig(2, 2, 1, 1, 2))
    got_loss, got_grads = loss_and_grads(sft_loss, cfg, params, batch, mesh)
    step_jaxpr = jax.make_jaxpr(lambda p, b: mesh_loss(sft_loss, cfg, mesh)(p, b, cfg))(params, batch)
    return {
        "out_diff": float(np.max(np.abs(got - want)[real])),
        "out_scale": float(np.max(np.abs(want))),
        "grad_diff": max(float(np.max(np.abs(a - b))) for a, b in zip(*grads)),
        "kernel_runs_splash": "pallas_call" in str(jax.make_jaxpr(whole_rows)(q, k, v)),
        "step_runs_splash": "pallas_call" in str(step_jaxpr),
        "sft_loss_diff": abs(got_loss - want_loss),
        "sft_grad_diff": max_diff(got_grads, want_grads),
    }


MEMORY_SHAPE = {
    "model_type": "qwen3",
    "vocab_size": 512,
    "hidden_size": 128,
    "intermediate_size": 256,
    "num_layers": 4,
    "num_heads": 4,
    "num_kv_heads": 2,
    "head_dim": 32,
    "remat": "full",
    "attention_impl": "blocked",
}
MEMORY_ROWS, MEMORY_SEQ = 2, 8192


def compiled_bytes(cfg, mesh) -> int:
    """Peak device bytes XLA assigns to the SFT step: arguments + outputs − donated aliases + temporaries."""
    tx = make_optimizer(OptimizerConfig(total_steps=100))
    state = abstract_train_state(functools.partial(model.init_params, cfg), model.param_axes(cfg), tx, mesh)
    bsh = batch_sharding(mesh, (MEMORY_ROWS, MEMORY_SEQ))
    step = make_sft_step(
        cfg, tx, mesh=mesh, state_shardings=jax.tree.map(lambda x: x.sharding, state), batch_sharding=bsh
    )
    batch = {
        k: jax.ShapeDtypeStruct((MEMORY_ROWS, MEMORY_SEQ), np.int32, sharding=bsh)
        for k in ("tokens", "targets", "loss_mask", "segment_ids", "positions")
    }
    m = step.lower(state, batch).compile().memory_analysis()
    return m.argument_size_in_bytes + m.output_size_in_bytes - m.alias_size_in_bytes + m.temp_size_in_bytes


def memory() -> dict:
    """Compiled and planned bytes per device of the SFT step on context = 1, 2, 4, 8, per context attention."""
    report = {}
    for strategy in ("ring", "all_gather"):
        shape = {**MEMORY_SHAPE, "context_attention": strategy}
        cfg = model.ModelConfig(**shape)
        recipe = {
            "name": "memory",
            "model": shape,
            "data": {"seq_len": MEMORY_SEQ, "batch_size": MEMORY_ROWS},
            "train": {"train_files": ["unused.jsonl"], "tokenizer": "unused", "chunk_size": 512},
        }
        for n in (1, 2, 4, 8):
            mesh_cfg = MeshConfig(data=1, fsdp=1, context=n)
            planned = make_plan({**recipe, "mesh": dataclasses.asdict(mesh_cfg)})["stages"][0]["memory"]["peak"]
            report[f"{strategy}_{n}"] = {
                "compiled": compiled_bytes(cfg, make_mesh(mesh_cfg, jax.devices()[:n])),
                "planned": planned,
            }
    return report


HLO_SEQ, HLO_HEADS, HLO_KV_HEADS, HLO_HEAD_DIM = 8192, 2, 1, 8


def hlo_shapes(fn, *args) -> list[list[int]]:
    """The distinct array shapes (dimensions) in the compiled program of `fn(*args)`."""
    text = jax.jit(fn).lower(*args).compile().as_text()
    return sorted(
        {
            tuple(int(n) for n in dims.split(",") if n)
            for dims in re.findall(r"\b(?:pred|s32|u32|f32|bf16|s8|u8)\[([\d,]*)\]", text)
        }
    )


def hlo() -> dict:
    """Shapes in the compiled forward + backward of blocked attention (one device) and ring attention over
    context = 8, of one row of `HLO_SEQ` tokens (two packed documents)."""
    q = jax.ShapeDtypeStruct((1, HLO_SEQ, HLO_HEADS, HLO_HEAD_DIM), jnp.float32)
    kv = jax.ShapeDtypeStruct((1, HLO_SEQ, HLO_KV_HEADS, HLO_HEAD_DIM), jnp.float32)
    seg = jax.ShapeDtypeStruct((1, HLO_SEQ), jnp.int32)

    def loss(attention, q, k, v, segment_ids):
        return jnp.sum(attention(q, k, v, segment_ids))

    def blocked(q, k, v, segment_ids):
        return blocked_attention(q, k, v, row_coords(segment_ids))

    report = {
        "blocked": hlo_shapes(jax.value_and_grad(functools.partial(loss, blocked), argnums=(0, 1, 2)), q, kv, kv, seg)
    }
    mesh = make_mesh(MeshConfig(data=1, fsdp=1, context=8))
    ring = context_attention("ring", mesh)

    def place(x, axes):
        return jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=logical_sharding(axes, DEFAULT_RULES, mesh, x.shape))

    args = (
        place(q, ("batch", "seq", "heads", None)),
        place(kv, ("batch", "seq", "kv_heads", None)),
        place(kv, ("batch", "seq", "kv_heads", None)),
        place(seg, ("batch", "seq")),
    )
    report["ring"] = hlo_shapes(jax.value_and_grad(functools.partial(loss, ring), argnums=(0, 1, 2)), *args)
    cfg = model.ModelConfig.tiny(vocab_size=64, num_layers=1, attention_impl="blocked")
    params = jax.eval_shape(functools.partial(model.init_params, cfg), jax.random.PRNGKey(0))
    batch = {key: seg for key in ("tokens", "targets", "loss_mask", "segment_ids", "positions")}
    report["blocked_sft_loss"] = hlo_shapes(jax.grad(lambda p, b: sft_loss(p, b, cfg)[0]), params, batch)
    return report


def decode() -> dict:
    """The engine's greedy tokens on (data=2, context=4) and on one device, and its cache's layout on the mesh."""
    cfg = model.ModelConfig.tiny(vocab_size=128)
    params = jax.device_get(jax.jit(model.init_params, static_argnums=0)(cfg, jax.random.PRNGKey(2)))
    prompts = [list(np.random.default_rng(3).integers(1, cfg.vocab_size, n)) for n in (5, 19)]
    tokens, k_cache = {}, {}
    for name, mesh in (("one_device", None), ("context4", make_mesh(MeshConfig(data=2, fsdp=1, context=4)))):
        engine = Engine(
            params,
            cfg,
            slots=2,
            max_len=64,
            steps_per_call=4,
            prefill_chunk=8,
            mesh=mesh,
            sampling=SamplingConfig(temperature=0.0),
        )
        for i, prompt in enumerate(prompts):
            engine.submit(str(i), [int(t) for t in prompt], max_new_tokens=12)
        out = {}
        while engine.has_work():
            out.update({e.request_id: e.tokens for e in engine.step()})
        tokens[name], k_cache[name] = [out["0"], out["1"]], engine._cache.k[0]  # layer 0: [parts, pages, kv, dim, page]
    k = k_cache["context4"]
    return {
        "tokens": tokens,
        "k_spec": str(k.sharding.spec),
        "k_shard_shape": list(k.addressable_shards[0].data.shape),
        "k_shape": list(k.shape),
    }


def main(parts: list[str]) -> None:
    """The given parts (module docstring), one after the other in this interpreter; one JSON line keyed by part."""
    assert jax.device_count() == 8, jax.devices()
    run = {"steps": steps, "splash": splash, "memory": memory, "decode": decode, "hlo": hlo}
    print(json.dumps({part: run[part]() for part in parts}))


if __name__ == "__main__":
    main(sys.argv[1:])
