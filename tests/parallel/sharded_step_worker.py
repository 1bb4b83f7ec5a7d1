"""Sharded SFT steps on fake CPU devices against the single-device step; prints one JSON line.

Run by `test_sharded_sft_step.py` in a subprocess whose `XLA_FLAGS` asks for 8 host devices
(the flag must be set before JAX starts, so it cannot share the pytest process).

For each model (dense Qwen3-tiny, MoE Qwen3-tiny) the same params and packed batch go through two
steps on one device (from the params on the host) and on each mesh (from the params saved as an HF
checkpoint and loaded straight onto the mesh, each device reading its slice); the report holds, per mesh:
how the load placed and kept the weights, the largest loss and param
differences, the params / Adam moments whose sharding is not the one the rules give, and the
spec of every param. The dense case also checks the chunked default SFT loss against `masked_nll`
of the full logits, and restores a (2,2,2) checkpoint onto (1,8,1) shardings.
"""

from __future__ import annotations

import functools
import json
import sys
import tempfile

import jax
import numpy as np

from jaxseeker import losses, model
from jaxseeker.data.packing import ROW_KEYS
from jaxseeker.parallel import (
    DEFAULT_RULES,
    MeshConfig,
    batch_sharding,
    make_mesh,
    param_shardings,
    shard_batch,
    tree_shardings,
)
from jaxseeker.planning.command import make_plan
from jaxseeker.train.checkpoint import Checkpointer
from jaxseeker.train.optimizer import OptimizerConfig, make_optimizer
from jaxseeker.train.sft.step import make_sft_step, sft_loss
from jaxseeker.train.state import abstract_train_state, train_state_from_params

CASES = {
    "dense": (
        model.ModelConfig.tiny(),
        {"data8": MeshConfig(8, 1, 1, 1), "fsdp8": MeshConfig(1, 8, 1, 1), "mixed222": MeshConfig(2, 2, 2, 1)},
    ),
    "moe": (model.ModelConfig.tiny("qwen3_moe"), {"expert4_tensor2": MeshConfig(1, 1, 2, 4)}),
}
# Adam turns gradient noise d into update noise up to lr * d / (4 * eps) where a gradient entry is
# near 0; lr 1e-4 and eps 1e-6 keep reduction-order noise between meshes (d ~ 3e-8) near 1e-6,
# well under the 1e-5 tolerance, while each param still moves by ~2e-4 in two steps.
OPT = OptimizerConfig(lr=1e-4, warmup_steps=0, total_steps=10, eps=1e-6)


def packed_batch(vocab: int, batch: int = 8, seq: int = 16) -> dict[str, np.ndarray]:
    """Rows holding two packed segments then padding; loss from the third token of each segment on."""
    rng = np.random.default_rng(0)
    tokens = rng.integers(1, vocab, (batch, seq + 1))
    segment_ids = np.zeros((batch, seq), np.int32)
    positions = np.zeros((batch, seq), np.int32)
    for row in range(batch):
        first, second = 5 + row % 3, 6
        segment_ids[row, :first], segment_ids[row, first : first + second] = 1, 2
        positions[row, :first], positions[row, first : first + second] = np.arange(first), np.arange(second)
    loss_mask = ((positions >= 2) & (segment_ids > 0)).astype(np.int32)
    return dict(
        tokens=tokens[:, :-1], targets=tokens[:, 1:], loss_mask=loss_mask, segment_ids=segment_ids, positions=positions
    )


def two_steps(cfg, params, batch, mesh):
    """(state, losses, state shardings) after two SFT steps on `mesh`."""
    tx = make_optimizer(OPT)
    state, shardings = train_state_from_params(params, model.param_axes(cfg), tx, 0, mesh)
    sharding = batch_sharding(mesh, batch["tokens"].shape)
    step = make_sft_step(cfg, tx, mesh=mesh, state_shardings=shardings, batch_sharding=sharding)
    step_losses = []
    for _ in range(2):
        state, metrics = step(state, shard_batch(batch, sharding))
        step_losses.append(float(metrics["loss"]))
    return state, step_losses, shardings


