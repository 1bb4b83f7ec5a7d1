"""`jaxseeker sft` as two local CPU processes under jax.distributed, against one process stepping the same data.

Each process is a fresh interpreter (`multihost_worker.py`) with 2 CPU devices; the environment variables
set below are what a launcher sets on each host of a pod. The run trains 3 steps on a (data=2, fsdp=2) mesh
over both processes, then is resumed from its checkpoint for 2 more (see the worker). The reference, in this process on
one device, steps the tiny Qwen3 on the global batches that two per-process loaders give, stacked.
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest
import yaml
from net_support import unused_port

from jaxseeker import model
from jaxseeker.data import DataConfig, batch_iterator, load_tokenizer, open_source, place_on_mesh, train_tokenizer
from jaxseeker.data.packing import ROW_KEYS
from jaxseeker.parallel import MeshConfig, batch_sharding, make_mesh
from jaxseeker.parallel.cpu_devices import fake_cpu_devices_env
from jaxseeker.train.metrics import read_metrics
from jaxseeker.train.optimizer import OptimizerConfig, make_optimizer
from jaxseeker.train.sft.step import make_sft_step, sft_loss
from jaxseeker.train.state import create_train_state

WORKER = Path(__file__).with_name("multihost_worker.py")
N_ITEMS, FIRST_RUN, RESUMED_RUN = 24, 3, 5
WORDS = "river city museum bridge tower station painter novel".split()


def trajectory(i: int) -> dict:
    """A short ReAct trajectory about `item i`. Odd ones are longer: the packer fits two even ones (process 0's
    shard) or one odd one (process 1's) per row, so the two processes' loaders stand at different positions."""
    filler = " ".join(WORDS[(i + j) % len(WORDS)] for j in range(12 * (i % 2)))
    city = ["Lyon", "Berlin", "Oslo", "Porto"][i % 4]
    return {
        "messages": [
            {"role": "user", "content": f"Where is item {i}? {filler}"},
            {
                "role": "assistant",
                "content": "<think>Search.</think>\n<tool_call>"
                + json.dumps({"name": "search", "arguments": {"query": f"item {i}"}})
                + "</tool_call>",
            },
            {"role": "user", "content": f"<tool_response>\nItem {i} is kept in {city}. {filler}\n</tool_response>"},
            {"role": "assistant", "content": f"<answer>{city}</answer>"},
        ]
    }


@pytest.fixture(scope="module")
def recipe(tmp_path_factory) -> dict:
    """A tokenizer, the trajectories and a tiny two-process recipe, written under a temporary directory."""
    root = tmp_path_factory.mktemp("multihost")
    records = [trajectory(i) for i in range(N_ITEMS)]
    train_tokenizer([m["content"] for r in records for m in r["messages"]], 400, root / "tok")
    (root / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    recipe = {
        "name": "multihost",
        "model": {
            "model_type": "qwen3",
            "vocab_size": 400,
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_layers": 2,
            "num_heads": 4,
            "num_kv_heads": 2,
            "head_dim": 8,
            "initializer_range": 0.05,
        },
        "data": {"seq_len": 256, "batch_size": 4, "seed": 0, "num_threads": 0},
        "optimizer": {"lr": 1e-3, "min_lr": 1e-4, "warmup_steps": 1, "total_steps": RESUMED_RUN, "eps": 1e-6},
        "mesh": {"data": 2, "fsdp": 2},
        "train": {
            "train_files": [str(root / "train.jsonl")],
            "tokenizer": str(root / "tok"),
            "log_every": 1,
            "checkpoint_every": 2,
            "chunk_size": 32,
            "out_dir": str(root / "run"),
        },
    }
    (root / "recipe.yaml").write_text(yaml.safe_dump(recipe))
    return recipe


def run_two_processes(recipe_path: Path, *args: str) -> list[dict]:
    """Run the worker as processes 0 and 1 of one distributed job; their JSON reports, in process order."""
    cache_dir = recipe_path.parent / "jax_cache"
    address = f"localhost:{unused_port()}"
    procs = []
    for process_id in range(2):
        env = dict(
            fake_cpu_devices_env(2),
            JAX_COORDINATOR_ADDRESS=address,
            JAX_NUM_PROCESSES="2",
            JAX_PROCESS_ID=str(process_id),
            JAX_COMPILATION_CACHE_DIR=str(cache_dir),
            JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",  # the resumed run reuses the first run's compiles
        )
        procs.append(
            subprocess.Popen(
                [sys.executable, str(WORKER), str(recipe_path), *args],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    outputs = [p.communicate(timeout=600) for p in procs]
    for p, (_, err) in zip(procs, outputs):
        if p.returncode != 0:
            pytest.fail(f"{WORKER.name} {' '.join(args)} failed (exit {p.returncode}):\n{err[-4000:]}")
    return [json.loads(out.strip().splitlines()[-1]) for out, _ in outputs]


def reference_losses(recipe: dict, n_steps: int) -> list[float]:
    """Losses of `n_steps` SFT steps on one device, each on process 0's rows stacked over process 1's."""
    cfg = model.ModelConfig(**recipe["model"])
    data = DataConfig(**recipe["data"])
    optimizer = make_optimizer(OptimizerConfig(**recipe["optimizer"]))
    mesh = make_mesh(MeshConfig(1, 1, 1, 1), jax.devices()[:1])
    state, shardings = create_train_state(
        functools.partial(model.init_params, cfg), model.param_axes(cfg), optimizer, 0, mesh
    )
    sharding = batch_sharding(mesh, (data.batch_size, data.seq_len))
    loss_fn = functools.partial(sft_loss, chunk_size=recipe["train"]["chunk_size"])
    step = make_sft_step(cfg, optimizer, loss_fn, mesh=mesh, state_shardings=shardings, batch_sharding=sharding)
    records = open_source(recipe["train"]["train_files"])
    tokenizer = load_tokenizer(recipe["train"]["tokenizer"])
    loaders = [batch_iterator(records, tokenizer, data, process_index=p, process_count=2) for p in range(2)]
    out = []
    for _ in range(n_steps):
        parts = [next(loader) for loader in loaders]  # [rows per process, seq] each
        batch = {k: np.concatenate([part[k] for part in parts]) for k in ROW_KEYS}  # [batch, seq]
        state, metrics = step(state, place_on_mesh(batch, sharding))
        out.append(float(metrics["loss"]))
    return out


@pytest.fixture(scope="module")
def runs(recipe, tmp_path_factory) -> dict:
    """The processes' reports, the metrics process 0 logged over both runs, and the reference losses."""
    path = Path(recipe["train"]["out_dir"]).parent / "recipe.yaml"
    reports = run_two_processes(path, str(FIRST_RUN), str(RESUMED_RUN))
    rows = read_metrics(Path(recipe["train"]["out_dir"]) / "metrics.jsonl")
    return {"reports": reports, "rows": rows, "reference": reference_losses(recipe, RESUMED_RUN)}


def test_environment_starts_one_runtime_over_both_processes(runs):
    reports = runs["reports"]
    assert [r["info"]["process_index"] for r in reports] == [0, 1]
    assert all(r["info"]["global_devices"] == 4 and r["info"]["local_devices"] == 2 for r in reports)
    assert [r["main"] for r in reports] == [True, False]


def test_each_process_reads_its_own_shard(runs):
    shard_0, shard_1 = (set(r["items"]) for r in runs["reports"])
    assert shard_0 and shard_1 and not shard_0 & shard_1
    assert shard_0 <= set(range(0, N_ITEMS, 2)) and shard_1 <= set(range(1, N_ITEMS, 2))  # records [index::count]


def test_only_process_0_logs(runs):
    assert [r["step"] for r in runs["rows"] if "loss" in r] == list(range(1, RESUMED_RUN + 1))


def test_two_process_losses_equal_one_device_on_the_stacked_shards(runs):
    logged = [r["loss"] for r in runs["rows"] if "loss" in r][:FIRST_RUN]
    np.testing.assert_allclose(logged, runs["reference"][:FIRST_RUN], rtol=1e-5)
    assert logged[-1] < logged[0]


def test_checkpoint_is_written_by_both_processes(recipe, runs):
    state_dir = Path(recipe["train"]["out_dir"]) / "checkpoints" / str(FIRST_RUN) / "state"
    written = sorted(p.name for p in state_dir.iterdir() if p.name.startswith("ocdbt.process_"))
    assert written == ["ocdbt.process_0", "ocdbt.process_1"]
    assert [r["resumed_from"] for r in runs["reports"]] == [[0, FIRST_RUN]] * 2


def test_resumed_run_continues_every_process_at_its_own_data_position(runs):
    logged = [r["loss"] for r in runs["rows"] if "loss" in r]
    np.testing.assert_allclose(logged[FIRST_RUN:], runs["reference"][FIRST_RUN:], rtol=1e-5)
