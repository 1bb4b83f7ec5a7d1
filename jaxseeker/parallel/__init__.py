"""Mesh, logical-axis sharding rules, the multi-host start and the host-side work of a multi-process run."""

from jaxseeker.parallel.hosts import (
    all_gather_objects,
    global_array,
    host_array,
    local_copy,
    local_mesh,
    process_share,
)
from jaxseeker.parallel.mesh import (
    MESH_AXES,
    MeshConfig,
    is_main_process,
    make_mesh,
    maybe_initialize_distributed,
    parse_mesh,
    process_info,
)
from jaxseeker.parallel.params import param_shardings
from jaxseeker.parallel.rules import (
    DEFAULT_RULES,
    activation_constraint,
    Rules,
    batch_sharding,
    batch_shards,
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
    "activation_constraint",
    "all_gather_objects",
    "batch_sharding",
    "batch_shards",
    "global_array",
    "host_array",
    "is_main_process",
    "local_copy",
    "local_mesh",
    "logical_sharding",
    "logical_to_spec",
    "make_mesh",
    "make_rules",
    "maybe_initialize_distributed",
    "param_shardings",
    "parse_mesh",
    "process_info",
    "process_share",
    "replicated",
    "shard_batch",
    "tree_shardings",
]
