"""One process of a `jaxseeker rl` run on the toy colour task; prints a JSON report as its last line.

Run by `test_multihost_rl.py` as processes 0 and 1 of a two-process job (JAX_COORDINATOR_ADDRESS /
JAX_NUM_PROCESSES / JAX_PROCESS_ID set as a launcher sets them on each host, so the RL loop's
`maybe_initialize_distributed()` starts the distributed runtime), and as a lone process. Arguments: recipe,
out_dir, first_steps, total_steps. It trains `first_steps` RL steps, then (if `total_steps` is more)
resumes from the checkpoint up to `total_steps` in the same interpreter, as a restarted job would (the
state and the question sampler come back from disk). Its report also gives how the rollout engine's KV cache
is laid out over the process's devices. Last, every process saves the restored params as an HF checkpoint
(`model.save_hf` on params spread over the processes: gathered tensor by tensor, written by process 0), and
process 0 writes the same params gathered whole (`process_allgather`) under their HF names to `params.npz`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
from jax.experimental import multihost_utils

from jaxseeker import model
from jaxseeker.model.hf_io import hf_tensors
from jaxseeker.parallel import is_main_process, process_info
from jaxseeker.train.recipe import read_recipe
from jaxseeker.train.rl import prepare, run_rl


def main(recipe_path: str, out_dir: str, first_steps: str, total_steps: str) -> None:
    """Train, resume if asked, print {info, main, resumed_from}."""
    first = run_rl(read_recipe(recipe_path, [f"rl.out_dir={out_dir}", f"rl.steps={first_steps}"]), progress=False)
    resumed_from = [first["resumed_from"]]
    if int(total_steps) > int(first_steps):
        recipe = read_recipe(recipe_path, [f"rl.out_dir={out_dir}", f"rl.steps={total_steps}"])
        resumed_from.append(run_rl(recipe, resume=True, progress=False)["resumed_from"])
    run = prepare(read_recipe(recipe_path, [f"rl.out_dir={out_dir}"]), resume=True)
    engine = run.engine
    model.save_hf(run.state.params, run.cfg, Path(out_dir) / "hf")
    whole = multihost_utils.process_allgather(run.state.params, tiled=True)  # collective: every process
    if is_main_process():
        np.savez(Path(out_dir) / "params.npz", **dict(hf_tensors(whole, run.cfg, run.cfg.param_dtype)))
    print(json.dumps({"info": process_info(), "main": is_main_process(), "resumed_from": resumed_from,
                      "engine_k_spec": str(engine._cache.k[0].sharding.spec)}))  # slots, kv_heads, seq, head_dim


if __name__ == "__main__":
    main(*sys.argv[1:])
