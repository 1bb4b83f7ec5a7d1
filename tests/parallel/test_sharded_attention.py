"""`parallel.shard_attention` on 8 fake CPU devices equals the kernel on whole arrays, blockwise and without
communication; the SFT step of an `attention_impl: splash` model runs splash that way. Why a subprocess: see
`test_sharded_sft_step.py` (the device-count flag must precede JAX)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from jax.sharding import AbstractMesh, PartitionSpec
from worker_support import run_worker

from jaxseeker.parallel import MESH_AXES, make_rules
from jaxseeker.parallel.sharded_attention import attention_specs

WORKER = Path(__file__).with_name("sharded_attention_worker.py")
TOLERANCE = 1e-5  # float32 attention: the same sums, blocked differently (differences seen: ~5e-7)
DEVICE_BLOCK = 1 * 2 * 128 * 16  # the splash SFT / RL cases: q of 1 row, 2 heads, seq 128, head_dim 16 per device


@pytest.fixture(scope="module")
def report() -> dict:
    """The worker's JSON, run in a new interpreter that sees 8 CPU devices."""
    return run_worker(WORKER, 8)[0]


@pytest.mark.parametrize("case", ["data2_fsdp2_tensor2", "fsdp8", "tensor4_kv2", "context_mesh"])
def test_blockwise_attention_equals_the_whole_array_kernel(report, case):
    result = report[case]
    assert result["out_diff"] <= TOLERANCE * max(1.0, result["out_scale"]), result
    assert result["grad_diff"] <= TOLERANCE * max(1.0, result["out_scale"]), result


def test_batch_splits_over_data_axes_and_heads_over_tensor(report):
    # 4 rows over data=2 · fsdp=2, 4 heads / 2 kv heads over tensor=2: each device holds 1 row and 2 heads.
    assert report["data2_fsdp2_tensor2"]["block_shapes"] == [[1, 16, 2, 8]]
    assert report["data2_fsdp2_tensor2"]["specs"]["q"] == "P(('data', 'fsdp'), None, 'tensor', None)"
    assert report["fsdp8"]["block_shapes"] == [[1, 16, 4, 8]]
    assert report["context_mesh"]["block_shapes"] == [[1, 16, 2, 8]]  # mesh from `jax.set_mesh`, 8 heads / 4


def test_the_blockwise_program_moves_no_data(report):
    for case in ("data2_fsdp2_tensor2", "fsdp8", "context_mesh"):
        assert report[case]["collectives"] == [], case
        assert report[case]["out_spec"] == report[case]["specs"]["q"], case


def test_kv_heads_that_do_not_split_keep_every_head_on_each_device(report):
    # 2 kv heads cannot split 4 ways: heads stay whole (gathered from the tensor-sharded q), rows still split.
    result = report["tensor4_kv2"]
    assert result["block_shapes"] == [[2, 16, 8, 8]]
    assert result["specs"]["kv"] == "P('fsdp', None, None, None)"
    assert result["collectives"] == ["all-gather"]


def test_without_a_mesh_the_kernel_is_called_as_is(report):
    assert report["no_mesh"] == 0.0


def test_splash_kernel_runs_blockwise(report):
    assert report["splash"] <= TOLERANCE


def test_a_splash_model_trains_on_a_mesh_as_xla_attention_does_on_one_device(report):
    result = report["splash_sft_step"]
    assert result["loss_diff"] <= TOLERANCE * max(1.0, result["loss"]), result
    assert result["param_diff"] <= TOLERANCE, result
    assert result["params_moved"] > 10 * TOLERANCE, result  # the step did move the params


def test_the_splash_sft_step_runs_the_kernel_on_each_devices_block(report):
    # 4 rows over data·fsdp = 4, 4 heads / 2 kv heads over tensor = 2: a device holds 1 row, 2 heads, 1 kv head,
    # and the kernel (forward and backward) sees only that: q [2, 128, 16], k / v [1, 128, 16] per row. Called
    # directly instead, it would see the whole batch (q [4, 4, 128, 16]) gathered onto every device.
    result = report["splash_sft_step"]
    assert result["kernel_operands"], result
    assert all(math.prod(shape) <= DEVICE_BLOCK for shape in result["kernel_operands"]), result
    assert result["whole_operand_gathers"] == [], result


@pytest.mark.parametrize("piece", ["update", "logprobs"])
def test_the_splash_rl_step_runs_the_kernel_on_each_devices_block(report, piece):
    shapes = report["splash_rl_step"][piece]
    assert shapes and all(math.prod(shape) <= DEVICE_BLOCK for shape in shapes), shapes


def test_specs_split_heads_only_in_whole_kv_groups_and_never_on_a_batch_axis():
    mesh = AbstractMesh((2, 2, 2, 1, 1), MESH_AXES)
    specs = attention_specs(mesh, (4, 128, 8, 64), (4, 128, 2, 64))
    assert specs.q == specs.kv == PartitionSpec(("data", "fsdp"), None, "tensor", None)
    assert specs.segment_ids == PartitionSpec(("data", "fsdp"), None)
    one_kv_head = attention_specs(mesh, (4, 128, 8, 64), (4, 128, 1, 64))
    assert one_kv_head.q == PartitionSpec(("data", "fsdp"), None, None, None)
    odd_batch = attention_specs(mesh, (3, 128, 8, 64), (3, 128, 2, 64))
    assert odd_batch.q == PartitionSpec(None, None, "tensor", None)
    shared = make_rules({"batch": ["data"], "heads": ["data"], "kv_heads": ["data"]})
    assert attention_specs(mesh, (4, 128, 8, 64), (4, 128, 2, 64), shared).q == PartitionSpec("data", None, None, None)
