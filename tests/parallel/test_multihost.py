"""Two local CPU processes under jax.distributed: per-host batches, the sharded step, collective checkpoints.

Each process is a fresh interpreter (`multihost_worker.py`) with 2 CPU devices; the environment
variables below are what a launcher sets on each host of a pod.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

WORKER = Path(__file__).with_name("multihost_worker.py")
FAST_COMPILE = "--xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true"


def free_port() -> int:
    """A TCP port nobody listens on now."""
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> list[dict]:
    """The JSON report of each of the two processes."""
    checkpoint_dir = tmp_path_factory.mktemp("multihost_ckpt")
    address = f"localhost:{free_port()}"
    procs = []
    for process_id in range(2):
        env = dict(
            os.environ, XLA_FLAGS=f"--xla_force_host_platform_device_count=2 {FAST_COMPILE}", JAX_PLATFORMS="cpu",
            JAX_COORDINATOR_ADDRESS=address, JAX_NUM_PROCESSES="2", JAX_PROCESS_ID=str(process_id),
        )
        procs.append(subprocess.Popen(
            [sys.executable, str(WORKER), str(checkpoint_dir)], env=env, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True,
        ))
    outputs = [p.communicate(timeout=300) for p in procs]
    for p, (_, err) in zip(procs, outputs):
        if p.returncode != 0:
            pytest.fail(f"{WORKER.name} failed (exit {p.returncode}):\n{err[-4000:]}")
    return [json.loads(out.strip().splitlines()[-1]) for out, _ in outputs]


def test_environment_starts_the_distributed_runtime(reports):
    assert [r["started"] for r in reports] == [True, True]
    assert [r["info"]["process_index"] for r in reports] == [0, 1]
    assert all(r["info"]["global_devices"] == 4 and r["info"]["local_devices"] == 2 for r in reports)
    assert [r["main"] for r in reports] == [True, False]  # only process 0 writes logs and reports


def test_step_over_two_hosts_equals_one_device(reports):
    for r in reports:
        assert r["loss_diff"] <= 1e-5 and r["param_diff"] <= 1e-5, r
        assert r["params_moved"] > 1e-4
        assert r["embed_spec"] == "P(None, 'fsdp')"


def test_checkpoint_is_written_and_read_by_both_processes(reports):
    for r in reports:
        assert r["restored_equal"]
        assert r["data_state"] == {"process_rows": [0, 4]}
