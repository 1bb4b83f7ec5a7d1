"""Context parallelism on 8 fake CPU devices: the SFT and RL steps of packed rows split along the sequence equal
one device's (splash, memory, kernels and decoding: test_context_parallel_parts.py). Why a subprocess: see
`test_sharded_sft_step.py` (the device-count flag must precede JAX)."""

from __future__ import annotations

from pathlib import Path

import pytest
from worker_support import run_worker

pytestmark = pytest.mark.heavy  # a minute or more of CPU: runs first (tests/conftest.py)

WORKER = Path(__file__).with_name("context_parallel_worker.py")
# float32 throughout; the meshes add the same terms in other orders (differences seen: ≤ 3e-6 on log-probs of
# magnitude ~5, ≤ 2e-7 on gradients of magnitude ~0.1).
TOLERANCE = 1e-5
MESHES = ["context4_ring", "context4_all_gather", "tensor2_context4_ring", "data2_fsdp2_tensor2_blocked"]


@pytest.fixture(scope="module")
def steps() -> dict:
    """The worker's JSON for the steps part, from a new interpreter that sees 8 CPU devices."""
    return run_worker(WORKER, 8, "steps", timeout=1200)[0]["steps"]


@pytest.mark.parametrize("mesh", MESHES)
def test_sft_loss_and_gradients_of_packed_rows_on_the_mesh_equal_one_devices(steps, mesh):
    result = steps[mesh]
    assert steps["grad_scale"] > 100 * TOLERANCE  # gradients large enough for the comparison to mean something
    assert result["sft_loss_diff"] <= TOLERANCE and result["sft_grad_diff"] <= TOLERANCE, result
    assert result["sft_step_loss_diff"] <= TOLERANCE and result["sft_step_param_diff"] <= TOLERANCE, result
    assert result["params_moved"] > 10 * TOLERANCE, result  # the step really moved the params


@pytest.mark.parametrize("mesh", MESHES)
def test_rl_update_and_old_log_probs_on_the_mesh_equal_one_devices(steps, mesh):
    result = steps[mesh]
    assert steps["rl_grad_scale"] > 100 * TOLERANCE
    assert result["rl_loss_diff"] <= TOLERANCE and result["rl_grad_diff"] <= TOLERANCE, result
    assert result["logprobs_diff"] <= TOLERANCE, result  # per token, back in the order of the rows as written
    assert result["rl_step_loss_diff"] <= TOLERANCE and result["rl_step_param_diff"] <= TOLERANCE, result
