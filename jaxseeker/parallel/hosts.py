"""Host-side work of a multi-process run: each process's share of a list, Python objects exchanged between
processes, global arrays from (or back to) whole host arrays, and copies of global arrays one process can use alone.

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
from jax.sharding import Mesh, Sharding

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


def local_mesh(mesh: Mesh) -> Mesh:
    """A mesh over this process's devices alone, with the axes of `mesh`: its `tensor` and `expert` sizes when
    their product divides the local device count (else 1), every other local device on `fsdp`."""
    devices = jax.local_devices()
    tensor, expert = mesh.shape.get("tensor", 1), mesh.shape.get("expert", 1)
    if len(devices) % (tensor * expert):
        tensor = expert = 1
    return make_mesh(MeshConfig(data=1, fsdp=-1, tensor=tensor, expert=expert), devices)


def local_copy(tree: Any, shardings: Any) -> Any:
    """A copy of a pytree of global arrays on this process's devices, placed with `shardings` (shardings over a
    `local_mesh`, a prefix of the tree): collective, through host memory (each process holds the whole tree)."""
    return jax.device_put(multihost_utils.process_allgather(tree, tiled=True), shardings)
