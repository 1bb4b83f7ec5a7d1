"""The device mesh over axes (data, fsdp, tensor, expert) and the multi-host start.

A mesh is a config, not code: the same program runs on 1 CPU, 8 fake CPU devices
(`XLA_FLAGS=--xla_force_host_platform_device_count=8`), one GPU or a TPU pod slice; only
`MeshConfig` changes. `maybe_initialize_distributed()` must run before anything touches a device.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import jax
import numpy as np
from jax.sharding import AxisType, Mesh

from jaxseeker.parallel.mesh_config import MESH_AXES, MeshConfig


def make_mesh(cfg: MeshConfig, devices: Sequence[jax.Device] | None = None) -> Mesh:
    """A `Mesh` with axes `MESH_AXES` over `devices` (default: all global devices).

    Devices are laid out in the topology-aware order of `jax.make_mesh` (rings on TPU); a device
    subset that has no such layout (e.g. part of a TPU slice) is used in the order given.
    """
    if devices is None:
        devices = jax.devices()
    shape = cfg.resolve(len(devices))
    axis_types = (AxisType.Auto,) * len(MESH_AXES)
    try:
        return jax.make_mesh(shape, MESH_AXES, axis_types=axis_types, devices=devices)
    except (ValueError, NotImplementedError, AssertionError):
        return Mesh(np.asarray(devices, dtype=object).reshape(shape), MESH_AXES, axis_types=axis_types)


def _multi_host_env() -> str | None:
    """Name of the environment variable that says this is a multi-process run, or None."""
    if os.environ.get("JAX_COORDINATOR_ADDRESS"):
        return "JAX_COORDINATOR_ADDRESS"
    if "," in os.environ.get("TPU_WORKER_HOSTNAMES", ""):
        return "TPU_WORKER_HOSTNAMES"
    if os.environ.get("MEGASCALE_COORDINATOR_ADDRESS"):
        return "MEGASCALE_COORDINATOR_ADDRESS"
    if int(os.environ.get("SLURM_NTASKS", "1") or 1) > 1 and "SLURM_JOB_ID" in os.environ:
        return "SLURM_NTASKS"
    return None


def maybe_initialize_distributed(
    coordinator_address: str | None = None,
    num_processes: int | None = None,
    process_id: int | None = None,
) -> bool:
    """Start `jax.distributed` when the arguments or the environment say multi-host; True if started.

    Multi-host is: an explicit `coordinator_address`; `JAX_COORDINATOR_ADDRESS` (with
    `JAX_NUM_PROCESSES` and `JAX_PROCESS_ID`, read here); a TPU pod slice (`TPU_WORKER_HOSTNAMES`
    lists several hosts, or `MEGASCALE_COORDINATOR_ADDRESS`); a SLURM job with several tasks.
    Otherwise nothing happens (one process). Safe to call twice. Call it before any device use.
    """
    if jax.distributed.is_initialized():
        return True
    source = "argument" if coordinator_address else _multi_host_env()
    if source is None:
        return False
    if source in ("argument", "JAX_COORDINATOR_ADDRESS"):
        num_processes = num_processes if num_processes is not None else _env_int("JAX_NUM_PROCESSES")
        process_id = process_id if process_id is not None else _env_int("JAX_PROCESS_ID")
    jax.distributed.initialize(coordinator_address, num_processes, process_id)
    return True


def _env_int(name: str) -> int | None:
    """An integer environment variable (None when unset); a bad value names the variable."""
    value = os.environ.get(name)
    if value is None or value == "":
        return None
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"environment variable {name}={value!r} is not an integer") from None


def is_main_process() -> bool:
    """True on process 0, the one that writes logs, reports and JSON files."""
    return jax.process_index() == 0


def process_info() -> dict[str, int]:
    """This process's index, the process count and the local / global device counts."""
    return {
        "process_index": jax.process_index(),
        "process_count": jax.process_count(),
        "local_devices": jax.local_device_count(),
        "global_devices": jax.device_count(),
    }
