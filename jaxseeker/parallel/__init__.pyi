"""Names `jaxseeker.parallel` exports, each imported from its module on first use (lazy_loader reads this stub)."""

from .context_layout import ContextLayout, context_layout
from .hosts import all_gather_objects, global_array, host_array, local_part, process_share, replica_meshes
from .mesh import is_main_process, make_mesh, maybe_initialize_distributed, process_info
from .mesh_config import MESH_AXES, MeshConfig, parse_mesh
from .params import param_shardings
from .rules import (
    DEFAULT_RULES,
    GENERATION_RULES,
    Rules,
    activation_constraint,
    batch_sharding,
    batch_shards,
    logical_sharding,
    logical_to_spec,
    make_rules,
    replicated,
    shard_batch,
    tree_shardings,
)
from .sharded_attention import context_attention, shard_attention

__all__ = [
    "DEFAULT_RULES",
    "GENERATION_RULES",
    "MESH_AXES",
    "ContextLayout",
    "MeshConfig",
    "Rules",
    "activation_constraint",
    "all_gather_objects",
    "batch_sharding",
    "batch_shards",
    "context_attention",
    "context_layout",
    "global_array",
    "host_array",
    "is_main_process",
    "local_part",
    "logical_sharding",
    "logical_to_spec",
    "make_mesh",
    "make_rules",
    "maybe_initialize_distributed",
    "param_shardings",
    "parse_mesh",
    "process_info",
    "process_share",
    "replica_meshes",
    "replicated",
    "shard_attention",
    "shard_batch",
    "tree_shardings",
]
