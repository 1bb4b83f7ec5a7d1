"""The logical-axis rules table: specs, the one-mesh-axis-per-array check, divisibility fallback."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from jax.sharding import AbstractMesh
from jax.sharding import PartitionSpec as P

from jaxseeker.parallel import (
    DEFAULT_RULES,
    MESH_AXES,
    MeshConfig,
    batch_sharding,
    batch_shards,
    logical_to_spec,
    make_mesh,
    make_rules,
    shard_batch,
    tree_shardings,
)

MESH_222 = AbstractMesh((2, 2, 2, 1, 1), MESH_AXES)  # data, fsdp, tensor, expert, context
MESH_EXPERT = AbstractMesh((1, 2, 1, 4, 1), MESH_AXES)
MESH_CONTEXT = AbstractMesh((2, 1, 2, 1, 4), MESH_AXES)


def test_weights_split_by_fsdp_and_tensor():
    assert logical_to_spec(("vocab", "embed"), DEFAULT_RULES, MESH_222, (512, 64)) == P("tensor", "fsdp")
    assert logical_to_spec(("layers", "embed", "heads", "head_dim"), DEFAULT_RULES, MESH_222, (2, 64, 4, 16)) == P(
        None, "fsdp", "tensor", None
    )


def test_batch_uses_every_data_like_axis():
    assert logical_to_spec(("batch", "seq"), DEFAULT_RULES, MESH_EXPERT, (16, 128)) == P(("fsdp", "expert"), None)
    assert logical_to_spec(("layers", "experts", "embed", "mlp"), DEFAULT_RULES, MESH_EXPERT, (2, 4, 64, 32)) == P(
        None, "expert", "fsdp", None
    )
    assert batch_shards(MESH_EXPERT) == 8 and batch_shards(MESH_222) == 4  # tensor does not split the batch
    assert batch_shards(MESH_222, make_rules({"batch": "data"})) == 2


def test_indivisible_dims_fall_back():
    # kv_heads = 3 cannot split over tensor = 2: replicated.
    assert logical_to_spec(("embed", "kv_heads"), DEFAULT_RULES, MESH_222, (64, 3)) == P("fsdp", None)
    # batch 4 over (data 2, fsdp 2, expert 2): 8 does not divide 4, the prefix (data, fsdp) does.
    mesh = AbstractMesh((2, 2, 1, 2, 1), MESH_AXES)
    assert logical_to_spec(("batch", "seq"), DEFAULT_RULES, mesh, (4, 8)) == P(("data", "fsdp"), None)


def test_rows_split_along_the_sequence_over_context_and_residuals_over_tensor_too():
    assert logical_to_spec(("batch", "seq"), DEFAULT_RULES, MESH_CONTEXT, (4, 64)) == P("data", "context")
    # between layers the residual stream is split over context and tensor (sequence parallelism)
    assert logical_to_spec(("batch", "residual_seq", None), DEFAULT_RULES, MESH_CONTEXT, (4, 64, 32)) == P(
        "data", ("context", "tensor"), None
    )
    assert logical_to_spec(("batch", "residual_seq", None), DEFAULT_RULES, MESH_222, (4, 64, 32)) == P(
        ("data", "fsdp"), "tensor", None
    )
    # the KV cache's slots too: [layers, batch, seq, kv_heads, head_dim]
    assert logical_to_spec(
        ("layers", "batch", "seq", "kv_heads", "head_dim"), DEFAULT_RULES, MESH_CONTEXT, (2, 4, 64, 2, 16)
    ) == P(None, "data", "context", "tensor", None)


def test_a_mesh_axis_may_shard_one_dimension_only():
    rules = make_rules({"mlp": "fsdp"})  # embed and mlp would both take fsdp
    with pytest.raises(ValueError, match="mesh axis 'fsdp' is mapped from both 'embed' and 'mlp'"):
        logical_to_spec(("embed", "mlp"), rules, MESH_222, (64, 128))


def test_unknown_names_are_errors():
    with pytest.raises(KeyError, match="logical axis 'hidden'"):
        logical_to_spec(("hidden",), DEFAULT_RULES, MESH_222, (64,))
    with pytest.raises(ValueError, match="mesh axis 'model'"):
        logical_to_spec(("embed",), make_rules({"embed": ("model",)}), MESH_222, (64,))
    with pytest.raises(ValueError, match="2 names but the array has shape"):
        logical_to_spec(("embed", "mlp"), DEFAULT_RULES, MESH_222, (64,))


def test_tree_shardings_follow_the_params_structure():
    mesh = make_mesh(MeshConfig())
    params = {"dense": {"kernel": np.zeros((8, 4)), "bias": np.zeros(4)}}
    axes = {"dense": {"kernel": ("embed", "mlp"), "bias": ("mlp",)}}
    shardings = tree_shardings(axes, params, mesh)
    assert jax.tree.structure(shardings) == jax.tree.structure(params)
    assert shardings["dense"]["kernel"].mesh == mesh


def test_shard_batch_places_host_rows_on_the_mesh():
    mesh = make_mesh(MeshConfig())
    batch = {"tokens": np.arange(12).reshape(4, 3), "loss_mask": np.ones((4, 3), np.int32)}
    sharding = batch_sharding(mesh, (4, 3))
    placed = shard_batch(batch, sharding)
    assert placed["tokens"].sharding == sharding
    np.testing.assert_array_equal(np.asarray(placed["tokens"]), batch["tokens"])
