"""The sharded SFT step equals the single-device step on 8 fake CPU devices, for every mesh.

Why a subprocess: `XLA_FLAGS=--xla_force_host_platform_device_count=8` only takes effect if it is
set before JAX creates its CPU backend, and the whole `tests/` tree runs in one pytest process
where other tests have already started JAX with one device. A conftest that sets the flag would be
too late (or would change every other test's device count), so `sharded_step_worker.py` runs once
in a fresh interpreter and reports JSON; the tests below check its numbers. `fake_cpu_devices_env` also
sizes XLA:CPU's thread pool so the 8 devices' collectives cannot deadlock on 2 cores.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest

from jaxseeker.parallel.cpu_devices import fake_cpu_devices_env

pytestmark = pytest.mark.heavy  # a minute or more of CPU: runs first (tests/conftest.py)

WORKER = Path(__file__).with_name("sharded_step_worker.py")
TOLERANCE = 1e-5


def run_on_8_cpu_devices(script: Path, arg_lists: list[list[str]], timeout: float = 600) -> list[dict]:
    """Run `script` once per argument list, concurrently, each in a new interpreter that sees 8 CPU
    devices; return the JSON of each run's last stdout line."""
    env = fake_cpu_devices_env(8)  # tests/conftest.py's fast-compile XLA flags come along
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for args in arg_lists
    ]
    outputs = [p.communicate(timeout=timeout) for p in procs]
    for p, (_, err) in zip(procs, outputs):
        if p.returncode != 0:
            pytest.fail(f"{script.name} {p.args[2:]} failed (exit {p.returncode}):\n{err[-4000:]}")
    return [json.loads(out.strip().splitlines()[-1]) for out, _ in outputs]


@pytest.fixture(scope="module")
def report() -> dict:
    """The worker's per-model, per-mesh comparison (the dense and MoE cases run side by side)."""
    dense, moe = run_on_8_cpu_devices(WORKER, [["dense"], ["moe"]])
    return {**dense, **moe}


CASES = [("dense", "data8"), ("dense", "fsdp8"), ("dense", "mixed222"), ("moe", "expert4_tensor2")]


@pytest.mark.parametrize("model_kind, mesh_name", CASES)
def test_sharded_step_matches_single_device(report, model_kind, mesh_name):
    result = report[model_kind][mesh_name]
    assert result["loss_diff"] <= TOLERANCE, result
    assert result["param_diff"] <= TOLERANCE, result
    assert result["params_moved"] > 10 * TOLERANCE  # the step really moved the params (by ~2 lr)
    assert result["losses"][1] < result["losses"][0]


@pytest.mark.parametrize("model_kind, mesh_name", CASES)
def test_params_and_adam_moments_have_the_rules_shardings(report, model_kind, mesh_name):
    assert report[model_kind][mesh_name]["wrong_shardings"] == []


AXIS_SIZES = {
    "data8": {"data": 8},
    "fsdp8": {"fsdp": 8},
    "mixed222": {"data": 2, "fsdp": 2, "tensor": 2},
    "expert4_tensor2": {"tensor": 2, "expert": 4},
}


@pytest.mark.parametrize("model_kind, mesh_name", CASES)
def test_an_hf_checkpoint_loads_straight_onto_the_mesh_each_device_holding_its_slice(report, model_kind, mesh_name):
    result = report[model_kind][mesh_name]
    assert result["loaded_diff"] == 0.0 and result["loaded_specs"] == result["specs"]  # the training layout
    for path, spec in result["loaded_specs"].items():  # a leaf split n ways leaves 1/n of it on each device
        ways = math.prod(AXIS_SIZES[mesh_name][axis] for axis in re.findall(r"'(\w+)'", spec))
        assert result["loaded_fractions"][path] == 1 / ways, (path, spec)
    assert (min(result["loaded_fractions"].values()) < 1) == (mesh_name != "data8")


def test_the_step_keeps_activations_split_by_rows_so_the_plan_holds_under_fsdp(report):
    """`make_sft_step` holds the residual stream to the batch sharding (`parallel.activation_constraint`); without it
    XLA:CPU keeps activations with the whole batch on every device (2.1× the plan)."""
    ratio = report["compiled_over_plan_fsdp8"]
    assert 0.75 <= ratio["constrained"] <= 1.25 and ratio["constrained"] < ratio["unconstrained"], ratio


def test_default_chunked_loss_equals_full_logits_nll(report):
    assert report["dense"]["full_logits_loss_diff"] <= TOLERANCE


def test_shardings_follow_the_table(report):
    dense = report["dense"]
    assert set(dense["data8"]["specs"].values()) <= {
        "P(None,)",
        "P(None, None)",
        "P(None, None, None)",
        "P(None, None, None, None)",
    }  # data parallel: replicated
    assert dense["fsdp8"]["specs"]["['embed']"] == "P(None, 'fsdp')"
    mixed = dense["mixed222"]["specs"]
    assert mixed["['embed']"] == "P('tensor', 'fsdp')"  # [vocab, embed]
    assert mixed["['blocks'][0]['q']"] == "P(None, 'fsdp', 'tensor', None)"  # [layers, embed, heads, head_dim]
    assert mixed["['blocks'][0]['down']"] == "P(None, 'tensor', 'fsdp')"  # [layers, mlp, embed]
    moe = report["moe"]["expert4_tensor2"]["specs"]
    assert moe["['blocks'][0]['gate']"] == "P(None, 'expert', None, 'tensor')"  # [layers, experts, embed, mlp]
    assert moe["['blocks'][0]['router']"] == "P(None, None, 'expert')"  # [layers, embed, experts]


def test_checkpoint_from_one_mesh_restores_onto_another(report):
    restored = report["dense"]["restore_222_onto_fsdp8"]
    assert restored["value_diff"] == 0.0
    assert restored["wrong_shardings"] == []
    assert restored["data_state"] == {"epoch": 0, "index": 16}
