"""`jaxseeker plan --target`: the shipped paper recipes fit the machine each names with the stated margin, the
search's choices (micro-batches, engine layout, kernels by backend), and what the plan counts for a target (the
gradient accumulator, the engine's KV for its head layout, a host's checkpoint staging)."""

import json
from pathlib import Path

import pytest

import jaxseeker
from jaxseeker import model
from jaxseeker.cli import main
from jaxseeker.parallel import DEFAULT_RULES
from jaxseeker.planning.chips import MARGIN, TARGETS, GiB
from jaxseeker.planning.command import fit_recipe, make_plan, recipe_stages
from jaxseeker.planning.fit import memory_plan
from jaxseeker.planning.memory import StageShape, abstract_mesh
from jaxseeker.planning.targets import host_report, with_changes
from jaxseeker.train.recipe import read_recipe

CONFIGS = Path(jaxseeker.__file__).parent / "configs"
TARGETED = sorted(p for p in CONFIGS.glob("*.yaml") if "target" in read_recipe(p))


def test_the_three_paper_recipes_of_the_rented_machines_name_their_targets():
    assert {p.stem: read_recipe(p)["target"] for p in TARGETED} == {
        "websailor_qwen2.5-72b_dupo": "v5p-128",
        "webexplorer_qwen3-8b_sft": "v6e-64",
        "websailor_qwen2.5-7b_dupo": "h100x8",
    }


@pytest.mark.parametrize("path", TARGETED, ids=lambda p: p.stem)
def test_a_shipped_recipe_fits_its_target_with_the_margin(path):
    """Every stage's every phase stays 5% below the memory the backend reports, on exactly the target's chips, and
    a host stages its share of a checkpoint in its RAM."""
    plan = make_plan(read_recipe(path))
    target = TARGETS[plan["target"]["name"]]
    assert plan["chips"] == target.chips and plan["chip"]["key"] == target.chip
    assert plan["fits"], [(s["stage"], s["over"], s["memory"]["peak"] / GiB) for s in plan["stages"]]
    for stage in plan["stages"]:
        assert stage["memory"]["peak"] <= (1 - MARGIN) * target.usable_bytes
    assert plan["target"]["free"] >= MARGIN
    assert plan["target"]["host"]["staging_bytes"] <= target.host_ram_bytes
    impl = plan["model"]["attention_impl"]
    assert impl in (("splash", "blocked") if target.chip.startswith("v") else ("blocked",))


def test_8b_sft_at_128k_fits_v6e_64_in_two_micro_batches_with_the_recipes_updates():
    """The 128K case: 32 rows an update do not fit 64 v6e chips at once; the search splits them into 2 micro-batches
    of 16 on fsdp 16 × context 4 (the weights and Adam's moments split over all 64 chips: `embed` over fsdp and
    context), and keeps the updates, their rows and the schedule of the recipe. With the weights split over fsdp
    alone the same layout holds 4 times the state a chip and does not fit."""
    recipe = read_recipe("webexplorer_qwen3-8b_sft", ["data.seq_len=131072"])
    fit = fit_recipe(recipe, TARGETS["v6e-64"])
    assert fit.mesh == {"data": 1, "fsdp": 16, "tensor": 1, "expert": 1, "context": 4}
    fsdp_only = make_plan(with_changes({**recipe, "rules": {"embed": ["fsdp"]}}, fit.changes))["stages"][0]
    params = make_plan(with_changes(recipe, fit.changes))["stages"][0]["memory"]["params"]
    assert fsdp_only["memory"]["params"] == pytest.approx(4 * params, rel=1e-4)  # the q / k norms have no `embed`
    assert not fsdp_only["fits"]
    changes = fit.changes
    assert changes["data.batch_size"] * changes["optimizer.grad_accum"] == recipe["data"]["batch_size"] == 32
    assert changes["train.steps"] // changes["optimizer.grad_accum"] == recipe["train"]["steps"]
    assert changes["optimizer.total_steps"] == recipe["train"]["steps"]
    assert changes["train.checkpoint_every"] == 2 * recipe["train"]["checkpoint_every"]
    fitted = make_plan(with_changes(recipe, changes))
    [stage] = fitted["stages"]
    assert fitted["fits"] and stage["memory"]["peak"] == fit.peaks[0] <= (1 - MARGIN) * 31.25 * GiB
    # 2 micro-batches hold an f32 gradient accumulator (optax.MultiSteps) besides Adam's two moments
    assert stage["memory"]["optimizer"] == 3 * stage["memory"]["params"]


