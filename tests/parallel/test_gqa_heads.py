"""Qwen2.5-7B's head layout (28 query heads, 4 KV heads) on a tensor axis of 8, which neither count divides: one
SFT step of the model scaled down, with the attention XLA partitions itself (`attention_impl: xla`), trains as on
one device, and its compiled program never gathers the whole K or V onto a device. (The kernels `shard_attention`
runs per device, blocked and splash, keep the heads whole where the kv heads do not split: the `tensor4_kv2` case of
`test_sharded_attention.py`.) Why a subprocess: see `test_sharded_sft_step.py` (the device-count flag must precede
JAX)."""

from __future__ import annotations

from pathlib import Path

import pytest
from worker_support import run_worker

WORKER = Path(__file__).with_name("gqa_heads_worker.py")
BATCH, SEQ, KV_HEADS, HEAD_DIM = 2, 128, 4, 8  # as in the worker
TOLERANCE = 1e-5  # float32 losses of one step, summed in other orders (differences seen: ~1e-7)


@pytest.fixture(scope="module")
def report() -> dict:
    return run_worker(WORKER, 8)[0]


def test_the_step_on_tensor_8_equals_one_device(report):
    assert report["tensor8_loss"] == pytest.approx(report["one_device_loss"], abs=TOLERANCE)
    assert report["one_device_loss"] > 1.0  # a real cross-entropy over 64 tokens, not a degenerate 0


def test_no_all_gather_rebuilds_the_whole_k_or_v(report):
    whole_kv = sorted([BATCH, SEQ, KV_HEADS, HEAD_DIM])  # in any layout: [b, s, kv, d], [b, kv, s, d], [b, kv, d, s]
    flat = sorted([BATCH, SEQ, KV_HEADS * HEAD_DIM])  # or with the heads flattened
    gathered = [g["dims"] for g in report["all_gathers"]]
    assert gathered, "expected the step to gather something (weights or activations) on 8 devices"
    assert not [d for d in gathered if sorted(d) in (whole_kv, flat)], gathered
