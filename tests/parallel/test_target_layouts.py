"""Each target's layout as `jaxseeker plan --target` fits its shipped paper recipe, scaled down to 8 fake CPU devices,
runs one real step that equals one device's: the v6e-64 SFT of Qwen3-8B at 128K (fsdp × context, the weights split
over both, two micro-batches, splash under context parallelism) and the RL updates of the v5p-128 Qwen2.5-72B and
the 8×H100 Qwen2.5-7B DUPO recipes (fsdp, the rollout engine's replicas and slots, the mini-batches, rows per pass and
remat).

Scaling keeps what decides how the layout divides the work:
- mesh: every axis > 1 stays > 1; tensor, context and expert keep their planned sizes, fsdp and data share the rest;
- heads: the target's query and KV heads over their largest common factor that leaves each count divisible by
  exactly the same tensor sizes of the layout (the mesh's and the engine's): 64 / 8 with engine replicas of 4 →
  32 / 4, 28 / 4 with replicas of 2 → 14 / 2, 32 / 8 on tensor 2 → 8 / 2;
- rows: the plan's rows per batch shard in a pass, its micro-batches (SFT) or mini-batches (RL), and in RL two passes
  per mini-batch (the plans have 4 and 32: a mini-batch always spans several); the engine's chips and slots a replica;
- kernel: the plan's where the CPU runs it: splash interpreted (`JAXSEEKER_INTERPRET_KERNELS`) on rows of 128 tokens
  a device; splash on the RL cases' 64-token rows becomes blocked (the GPU's kernel, the TPU's second choice).
Widths are tiny and float32 (the recipes' bf16 would drown the comparison in bf16 rounding). The reference is one
device with the XLA attention. Why a subprocess: see `test_sharded_sft_step.py`.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from worker_support import run_worker

from jaxseeker.parallel import batch_shards
from jaxseeker.planning.chips import TARGETS
from jaxseeker.planning.command import fit_recipe, recipe_stages
from jaxseeker.planning.memory import abstract_mesh
from jaxseeker.planning.targets import with_changes
from jaxseeker.train.recipe import read_recipe

pytestmark = pytest.mark.heavy  # a minute or more of CPU: runs first (tests/conftest.py)

WORKER = Path(__file__).with_name("target_layout_worker.py")
DEVICES = 8
RECIPES = {  # target: (shipped recipe, overrides)
    "v5p-128": ("websailor_qwen2.5-72b_dupo", []),
    "v6e-64": ("webexplorer_qwen3-8b_sft", ["data.seq_len=131072"]),
    "h100x8": ("websailor_qwen2.5-7b_dupo", []),
}
WIDTHS = {"vocab_size": 128, "hidden_size": 32, "intermediate_size": 64, "num_layers": 2, "head_dim": 4}
# The SFT case's vocabulary: large enough that XLA, left to itself, looks the embedding up as every row whole at a
# share of the width instead of gathering the table (seen at 8,192 and width 32; at 128 it gathers the table).
SFT_WIDTHS = {"vocab_size": 8192}
SPLASH_TILE = 128  # splash's rows: a multiple of 128 tokens on each device
RL_SEQ, RL_NEW_TOKENS, RL_PASSES = 64, 8, 2
U = 2.0**-24  # float32's unit roundoff
PARAM_TOLERANCE = 1e-5  # Adam at lr 1e-4, eps 1e-6, as in test_sharded_sft_step.py (differences seen: ~1e-7)
EPS_HIGH = 0.28  # the DUPO recipes' upper clip: a policy-loss term is at most |A| · (1 + EPS_HIGH)


def scaled_mesh(sizes: dict[str, int], devices: int = DEVICES) -> dict[str, int]:
    """`sizes` on `devices`: tensor, context and expert as planned, fsdp and data (each kept > 1 if it was) the rest."""
    out = {axis: sizes.get(axis, 1) for axis in ("tensor", "context", "expert")}
    rest = devices // math.prod(out.values())
    data = min(sizes.get("data", 1), 2 if sizes.get("fsdp", 1) > 1 else rest)
    out.update(data=data, fsdp=rest // data)
    return out


def scaled_heads(heads: int, kv_heads: int, tensors: tuple[int, ...]) -> tuple[int, int]:
    """(query, KV) heads divided by their largest common factor that keeps the divisibility by every size in
    `tensors`."""
    for factor in sorted((d for d in range(1, math.gcd(heads, kv_heads) + 1) if kv_heads % d == 0), reverse=True):
        q, kv = heads // factor, kv_heads // factor
        if heads % factor == 0 and all(
            (q % t == 0) == (heads % t == 0) and (kv % t == 0) == (kv_heads % t == 0) for t in tensors
        ):
            return q, kv
    raise AssertionError("unreachable: factor 1 keeps every divisibility")


def cpu_kernel(impl: str, seq_per_device: int) -> str:
    """The plan's training attention where the CPU runs it (module docstring), else blocked."""
    if impl == "splash" and seq_per_device % SPLASH_TILE == 0:
        return "splash"
    return "blocked" if impl == "splash" else impl