def test_the_rl_plan_counts_the_gradient_accumulator_of_grad_accum():
    recipe = read_recipe("websailor_qwen2.5-7b_dupo")
    plans = {
        accum: make_plan(with_changes(recipe, {"optimizer.grad_accum": accum}))["stages"][0]["memory"]
        for accum in (1, 2)
    }
    assert plans[2]["optimizer"] - plans[1]["optimizer"] == plans[1]["params"]  # one f32 params-sized array


def test_the_engine_never_takes_a_layout_that_replicates_the_kv_cache():
    """Qwen2.5-7B's 4 KV heads on an 8-GPU replica would put the whole cache on every GPU: per chip the cache of a
    replica's 8 slots at tensor 8 is that of 8 slots on one chip, 4 times that at tensor 4. The search keeps to
    1, 2 or 4 chips a replica."""
    recipe = read_recipe("websailor_qwen2.5-7b_dupo")
    cfg = recipe_stages(recipe).cfg
    assert (cfg.num_heads, cfg.num_kv_heads) == (28, 4)

    def kv(tensor: int) -> float:
        slots = 8 * (8 // tensor)  # 8 a replica
        stage = StageShape("rl", "rl", rows=8, seq=4096, slots=slots, cache_len=32768, engine_tensor=tensor)
        return memory_plan(cfg, stage, DEFAULT_RULES, abstract_mesh({"fsdp": 8}), per_host=8)["kv_cache"]

    tables = 8 * (1 + 32768 // 128) * 4  # each slot's int32 end and page table, whole on every chip
    assert kv(8) == kv(1) and kv(1) - tables == 4 * (kv(4) - tables)
    fit = fit_recipe(recipe, TARGETS["h100x8"])
    assert fit.changes["engine.tensor"] in (1, 2, 4) and fit.changes["model.attention_impl"] == "blocked"


def test_a_host_stages_its_chips_share_of_the_f32_state_and_big_checkpoints_go_to_a_bucket():
    cfg = model.ModelConfig.tiny("qwen3")
    stage = StageShape("sft", "sft", rows=8, seq=64)
    report = host_report(cfg, stage, DEFAULT_RULES, {"fsdp": 64}, TARGETS["v5p-128"], keep=3)
    whole = 4 * model.count_params(cfg) * 3  # f32 params and Adam's two moments
    assert report["checkpoint_bytes"] == whole
    assert report["staging_bytes"] <= 4 * whole / 64 + 4 * 3 * 4 * cfg.hidden_size  # 4 chips' shards (+ rounding)
    assert report["hosts"] == 16 and not report["fits_boot_disk"]  # 16 hosts write to a bucket, whatever the size
    one_node = host_report(cfg, stage, DEFAULT_RULES, {"fsdp": 8}, TARGETS["h100x8"], keep=3)
    assert one_node["hosts"] == 1 and one_node["fits_boot_disk"]


def test_plan_target_writes_a_recipe_that_fits_and_names_the_target(tmp_path, capsys):
    out = tmp_path / "fitted.yaml"
    argv = ["plan", "--config", "websailor_qwen2.5-72b_dupo", "--set", "mesh.fsdp=256", "--set", "engine.slots=512"]
    assert main([*argv, "--target", "v5p-128", "--write", str(out)]) == 0
    text = capsys.readouterr().out
    assert "set for the target: mesh.data=1, mesh.fsdp=64" in text and "target v5p-128: 95.74 GiB" in text
    written = read_recipe(out)
    assert list(written)[:2] == ["name", "target"] and written["target"] == "v5p-128"
    assert written["rl"]["mini_batches"] == 4 and written["optimizer"]["lr"] == 1e-6  # the paper's, untouched
    assert main(["plan", "--config", str(out), "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["fits"] and plan["chips"] == 64 and plan["stages"][0]["engine"]["slots"] * 16 <= 512
