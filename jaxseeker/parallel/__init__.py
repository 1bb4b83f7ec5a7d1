"""Mesh, logical-axis sharding rules and the multi-host start."""

from jaxseeker.parallel.mesh import (
    MESH_AXES,
    MeshConfig,
    is_main_process,
    make_mesh,
    maybe_initialize_distributed,
    process_info,
)
from jaxseeker.parallel.rules import (
    DEFAULT_RULES,
    Rules,
    batch_sharding,
    logical_sharding,
    logical_to_spec,
    make_rules,
    replicated,
    shard_batch,
    tree_shardings,
)

__all__ = [
    "DEFAULT_RULES",
    "MESH_AXES",
    "MeshConfig",
    "Rules",
    "batch_sharding",
    "is_main_process",
    "logical_sharding",
    "logical_to_spec",
    "make_mesh",
    "make_rules",
    "maybe_initialize_distributed",
    "process_info",
    "replicated",
    "shard_batch",
    "tree_shardings",
]
