"""The device mesh over axes (data, fsdp, tensor, expert) and the multi-host start.

A mesh is a config, not code: the same program runs on 1 CPU, 8 fake CPU devices
(`XLA_FLAGS=--xla_force_host_platform_device_count=8`), one GPU or a TPU pod slice; only
`MeshConfig` changes. `maybe_initialize_distributed()` must run before anything touches a device.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
from collections.abc import Sequence

import jax
import numpy as np
from jax.sharding import AxisType, Mesh

MESH_AXES = ("data", "fsdp", "tensor", "expert")


@dataclasses.dataclass(frozen=True)
class MeshConfig:
    """Size of each mesh axis; at most one axis may be -1, meaning "all the devices left".

    data: pure data parallelism (params replicated). fsdp: data parallelism with params and
    optimizer state sharded (ZeRO-3). tensor: heads / mlp / vocab split inside a layer.
    expert: MoE experts split across devices (dense parts see it as more data parallelism).
    """

    data: int = 1
    fsdp: int = -1
    tensor: int = 1
    expert: int = 1

    def __post_init__(self):
        sizes = self.sizes()
        for name, size in zip(MESH_AXES, sizes):
            if not isinstance(size, int) or (size < 1 and size != -1):
                raise ValueError(f"MeshConfig.{name}: {size!r} must be a positive int or -1 (the rest)")
        if sizes.count(-1) > 1:
            raise ValueError(f"MeshConfig: only one axis may be -1, got {dict(zip(MESH_AXES, sizes))}")

    def sizes(self) -> tuple[int, ...]:
        """The configured sizes in `MESH_AXES` order (may hold one -1)."""
        return tuple(getattr(self, name) for name in MESH_AXES)

    def resolve(self, n_devices: int) -> tuple[int, ...]:
        """The concrete mesh shape for `n_devices` devices: -1 filled in, product checked."""
        sizes = self.sizes()
        known = math.prod(s for s in sizes if s != -1)
        if -1 in sizes:
            if n_devices % known:
                raise ValueError(
                    f"MeshConfig {dict(zip(MESH_AXES, sizes))}: {n_devices} devices are not divisible by {known}"
                )
            sizes = tuple(n_devices // known if s == -1 else s for s in sizes)
        if math.prod(sizes) != n_devices:
            raise ValueError(
                f"MeshConfig {dict(zip(MESH_AXES, sizes))} needs {math.prod(sizes)} devices, found {n_devices}"
            )
        return sizes

    @classmethod
    def from_dict(cls, values: dict) -> "MeshConfig":
        """Build from a config mapping; unknown keys are an error listing the known ones."""
        unknown = sorted(set(values) - set(MESH_AXES))
        if unknown:
            raise ValueError(f"mesh: unknown keys {unknown}; known keys: {list(MESH_AXES)}")
        return cls(**values)


def parse_mesh(text: str) -> MeshConfig:
    """A MeshConfig from `data=1,fsdp=64,tensor=1,expert=1` (axes left out keep MeshConfig's defaults); a
    ValueError quotes `text` and names the part that is wrong."""
    values = {}
    for item in filter(None, text.split(",")):
        key, sep, raw = item.partition("=")
        if not sep or key.strip() not in MESH_AXES:
            raise ValueError(f"{text!r}: expected axis=size with axes {list(MESH_AXES)}, got {item!r}")
        try:
            values[key.strip()] = int(raw)
        except ValueError:
            raise ValueError(f"{text!r}: size of {key!r} is not an integer: {raw!r}") from None
    try:
        return MeshConfig(**values)
    except ValueError as e:
        raise ValueError(f"{text!r}: {e}") from None


MESH_HELP = ("shard the model and the KV cache over all devices, e.g. tensor=8 (axes data, fsdp, tensor, expert; "
             "fsdp takes the devices the others leave; default: one device)")


def mesh_argument(text: str) -> Mesh:
    """`parse_mesh` as an argparse `type=`, laid over this process's devices (`make_mesh`): a bad mesh, or one the
    devices do not fill, is a usage error that quotes it."""
    try:
        return make_mesh(parse_mesh(text))
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e) if str(e).startswith(repr(text)) else f"{text!r}: {e}") from None


def mesh_text(mesh: Mesh | None) -> str:
    """Where an engine runs, for a command's closing line: "one device", or e.g. "a data=1,fsdp=1,tensor=4,expert=1
    mesh of 4 devices"."""
    if mesh is None:
        return "one device"
    sizes = ",".join(f"{axis}={n}" for axis, n in mesh.shape.items())
    return f"a {sizes} mesh of {mesh.size} device{'s' * (mesh.size > 1)}"


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
