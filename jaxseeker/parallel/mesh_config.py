"""The mesh as a config: axis sizes and the `data=1,fsdp=-1,…` text form (`cli_args` builds `--mesh` on it).

Nothing here imports jax, so commands can declare `--mesh` without starting it; `make_mesh` (in `parallel.mesh`)
lays a `MeshConfig` over devices.
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from jax.sharding import Mesh

MESH_AXES = ("data", "fsdp", "tensor", "expert", "context")


@dataclasses.dataclass(frozen=True)
class MeshConfig:
    """Size of each mesh axis; at most one axis may be -1, meaning "all the devices left".

    data: pure data parallelism (params replicated). fsdp: data parallelism with params and
    optimizer state sharded (ZeRO-3). tensor: heads / mlp / vocab split inside a layer.
    expert: MoE experts split across devices (dense parts see it as more data parallelism).
    context: the sequence split across devices (context parallelism): the residual stream between layers and
    the attention (ring or all-gather-KV, `parallel.context_attention`) hold 1/context of every row.
    """

    data: int = 1  # pure data parallelism
    fsdp: int = -1  # data parallelism with params and optimizer state sharded
    tensor: int = 1  # heads, MLP and vocabulary split inside a layer
    expert: int = 1  # MoE experts split across devices
    context: int = 1  # each row's sequence split across devices

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
    def from_dict(cls, values: dict) -> MeshConfig:
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


def mesh_text(mesh: Mesh | None) -> str:
    """Where an engine runs, for a command's closing line: "one device", or e.g. "a data=1,fsdp=1,tensor=4,expert=1
    mesh of 4 devices" (the context axis is named only when it splits the sequence)."""
    if mesh is None:
        return "one device"
    sizes = ",".join(f"{axis}={n}" for axis, n in mesh.shape.items() if axis != "context" or n > 1)
    return f"a {sizes} mesh of {mesh.size} device{'s' * (mesh.size > 1)}"
