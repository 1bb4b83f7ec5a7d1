"""Host-side work of a multi-process run: each process's share of a list, Python objects exchanged between
processes, global arrays from (or back to) whole host arrays, and the meshes of the generation engine's replicas
(each process's own, and all of them side by side for the weight hand-off).

Under `jax.distributed` every process runs the same program. Work that is not a compiled step (the RL
rollouts, the judge) is split by process with `process_share` and its results exchanged with
`all_gather_objects`; a compiled step then runs on the global mesh with every process passing the same
host data (`global_array`). The functions that gather are collective: every process calls them, in the
same order. On one process they cost nothing (no copy, no device transfer).
"""

from __future__ import annotations

import pickle
from typing import Any

import jax
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding, Sharding

from jaxseeker.parallel.mesh import make_mesh
from jaxseeker.parallel.mesh_config import MeshConfig


def process_share(n: int, index: int | None = None, count: int | None = None) -> range:
    """This process's contiguous share of `n` items: `[index·n // count, (index + 1)·n // count)`.

    The shares of processes 0 … count-1 are disjoint, in order, and cover `range(n)`; their sizes differ by
    at most one (a process gets none when n < count). `index` / `count` default to JAX's process index / count.
    """
    index = jax.process_index() if index is None else index
    count = jax.process_count() if count is None else count
    if not 0 <= index < count:
        raise ValueError(f"process_share: index={index} must lie in [0, count={count})")
    if n < 0:
        raise ValueError(f"process_share: n must be >= 0, got {n}")
    return range(index * n // count, (index + 1) * n // count)


def all_gather_objects(value: Any) -> list[Any]:
    """Every process's `value` (any picklable object), in process order; on one process `[value]`.

    Collective. The objects travel pickled, as bytes through `multihost_utils.process_allgather` (like
    `torch.distributed.all_gather_object`): between processes of one job, running the same code.
    """
    if jax.process_count() == 1:
        return [value]
    raw = np.frombuffer(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL), np.uint8)
    sizes = multihost_utils.process_allgather(np.asarray([raw.size], np.int32)).reshape(-1)  # [processes]
    padded = np.zeros(int(sizes.max()), np.uint8)
    padded[: raw.size] = raw
    rows = multihost_utils.process_allgather(padded).reshape(len(sizes), -1)  # [processes, max bytes]
    return [pickle.loads(bytes(row[:n])) for row, n in zip(rows, sizes)]


def global_array(host: np.ndarray, sharding: Sharding) -> jax.Array:
    """A global array placed with `sharding` from the whole array `host`, which every process holds alike
    (each process puts the slices of its own devices)."""
    host = np.asarray(host)
    return jax.make_array_from_callback(host.shape, sharding, lambda index: host[index])


def host_array(x: jax.Array) -> np.ndarray:
    """The whole of a global array as numpy on this process (an all-gather, collective, when other processes
    hold parts of it)."""
    if x.is_fully_addressable or x.is_fully_replicated:
        return np.asarray(x)
    return multihost_utils.process_allgather(x, tiled=True)


def replica_meshes(tensor: int) -> tuple[Mesh, Mesh]:
    """(this process's engine mesh, the hand-off mesh) for a generation engine of `tensor` devices per replica.

    Each process's devices form `local devices / tensor` engine replicas (mesh axes data × tensor; `tensor` must
    divide the local device count, so a replica never spans hosts and runs out of step with the others). The
    hand-off mesh lays every process's engine mesh side by side along `data`, in process order: one jitted
    reshard of the trainer's params onto it puts each replica's copy on its devices, every process's at once
    (`local_part` then views this process's part). On one process both are the same mesh.
    """
    local = jax.local_device_count()
    if tensor < 1 or local % tensor:
        raise ValueError(f"engine tensor={tensor} must be >= 1 and divide this host's {local} devices")
    by_process: dict[int, list[jax.Device]] = {}
    for device in sorted(jax.devices(), key=lambda d: d.id):
        by_process.setdefault(device.process_index, []).append(device)
    config = MeshConfig(data=-1, fsdp=1, tensor=tensor)
    meshes = [make_mesh(config, devices) for _, devices in sorted(by_process.items())]
    mine = meshes[sorted(by_process).index(jax.process_index())]
    if len(meshes) == 1:
        return mine, mine
    devices = np.concatenate([m.devices for m in meshes], axis=0)  # [data over all processes, 1, tensor, 1, 1]
    return mine, Mesh(devices, mine.axis_names, axis_types=mine.axis_types)


def local_part(tree: Any, mesh: Mesh) -> Any:
    """Arrays of `tree` placed on a hand-off mesh (`replica_meshes`), as arrays of this process's engine `mesh`
    alone: the same device buffers under the same PartitionSpec, no copy (arrays already on `mesh`'s devices are
    returned as they are). Each replica holds the whole of every array split the same way, so its part is whole."""

    def one(x: jax.Array) -> jax.Array:
        if x.is_fully_addressable:
            return x
        sharding = NamedSharding(mesh, x.sharding.spec)
        return jax.make_array_from_single_device_arrays(x.shape, sharding, [s.data for s in x.addressable_shards])

    return jax.tree.map(one, tree)
