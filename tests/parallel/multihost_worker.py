"""One of two local CPU processes under `jax.distributed` (2 devices each, 4 in all); prints JSON.

Run by `test_multihost.py`, which sets JAX_COORDINATOR_ADDRESS / JAX_NUM_PROCESSES /
JAX_PROCESS_ID, so `maybe_initialize_distributed()` starts the distributed runtime exactly as on a
pod. Each process loads only its own rows of the global batch (as a loader sharded by process
index does); a toy SFT step on a (data=2, fsdp=2) mesh spanning both processes must equal the
step on one local device with the whole batch; then both processes write one checkpoint together
and read it back.
"""

from __future__ import annotations

import json
import sys

import jax
import numpy as np
from jax.experimental import multihost_utils

from jaxseeker import losses
from jaxseeker.parallel import (
    MeshConfig,
    batch_sharding,
    is_main_process,
    make_mesh,
    maybe_initialize_distributed,
    process_info,
    shard_batch,
)
from jaxseeker.train.checkpoint import Checkpointer
from jaxseeker.train.optimizer import OptimizerConfig, make_optimizer
from jaxseeker.train.sft_step import make_sft_step
from jaxseeker.train.state import train_state_from_params

VOCAB, EMBED, BATCH, SEQ = 16, 8, 8, 6
AXES = {"embed": ("vocab", "embed"), "lm_head": ("embed", "vocab")}
OPT = OptimizerConfig(lr=1e-3, warmup_steps=0, total_steps=10, eps=1e-6)


def bigram_loss(params, batch, cfg):
    """Masked NLL of a bigram model: logits = embed[token] @ lm_head."""
    logits = params["embed"][batch["tokens"]] @ params["lm_head"]  # [batch, seq, vocab]
    return losses.masked_nll(logits, batch["targets"], batch["loss_mask"])


def global_batch() -> dict[str, np.ndarray]:
    """The same global batch in every process."""
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, VOCAB, (BATCH, SEQ + 1))
    return {"tokens": tokens[:, :-1], "targets": tokens[:, 1:], "loss_mask": np.ones((BATCH, SEQ), np.int32)}


def one_step(params, batch, mesh, local_rows):
    """(loss, params gathered to every host, state) after one SFT step on `mesh`."""
    tx = make_optimizer(OPT)
    state, shardings = train_state_from_params(params, AXES, tx, 0, mesh)
    sharding = batch_sharding(mesh, (BATCH, SEQ))
    step = make_sft_step(None, tx, bigram_loss, mesh=mesh, state_shardings=shardings, batch_sharding=sharding)
    state, metrics = step(state, shard_batch({k: v[local_rows] for k, v in batch.items()}, sharding))
    return float(metrics["loss"]), gather(state.params), state


def gather(tree):
    """Numpy copies of (possibly multi-host) global arrays, whole on every process."""
    return jax.tree.map(
        lambda x: np.asarray(x) if x.is_fully_addressable else multihost_utils.process_allgather(x, tiled=True), tree
    )


def main(checkpoint_dir: str) -> None:
    """Run the comparison and the collective checkpoint; process 0 prints the report."""
    started = maybe_initialize_distributed()
    info = process_info()
    rng = np.random.default_rng(1)
    params = {"embed": rng.normal(size=(VOCAB, EMBED)).astype(np.float32),
              "lm_head": rng.normal(size=(EMBED, VOCAB)).astype(np.float32)}
    batch = global_batch()
    rows = BATCH // info["process_count"]
    mine = slice(info["process_index"] * rows, (info["process_index"] + 1) * rows)

    ref_loss, ref_params, _ = one_step(params, batch, make_mesh(MeshConfig(1, 1, 1, 1), jax.local_devices()[:1]),
                                       slice(None))
    mesh = make_mesh(MeshConfig(data=2, fsdp=2))
    loss, new_params, state = one_step(params, batch, mesh, mine)

    with Checkpointer(checkpoint_dir, save_every=1) as ckpt:
        ckpt.save(1, state, data_state={"process_rows": [rows * i for i in range(info["process_count"])]})
        ckpt.wait()
        restored = ckpt.restore(state)
    saved, loaded = gather(state), gather(restored.state)
    report = {
        "started": started,
        "info": info,
        "main": is_main_process(),
        "loss_diff": abs(loss - ref_loss),
        "param_diff": max(float(np.max(np.abs(new_params[k] - ref_params[k]))) for k in params),
        "params_moved": max(float(np.max(np.abs(new_params[k] - params[k]))) for k in params),
        "restored_equal": all(np.array_equal(a, b) for a, b in zip(jax.tree.leaves(saved), jax.tree.leaves(loaded))),
        "data_state": restored.data_state,
        "embed_spec": str(state.params["embed"].sharding.spec),
    }
    print(json.dumps(report))


if __name__ == "__main__":
    main(sys.argv[1])
