"""One process of a `jaxseeker rl` run on the toy colour task; prints a JSON report as its last line.

Run by `test_multihost_rl.py` as processes 0 and 1 of a two-process job (JAX_COORDINATOR_ADDRESS /
JAX_NUM_PROCESSES / JAX_PROCESS_ID set as a launcher sets them on each host, so the RL loop's
`maybe_initialize_distributed()` starts the distributed runtime), and as a lone process. Arguments: recipe,
out_dir, first_steps, total_steps, and the step at whose start process 1 receives SIGTERM (-1: none).

It trains `first_steps` RL steps (from the checkpoint in out_dir, if any); with a SIGTERM step, process 1 sends
itself the signal a preempted host gets, and the run is expected to stop at the preemption sync point with a
checkpoint of it (`Interrupted`), as a preempted job does: the report then says where, and the test starts fresh
processes that resume. Otherwise, if `total_steps` is more, it resumes from the checkpoint up to `total_steps` in
the same interpreter. While it trains, the shape of every array `multihost_utils.process_allgather` gathers (the one
way a multi-process array reaches a host) is recorded: no weight may go that way to the engine. Last, every process
compares its engine's weights, handed over after the last update, with the restored params (gathered here), saves
the restored params as an HF checkpoint (`model.save_hf` on params spread over the processes: gathered tensor by
tensor, written by process 0), and process 0 writes the same params gathered whole under their HF names to
`params.npz`.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

import jax
import numpy as np
from jax._src import distributed
from jax.experimental import multihost_utils

from jaxseeker import model
from jaxseeker.generation import layout
from jaxseeker.model.hf_io import hf_tensors
from jaxseeker.parallel import is_main_process, process_info
from jaxseeker.train.interrupt import Interrupted
from jaxseeker.train.recipe import read_recipe
from jaxseeker.train.rl import loop as rl

GATHERED: list[tuple[int, ...]] = []  # shapes of the arrays process_allgather gathers while the loop runs
RUNS: list[rl.RLRun] = []  # every run `rl.prepare` built


def record_gathers(gather):
    """`process_allgather` that records the shapes it gathers, then gathers them."""

    def recorded(tree, tiled=False):
        GATHERED.extend(tuple(np.shape(x)) for x in jax.tree.leaves(tree))
        return gather(tree, tiled=tiled)

    return recorded


def keep_runs(prepare):
    """`rl.prepare` that keeps the runs it builds (the engine of the last one holds the last hand-off)."""

    def kept(*args, **kwargs):
        RUNS.append(prepare(*args, **kwargs))
        return RUNS[-1]

    return kept


def sigterm_at(run_step, at: int):
    """`rl.run_step` that sends this process SIGTERM as step `at` starts (process 1 only), then waits until the
    coordination service holds the preemption notice and every process's step count (the keys of TSL's
    PreemptionSyncManager): the sync point is then the step that follows, however late the notifier thread runs,
    since the other process cannot finish this step without this one."""

    def step(run, state, index, *rest):
        if index == at and jax.process_index() == 1:
            os.kill(os.getpid(), signal.SIGTERM)
            client = distributed.global_state.client
            client.blocking_key_value_get("RECEIVED_PREEMPTION_NOTICE", 120_000)
            while len(client.key_value_dir_get("PREEMPTION_CURRENT_COUNTER/")) < jax.process_count():
                time.sleep(0.01)
        return run_step(run, state, index, *rest)

    return step


def main(recipe_path: str, out_dir: str, first_steps: str, total_steps: str, sigterm: str) -> None:
    """Train (stopped by a preemption, or resumed if asked), check the engine, print the report."""
    overrides = [f"rl.out_dir={out_dir}"]
    real_gather = multihost_utils.process_allgather
    multihost_utils.process_allgather = record_gathers(real_gather)
    rl.prepare = keep_runs(rl.prepare)
    if int(sigterm) >= 0:
        rl.run_step = sigterm_at(rl.run_step, int(sigterm))
    try:
        first = rl.run_rl(
            read_recipe(recipe_path, [*overrides, f"rl.steps={first_steps}"]), resume=True, progress=False
        )
    except Interrupted as stop:
        print(json.dumps({"info": process_info(), "interrupted": {"step": stop.step, "signal": stop.signal_name}}))
        return
    report = {"info": process_info(), "main": is_main_process()}  # after run_rl started the distributed runtime
    resumed_from = [first["resumed_from"]]
    if int(total_steps) > int(first_steps):
        recipe = read_recipe(recipe_path, [*overrides, f"rl.steps={total_steps}"])
        resumed_from.append(rl.run_rl(recipe, resume=True, progress=False)["resumed_from"])
    multihost_utils.process_allgather = real_gather
    engine = RUNS[-1].engine
    run = rl.prepare(read_recipe(recipe_path, overrides), resume=True)
    whole = real_gather(run.state.params, tiled=True)  # collective: every process
    expected = jax.tree.leaves(layout.engine_params(whole, run.cfg))
    handed = jax.tree.leaves(engine._params)  # this process's engine: arrays on its own devices only
    model.save_hf(run.state.params, run.cfg, Path(out_dir) / "hf")
    if is_main_process():
        np.savez(Path(out_dir) / "params.npz", **dict(hf_tensors(whole, run.cfg, run.cfg.param_dtype)))
    weight_shapes = {tuple(x.shape) for x in jax.tree.leaves((whole, layout.engine_params(whole, run.cfg)))}
    print(
        json.dumps(
            {
                **report,
                "resumed_from": resumed_from,
                "engine_k_spec": str(engine._cache.k[0].sharding.spec),  # one layer's [slots, kv_heads, seq, head_dim]
                "engine_local": all(x.is_fully_addressable for x in handed),
                "engine_equals_trained": all(
                    np.array_equal(np.asarray(h), e) for h, e in zip(handed, expected, strict=True)
                ),
                "gathers": len(GATHERED),
                "gathered_weights": sorted({s for s in GATHERED if s in weight_shapes}),
            }
        )
    )


if __name__ == "__main__":
    main(*sys.argv[1:])
