"""The rollout engine in the RL layout on 8 fake CPU devices (`engine_layout_worker.py`): weights stationary (the
compiled decode step gathers no weight, in or out of its loop), the paged cache sharded from creation with each
replica's slots on its own part of the pool (no step gathers a page), the weights handed over from the trainer's fsdp
shards on device, and per-device memory as `plan` counts it."""

import math
from pathlib import Path

import pytest
from worker_support import run_worker

SLOTS_PER_REPLICA, TENSOR = 4, 2  # the worker's 16 slots over 4 replicas of 2 devices
ROW_PAGES, PAGE = 4, 128  # its slots of 512 positions


@pytest.fixture(scope="module")
def report() -> dict:
    result, stderr = run_worker(Path(__file__).with_name("engine_layout_worker.py"), 8)
    return dict(result, stderr=stderr)


def test_the_engine_decodes_as_one_device_does(report):
    assert report["devices"] == 8
    assert report["mesh"] == {"data": 4, "fsdp": 1, "tensor": 2, "expert": 1, "context": 1}
    assert report["equal"]  # greedy tokens of the handed-over weights == unsharded model.forward's


def test_the_decode_step_gathers_no_weight_and_no_page(report):
    weights = {math.prod(shape) for shape in report["param_shapes"]}  # per-layer and stacked, axes merged or not
    # What the training layout's decode step gathers: whole weights (the check finds them when they are there).
    assert any(math.prod(g["dims"]) in weights for g in report["train_gathers"])
    # The generation layout's: only the sampler's per-row values of each tensor shard, inside the loop.
    assert report["gathers"], "the sampler's gathers over the vocabulary shards are expected"
    for gather in report["gathers"]:
        assert math.prod(gather["dims"]) not in weights
        assert math.prod(gather["dims"]) <= SLOTS_PER_REPLICA * TENSOR, gather  # not a page: 16 × 128 a head
    assert report["prefill_gathers"] == []  # each replica's rows write and read their own part of the pool


def test_the_weights_are_split_over_tensor_and_cast(report):
    assert [256, 64] in report["param_shards"]  # embed [vocab 512, embed 64]: vocab over tensor = 2
    assert [512, 64] not in report["param_shards"]
    assert report["handoff_dtype"] == ["bfloat16"]  # the trainer's float32, cast on the way


def test_the_handoff_replicates_no_weight(report):
    # XLA's partitioner says so when it reshards by replicating a whole array on every device first.
    assert "Involuntary full rematerialization" not in report["stderr"]


def test_the_cache_is_sharded_from_creation_as_planned(report):
    assert report["k_spec"] == "P('data', None, 'tensor')"  # the pool's parts over the replicas, kv heads over tensor
    # [parts, pages, kv_heads, head_dim, page]: a replica's part holds its slots' pages
    assert report["k_shards"] == [[1, SLOTS_PER_REPLICA * ROW_PAGES, 1, 16, PAGE]]
    planned = report["plan"]["kv_cache"]
    assert report["cache_bytes_per_device"] == planned
    # The jitted creation outputs one shard per device and holds nothing more: no whole cache on one device.
    assert abs(report["cache_init"]["peak"] - planned) <= 0.1 * planned


def test_compiled_memory_per_device_is_within_the_plan(report):
    plan, calls, compiled = report["plan"], report["plan_calls"], report["compiled"]
    resident = plan["engine_weights"] + plan["kv_cache"]
    assert abs(compiled["decode"] - (resident + calls["decode"])) <= 0.1 * (resident + calls["decode"])
    # The prefill's planned scores are an upper bound (XLA:CPU fuses them away).
    assert compiled["prefill"] <= resident + calls["prefill"]
    # The hand-off holds the trainer's shard and the engine's weights, and less than the plan's temporaries.
    held = report["trainer_bytes_per_device"] + plan["engine_weights"]
    assert held <= compiled["handoff"] <= held + plan["handoff"]
