"""One SFT step of a Qwen2.5-7B-shaped model scaled down (28 query heads, 4 KV heads, tiny widths) on a tensor axis
of 8 fake CPU devices against one device; prints one JSON line.

Run by `test_gqa_heads.py` in a subprocess whose `XLA_FLAGS` asks for 8 host devices. Neither head count divides
the tensor axis (28 / 8, 4 / 8): the report gives both losses and every all-gather of the compiled step (its
result dims), so the test can look for one that rebuilds the whole K or V.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import jax
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from hlo_support import all_gathers  # noqa: E402

from jaxseeker import model  # noqa: E402
from jaxseeker.parallel import MeshConfig, batch_sharding, make_mesh, shard_batch  # noqa: E402
from jaxseeker.train.optimizer import OptimizerConfig, make_optimizer  # noqa: E402
from jaxseeker.train.sft.step import make_sft_step  # noqa: E402
from jaxseeker.train.state import train_state_from_params  # noqa: E402

BATCH, SEQ = 2, 128
CFG = model.ModelConfig.tiny(  # Qwen2.5-7B's head counts (28 / 4), everything else tiny
    "qwen2", vocab_size=64, hidden_size=64, intermediate_size=128, num_layers=2, num_heads=28, num_kv_heads=4
).replace(head_dim=8)


def batch() -> dict[str, np.ndarray]:
    """One packed row per batch entry: two documents, the loss on every real token."""
    tokens = np.random.default_rng(0).integers(1, CFG.vocab_size, (BATCH, SEQ + 1))
    segment_ids = np.ones((BATCH, SEQ), np.int32)
    segment_ids[:, SEQ // 2 :] = 2
    positions = np.concatenate([np.arange(SEQ // 2)] * 2)[None].repeat(BATCH, 0).astype(np.int32)
    return dict(
        tokens=tokens[:, :-1],
        targets=tokens[:, 1:],
        loss_mask=np.ones((BATCH, SEQ), np.int32),
        segment_ids=segment_ids,
        positions=positions,
    )


def one_step(mesh_cfg: MeshConfig, devices) -> tuple[float, str]:
    """(the step's loss, its compiled HLO text) on the mesh."""
    mesh = make_mesh(mesh_cfg, devices)
    tx = make_optimizer(OptimizerConfig(lr=1e-4, warmup_steps=0, total_steps=10))
    params = jax.device_get(jax.jit(model.init_params, static_argnums=0)(CFG, jax.random.PRNGKey(0)))
    state, shardings = train_state_from_params(params, model.param_axes(CFG), tx, 0, mesh)
    sharding = batch_sharding(mesh, (BATCH, SEQ))
    step = make_sft_step(CFG, tx, mesh=mesh, state_shardings=shardings, batch_sharding=sharding)
    rows = shard_batch(batch(), sharding)
    hlo = step.lower(state, rows).compile().as_text()
    _, metrics = step(state, rows)
    return float(metrics["loss"]), hlo


if __name__ == "__main__":
    one_loss, _ = one_step(MeshConfig(1, 1, 1, 1), jax.devices()[:1])
    tensor_loss, hlo = one_step(MeshConfig(1, 1, 8, 1), jax.devices())
    print(json.dumps({"one_device_loss": one_loss, "tensor8_loss": tensor_loss, "all_gathers": all_gathers(hlo)}))
