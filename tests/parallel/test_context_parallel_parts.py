"""Context parallelism on 8 fake CPU devices, the parts besides the steps (test_context_parallel.py; a file of
their own so that xdist runs both side by side): splash attention over the context axis equals the reference,
memory per device falls as the context axis grows, no kernel holds a `[seq, seq]` array, and the engine decodes
with its KV cache split over the context axis. The four parts run one after the other in one interpreter (JAX and
jaxseeker start once)."""

from __future__ import annotations

from pathlib import Path

import pytest
from worker_support import run_worker

pytestmark = pytest.mark.heavy  # a minute or more of CPU: runs first (tests/conftest.py)

WORKER = Path(__file__).with_name("context_parallel_worker.py")
# float32 throughout; the meshes add the same terms in other orders (differences seen: ≤ 3e-6 on log-probs of
# magnitude ~5, ≤ 2e-7 on gradients of magnitude ~0.1).
TOLERANCE = 1e-5


PARTS = ("splash", "memory", "hlo", "decode")


@pytest.fixture(scope="module")
def parts() -> dict:
    """The worker's JSON for each of `PARTS`, from one new interpreter that sees 8 CPU devices."""
    return run_worker(WORKER, 8, *PARTS, timeout=1200)[0]


@pytest.fixture(scope="module")
def splash(parts) -> dict:
    return parts["splash"]


def test_splash_with_q_seq_shards_over_the_context_axis_equals_the_reference(splash):
    assert splash["kernel_runs_splash"] and splash["step_runs_splash"], splash  # not the blocked fallback
    assert splash["out_diff"] <= TOLERANCE * splash["out_scale"] and splash["grad_diff"] <= TOLERANCE, splash
    assert splash["sft_loss_diff"] <= TOLERANCE and splash["sft_grad_diff"] <= TOLERANCE, splash


@pytest.fixture(scope="module")
def memory(parts) -> dict:
    return parts["memory"]


@pytest.mark.parametrize("attention", ["ring", "all_gather"])
def test_compiled_memory_per_device_falls_as_the_context_axis_grows(memory, attention):
    compiled = [memory[f"{attention}_{n}"]["compiled"] for n in (1, 2, 4, 8)]
    assert all(b < 0.7 * a for a, b in zip(compiled, compiled[1:])), compiled
    assert compiled[-1] < compiled[0] / 4, compiled


@pytest.mark.parametrize("attention", ["ring", "all_gather"])
def test_the_plan_follows_the_compiled_step_on_the_safe_side(memory, attention):
    """`jaxseeker plan` errs high by at most a third on XLA:CPU (its coefficients were fitted there without context
    parallelism); docs/guides/long_context.md lists both."""
    for n in (1, 2, 4, 8):
        result = memory[f"{attention}_{n}"]
        assert 1.0 <= result["planned"] / result["compiled"] <= 1.35, (n, result)


def test_ring_attention_holds_less_than_all_gather_on_a_split_sequence(memory):
    for n in (2, 4, 8):
        assert memory[f"ring_{n}"]["compiled"] < memory[f"all_gather_{n}"]["compiled"], n


@pytest.fixture(scope="module")
def hlo(parts) -> dict:
    return parts["hlo"]


@pytest.mark.parametrize("program, seq_per_device", [("blocked", 8192), ("ring", 1024), ("blocked_sft_loss", 8192)])
def test_no_array_of_the_compiled_kernels_is_sequence_by_sequence(hlo, program, seq_per_device):
    """At seq = 8192 (ring: 1024 per device over context = 8) no array has two dimensions as long as the sequence a
    device holds: masks and scores exist one tile (≤ 512 × 512) at a time. The model's loss includes
    `model.hidden_states`, whose `[batch, seq, seq]` mask XLA drops as no kernel reads it."""
    shapes = [tuple(s) for s in hlo[program]]
    assert any(seq_per_device in s for s in shapes)  # the sequence is there, in one dimension
    assert [s for s in shapes if sum(d >= seq_per_device for d in s) >= 2] == []


@pytest.fixture(scope="module")
def decode(parts) -> dict:
    return parts["decode"]


def test_the_engine_decodes_with_its_kv_cache_split_over_the_context_axis(decode):
    assert decode["tokens"]["context4"] == decode["tokens"]["one_device"]
    # Layer 0's key pool: [parts, pages, kv_heads, head_dim, page], each page's positions over the context axis.
    assert decode["k_spec"] == "P('data', None, None, None, 'context')"
    parts, pages, kv_heads, head_dim, page = decode["k_shape"]
    assert parts == 2 and page % 4 == 0
    assert decode["k_shard_shape"] == [1, pages, kv_heads, head_dim, page // 4]