def scaled_case(target: str) -> dict:
    """The worker's case for `target`: its shipped recipe fitted (`plan --target`), scaled (module docstring)."""
    name, overrides = RECIPES[target]
    recipe = read_recipe(name, overrides)
    fit = fit_recipe(recipe, TARGETS[target])
    rp = recipe_stages(with_changes(recipe, fit.changes))
    [stage] = fit.stages
    mesh = scaled_mesh(fit.mesh)
    rows_per_shard = stage.rows // batch_shards(abstract_mesh(fit.mesh), rp.rules)
    rows = rows_per_shard * batch_shards(abstract_mesh(mesh), rp.rules)
    q, kv = scaled_heads(rp.cfg.num_heads, rp.cfg.num_kv_heads, (fit.mesh["tensor"], stage.engine_tensor or 1))
    seq = SPLASH_TILE * mesh["context"] if stage.kind == "sft" else RL_SEQ
    model = {
        **WIDTHS,
        **(SFT_WIDTHS if stage.kind == "sft" else {}),
        "model_type": rp.cfg.model_type,
        "qkv_bias": rp.cfg.qkv_bias,
        "qk_norm": rp.cfg.qk_norm,
        "tie_word_embeddings": rp.cfg.tie_word_embeddings,
        "num_heads": q,
        "num_kv_heads": kv,
        "remat": stage.remat,
        "attention_impl": cpu_kernel(rp.cfg.attention_impl, seq // mesh["context"]),
        "context_attention": rp.cfg.context_attention,
    }
    case = {"kind": stage.kind, "mesh": mesh, "model": model, "seq": seq, "plan_mesh": fit.mesh}
    if stage.kind == "sft":
        return case | {"rows": rows, "grad_accum": stage.grad_accum}
    replicas = TARGETS[target].chips // stage.engine_tensor
    return case | {
        "engine_tensor": stage.engine_tensor,
        "slots": stage.slots // replicas * (DEVICES // stage.engine_tensor),
        "stacked_prefill": stage.stacked_prefill,
        "groups": rows * RL_PASSES * stage.updates // stage.group_size,
        "group_size": stage.group_size,
        "new_tokens": RL_NEW_TOKENS,
        "mini_batches": stage.updates,
        "rows_per_pass": rows,
    }


@pytest.fixture(scope="module")
def cases() -> dict[str, dict]:
    return {target: scaled_case(target) for target in RECIPES}


@pytest.fixture(scope="module")
def report(cases) -> dict:
    return run_worker(WORKER, DEVICES, json.dumps(cases))[0]


def test_the_scaled_layouts_keep_the_plans_axes_heads_and_engine(cases):
    for target, case in cases.items():
        plan = case["plan_mesh"]
        assert math.prod(case["mesh"].values()) == DEVICES, target
        assert {a for a, n in case["mesh"].items() if n > 1} == {a for a, n in plan.items() if n > 1}, target
    assert cases["v6e-64"]["mesh"] == {"data": 1, "fsdp": 2, "tensor": 1, "context": 4, "expert": 1}
    assert cases["v6e-64"]["grad_accum"] == 2 and cases["v6e-64"]["model"]["attention_impl"] == "splash"
    heads = {t: (c["model"]["num_heads"], c["model"]["num_kv_heads"]) for t, c in cases.items()}
    assert heads == {"v5p-128": (32, 4), "v6e-64": (4, 1), "h100x8": (7, 1)}
    assert (
        cases["v5p-128"]["engine_tensor"] == 4 and cases["v5p-128"]["slots"] == 2 * 8
    )  # 2 replicas of 4, 8 slots each
    assert cases["h100x8"]["engine_tensor"] == 1 and cases["h100x8"]["model"]["attention_impl"] == "blocked"


def test_the_v6e_sft_micro_steps_and_update_equal_one_device(cases, report):
    """Each micro-step's loss is a mean of rows × seq positive NLL terms, each from dot products of at most
    `vocab_size` or seq terms: in float32 the two orders of summation differ by (terms + longest dot) · u of it."""
    case, result = cases["v6e-64"], report["v6e-64"]
    tolerance = (case["rows"] * case["seq"] + max(case["model"]["vocab_size"], case["seq"])) * U
    assert len(result["losses"]) == case["grad_accum"]
    for loss, one in zip(result["losses"], result["one_device_losses"]):
        assert loss == pytest.approx(one, rel=tolerance)
        assert one > 1.0  # a real cross-entropy, not a degenerate 0
    assert result["param_diff"] <= PARAM_TOLERANCE < result["params_moved"] / 10


def test_the_v6e_weights_and_adam_moments_split_over_fsdp_and_context_without_a_whole_row_embedding(cases, report):
    """Context-parallel SFT holds 1 / (fsdp × context) of the state a device (`embed` over fsdp and context; the q /
    k norms and the optimizer's step counters, a few dozen bytes, stay whole). The embedding lookup reads the table
    gathered over context at least and yields the device's sequence chunk, as many elements as the device's share of
    the residual stream (its rows at the whole width, or every row at its share of the width as under fsdp alone),
    and the only arrays of a whole row by the width (or its share) are those of the device's own rows (the chunked
    loss gathers the final hidden states): none holds the whole batch (left to XLA, the lookup gathered every row
    whole at its share of the width)."""
    case, layout = cases["v6e-64"], report["v6e-64"]["layout"]
    fsdp, context = case["mesh"]["fsdp"], case["mesh"]["context"]
    assert layout["state_bytes"] * fsdp * context == pytest.approx(report["v6e-64"]["one_device_state_bytes"], rel=0.01)
    rows = case["rows"] // fsdp
    [lookup] = layout["lookups"]  # rows × its sequence chunk × width, split over fsdp by rows or by width
    assert lookup[1] == case["seq"] // context and math.prod(lookup) == rows * lookup[1] * WIDTHS["hidden_size"]
    assert layout["whole_rows"] and all(shape[0] == rows for shape in layout["whole_rows"]), layout["whole_rows"]


@pytest.mark.parametrize("target", ["v5p-128", "h100x8"])
def test_the_rl_update_in_the_plans_mini_batches_and_passes_equals_one_device(cases, report, target):
    """Every mini-batch takes `RL_PASSES` passes of the plan's rows. A mini-batch's loss is a token mean of terms
    −A · ratio (|A| ≤ √(G − 1) for G binary rewards, the ratio clipped at 1 + EPS_HIGH), its gradient norm one of
    positive sums: both within (tokens + longest dot) · u, the loss of its largest term."""
    case, result = cases[target], report[target]
    mesh, one = result["mesh"], result["one_device"]
    rows_per_mini_batch = case["rows_per_pass"] * RL_PASSES
    assert mesh["micro_rows"] == one["micro_rows"] == case["rows_per_pass"]
    assert mesh["update_rows"] == one["update_rows"] == rows_per_mini_batch * case["mini_batches"]
    terms = rows_per_mini_batch * case["seq"] + WIDTHS["vocab_size"]
    largest = math.sqrt(case["group_size"] - 1) * (1 + EPS_HIGH)
    assert mesh["loss"] == pytest.approx(one["loss"], abs=terms * U * largest)
    assert mesh["grad_norm"] == pytest.approx(one["grad_norm"], rel=terms * U)
    assert one["grad_norm"] > 0.1  # the update really trains
    assert result["param_diff"] <= PARAM_TOLERANCE < result["params_moved"] / 10


def test_the_scaling_rules_keep_divisibility_on_their_own():
    assert scaled_heads(28, 4, (8,)) == (7, 1)  # neither divides 8, as Qwen2.5-7B's on a tensor axis of 8
    assert scaled_heads(64, 8, (4,)) == (32, 4)
    assert scaled_mesh({"data": 4, "fsdp": 16, "tensor": 1, "expert": 1, "context": 1}) == {
        "data": 2, "fsdp": 4, "tensor": 1, "expert": 1, "context": 1
    }  # fmt: skip