def full_logits_loss(cfg, params, batch) -> float:
    """masked_nll of the full `[batch, seq, vocab]` logits: what the chunked default SFT loss must equal."""

    @jax.jit
    def loss(params, batch):
        logits = model.forward(
            params, batch["tokens"], cfg, positions=batch["positions"], segment_ids=batch["segment_ids"]
        )  # [batch, seq, vocab]
        return losses.masked_nll(logits, batch["targets"], batch["loss_mask"])[0]

    return float(loss(params, batch))


def max_diff(a, b) -> float:
    """Largest absolute difference over two pytrees of arrays."""
    pairs = zip(jax.tree.leaves(a), jax.tree.leaves(b))
    return max(float(np.max(np.abs(np.asarray(x) - np.asarray(y)))) for x, y in pairs)


def load_onto(hf_dir: str, mesh) -> dict:
    """The HF checkpoint at `hf_dir` loaded straight onto `mesh` by the rules (each device gets its slice)."""
    return model.load_hf(hf_dir, shardings=lambda cfg: param_shardings(cfg, mesh))[1]


def shard_fractions(params) -> dict[str, float]:
    """Per leaf, the largest share of its elements one device holds."""
    return {
        jax.tree_util.keystr(path): max(s.data.size for s in x.addressable_shards) / x.size
        for path, x in jax.tree.leaves_with_path(params)
    }


def wrong_shardings(cfg, state, mesh) -> list[str]:
    """Paths of params and Adam moments whose spec differs from the rules' spec."""
    adam = state.opt_state[1][0]  # chain(clip, adamw) -> adamw = chain(scale_by_adam, ...) -> ScaleByAdamState
    wrong = []
    for name, tree in (("params", state.params), ("mu", adam.mu), ("nu", adam.nu)):
        want = tree_shardings(model.param_axes(cfg), tree, mesh, DEFAULT_RULES)
        for (path, leaf), expected in zip(jax.tree.leaves_with_path(tree), jax.tree.leaves(want)):
            if leaf.sharding.spec != expected.spec:
                wrong.append(f"{name}{jax.tree_util.keystr(path)}: {leaf.sharding.spec} != {expected.spec}")
    return wrong


def run_case(cfg, meshes: dict[str, MeshConfig]) -> dict:
    """Per-mesh comparison against one device."""
    params = jax.device_get(jax.jit(model.init_params, static_argnums=0)(cfg, jax.random.PRNGKey(0)))
    batch = packed_batch(cfg.vocab_size)
    all_meshes = {"one_device": make_mesh(MeshConfig(1, 1, 1, 1), jax.devices()[:1])}
    all_meshes.update({name: make_mesh(mesh_cfg) for name, mesh_cfg in meshes.items()})
    with tempfile.TemporaryDirectory() as hf_dir:  # the meshes start from the checkpoint loaded onto them
        model.save_hf(params, cfg, hf_dir)
        loaded = {name: load_onto(hf_dir, mesh) for name, mesh in all_meshes.items() if name != "one_device"}
    runs = {name: two_steps(cfg, loaded.get(name, params), batch, mesh) for name, mesh in all_meshes.items()}
    ref_state, ref_losses, _ = runs.pop("one_device")
    report = {}
    if not cfg.num_experts:
        report["full_logits_loss_diff"] = abs(ref_losses[0] - full_logits_loss(cfg, params, batch))
    for name, (state, step_losses, _) in runs.items():
        report[name] = {
            "losses": step_losses,
            "ref_losses": ref_losses,
            "loss_diff": max(abs(a - b) for a, b in zip(step_losses, ref_losses)),
            "param_diff": max_diff(state.params, ref_state.params),
            "params_moved": max_diff(state.params, params),
            "wrong_shardings": wrong_shardings(cfg, state, all_meshes[name]),
            "loaded_diff": max_diff(loaded[name], params),
            "loaded_fractions": shard_fractions(loaded[name]),
            "loaded_specs": {
                jax.tree_util.keystr(path): str(x.sharding.spec) for path, x in jax.tree.leaves_with_path(loaded[name])
            },
            "specs": {
                jax.tree_util.keystr(path): str(x.sharding.spec) for path, x in jax.tree.leaves_with_path(state.params)
            },
        }
    if "mixed222" in runs:
        report["restore_222_onto_fsdp8"] = restore_elsewhere(runs["mixed222"][0], cfg, params, all_meshes["fsdp8"])
    return report


def restore_elsewhere(state, cfg, params, other_mesh) -> dict:
    """Save `state`, restore it onto `other_mesh`'s shardings: value difference and specs."""
    tx = make_optimizer(OPT)
    target, _ = train_state_from_params(params, model.param_axes(cfg), tx, 0, other_mesh)
    with tempfile.TemporaryDirectory() as tmp, Checkpointer(tmp, save_every=1) as ckpt:
        ckpt.save(2, state, data_state={"epoch": 0, "index": 16})
        ckpt.wait()
        restored = ckpt.restore(target)
    return {
        "value_diff": max_diff(restored.state, state),
        "wrong_shardings": wrong_shardings(cfg, restored.state, other_mesh),
        "data_state": restored.data_state,
    }


def compiled_peak_bytes(cfg, mesh, loss, rows: int, seq: int) -> int:
    """Peak device bytes XLA assigns to the SFT step with `loss`: arguments + outputs − donated aliases +
    temporaries."""
    tx = make_optimizer(OptimizerConfig(total_steps=100))
    state = abstract_train_state(functools.partial(model.init_params, cfg), model.param_axes(cfg), tx, mesh)
    bsh = batch_sharding(mesh, (rows, seq))
    step = make_sft_step(
        cfg, tx, loss, mesh=mesh, state_shardings=jax.tree.map(lambda x: x.sharding, state), batch_sharding=bsh
    )
    batch = {k: jax.ShapeDtypeStruct((rows, seq), np.int32, sharding=bsh) for k in ROW_KEYS}
    m = step.lower(state, batch).compile().memory_analysis()
    return m.argument_size_in_bytes + m.output_size_in_bytes - m.alias_size_in_bytes + m.temp_size_in_bytes


def plan_against_compiled() -> dict:
    """The compiled SFT step's peak over `jaxseeker plan`'s for a small Qwen2 recipe on fsdp=8, with the step's
    activation constraint (what `make_sft_step` binds to `sft_loss`) and with a loss that takes none."""
    shape = {
        "model_type": "qwen2",
        "vocab_size": 3000,
        "hidden_size": 96,
        "intermediate_size": 256,
        "num_layers": 3,
        "num_heads": 6,
        "num_kv_heads": 2,
        "head_dim": 16,
        "qkv_bias": True,
        "qk_norm": False,
        "remat": "full",
    }
    recipe = {
        "name": "small",
        "model": shape,
        "mesh": {"fsdp": 8},
        "data": {"seq_len": 320, "batch_size": 8},
        "train": {"train_files": ["unused.jsonl"], "tokenizer": "unused", "chunk_size": 128},
    }
    planned = make_plan(recipe, chip="v5p")["stages"][0]["memory"]["peak"]
    cfg, mesh = model.ModelConfig(**shape), make_mesh(MeshConfig(1, 8, 1, 1))
    return {
        name: compiled_peak_bytes(cfg, mesh, loss, 8, 320) / planned
        for name, loss in (
            ("constrained", functools.partial(sft_loss, chunk_size=128)),
            ("unconstrained", unconstrained_loss),
        )
    }


def unconstrained_loss(params, batch, cfg):
    """`sft_loss` behind a signature without `constrain`, so the step binds no activation constraint."""
    return sft_loss(params, batch, cfg, chunk_size=128)


def main() -> None:
    """Run the cases named on the command line (default: all) and print the JSON report."""
    if jax.device_count() != 8:
        raise SystemExit(
            f"needs 8 devices: XLA_FLAGS=--xla_force_host_platform_device_count=8 (has {jax.device_count()})"
        )
    names = sys.argv[1:] or list(CASES)
    report = {name: run_case(*CASES[name]) for name in names}
    if "dense" in names:
        report["compiled_over_plan_fsdp8"] = plan_against_compiled()
    print(json.dumps(report))


if __name__ == "__main__":
    main()
