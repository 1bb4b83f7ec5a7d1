"""`jaxseeker plan`: the memory plan against XLA's own accounting of the real SFT step, sharding arithmetic,
FLOPs, mesh suggestions and recipe validation."""

import dataclasses
import functools
import json
import math
import re
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest
from cli_support import usage_error

import jaxseeker
from jaxseeker import losses, model
from jaxseeker.cli import main
from jaxseeker.model.flops import flops_per_token
from jaxseeker.parallel import (
    DEFAULT_RULES,
    MeshConfig,
    batch_sharding,
    make_mesh,
    tree_shardings,
)
from jaxseeker.pipeline import pipeline_config
from jaxseeker.planning.chips import CHIPS, USABLE_HBM
from jaxseeker.planning.command import make_plan, recipe_stages
from jaxseeker.planning.fit import memory_plan, plan_stage, suggest_mesh
from jaxseeker.planning.flops import step_flops
from jaxseeker.planning.memory import StageShape, abstract_mesh, param_elements
from jaxseeker.train.optimizer import OptimizerConfig, learning_rate_at, make_optimizer
from jaxseeker.train.recipe import RecipeError, read_recipe, recipe_kind
from jaxseeker.train.rl.rows import ROW_KEYS
from jaxseeker.train.rl.step import RLStepConfig, accumulated_update, rl_loss
from jaxseeker.train.sft.loop import TrainConfig
from jaxseeker.train.sft.step import make_sft_step, mesh_loss, sft_loss
from jaxseeker.train.state import abstract_train_state

FAST_COMPILE = {"xla_backend_optimization_level": 0, "xla_llvm_disable_expensive_passes": True}

# A Qwen2-shaped model (q/k/v biases, no q/k norm): the plan's coefficients were fitted on Qwen3 shapes only.
SMALL = {
    "model_type": "qwen2",
    "vocab_size": 3000,
    "hidden_size": 96,
    "intermediate_size": 256,
    "num_layers": 3,
    "num_heads": 6,
    "num_kv_heads": 2,
    "head_dim": 16,
    "qkv_bias": True,
    "qk_norm": False,
}


def sft_recipe(**model_fields) -> dict:
    """A small SFT recipe: 3 rows of 320 tokens, logits in chunks of 128 (320 is not a multiple: padding)."""
    return {
        "name": "small",
        "model": {**SMALL, **model_fields},
        "mesh": {"fsdp": 1},
        "data": {"seq_len": 320, "batch_size": 3},
        "train": {"train_files": ["unused.jsonl"], "tokenizer": "unused", "chunk_size": 128},
    }


def compiled_peak_bytes(recipe: dict) -> int:
    """Peak device bytes XLA assigns to the recipe's real SFT step, built as `train.sft.loop.prepare` builds it:
    arguments + outputs − the donated state they alias + temporaries (`compiled.memory_analysis()`)."""
    cfg = model.ModelConfig(**recipe["model"])
    train = TrainConfig(**recipe["train"])
    optimizer = make_optimizer(OptimizerConfig(total_steps=train.steps))
    mesh = make_mesh(MeshConfig(fsdp=1), jax.devices()[:1])
    state = abstract_train_state(functools.partial(model.init_params, cfg), model.param_axes(cfg), optimizer, mesh)
    shape = (recipe["data"]["batch_size"], recipe["data"]["seq_len"])
    bsh = batch_sharding(mesh, shape)
    step = make_sft_step(
        cfg,
        optimizer,
        functools.partial(sft_loss, chunk_size=train.chunk_size),
        mesh=mesh,
        state_shardings=jax.tree.map(lambda x: x.sharding, state),
        batch_sharding=bsh,
        compiler_options=FAST_COMPILE,
    )
    batch = {
        k: jax.ShapeDtypeStruct(shape, jnp.int32, sharding=bsh)
        for k in ("tokens", "targets", "loss_mask", "segment_ids", "positions")
    }
    m = step.lower(state, batch).compile().memory_analysis()
    return m.argument_size_in_bytes + m.output_size_in_bytes - m.alias_size_in_bytes + m.temp_size_in_bytes


@pytest.mark.parametrize("remat", ["full", "none"])
def test_planned_peak_is_within_25_percent_of_the_compiled_sft_step(remat):
    """The measurement is XLA's buffer assignment of the compiled step (`memory_analysis()`), not a process's
    peak RSS: the buffers are exactly what the step allocates on a device, which is what the plan predicts,
    while on CPU the RSS of a tiny step is dominated by the Python heap, the compiler's own memory and allocator
    slack (noise larger than the step). The model is held out from the shapes the coefficients were fitted on."""
    recipe = sft_recipe(remat=remat)
    plan = make_plan(recipe, chip="v5p")
    planned = plan["stages"][0]["memory"]["peak"]
    measured = compiled_peak_bytes(recipe)
    assert 0.75 <= planned / measured <= 1.25, (remat, planned, measured)


def compiled_rl_update_bytes(cfg: model.ModelConfig, micro: int, rows: int, seq: int, chunk: int) -> int:
    """Peak device bytes XLA assigns to one RL update of `[micro, rows, seq]` micro-batches on one device, the
    program `train.rl.step.make_rl_step` compiles (`accumulated_update` of `rl_loss`, the state donated)."""
    opt_cfg = OptimizerConfig()
    optimizer = make_optimizer(opt_cfg)
    mesh = make_mesh(MeshConfig(fsdp=1), jax.devices()[:1])
    state = abstract_train_state(functools.partial(model.init_params, cfg), model.param_axes(cfg), optimizer, mesh)
    step_cfg = RLStepConfig(chunk_size=chunk)
    objective = losses.get_policy_objective(step_cfg.objective)
    loss_fn = mesh_loss(functools.partial(rl_loss, step_cfg=step_cfg, objective=objective), cfg, mesh)
    update = functools.partial(
        accumulated_update,
        model_cfg=cfg,
        optimizer=optimizer,
        loss_fn=loss_fn,
        learning_rate=functools.partial(learning_rate_at, opt_cfg),
        compute_dtype=cfg.compute_dtype,
    )
    floats = ("old_logp", "advantages")
    batch = {k: jax.ShapeDtypeStruct((micro, rows, seq), jnp.float32 if k in floats else jnp.int32) for k in ROW_KEYS}
    batch["loss_scale"] = jax.ShapeDtypeStruct((micro,), jnp.float32)
    compiled = jax.jit(update, donate_argnums=0).lower(state, batch).compile(compiler_options=FAST_COMPILE)
    m = compiled.memory_analysis()
    return m.argument_size_in_bytes + m.output_size_in_bytes - m.alias_size_in_bytes + m.temp_size_in_bytes


def test_planned_rl_update_phase_is_within_25_percent_of_the_compiled_rl_update():
    """The RL stage's update phase (trainer state, the mini-batch's resident rows, then the larger of a micro-batch's
    pass with the summed gradients and the optimizer update) against XLA's buffer assignment of the real update."""
    cfg = model.ModelConfig(**SMALL)
    micro, rows, seq, chunk = 2, 2, 320, 128
    stage = StageShape("rl", "rl", rows=rows, seq=seq, chunk_size=chunk, resident_rows=micro * rows)
    planned = memory_plan(cfg, stage, DEFAULT_RULES, abstract_mesh({"fsdp": 1}))["update_phase"]
    measured = compiled_rl_update_bytes(cfg, micro, rows, seq, chunk)
    assert 0.75 <= planned / measured <= 1.25, (planned, measured)


def test_params_and_rows_divide_by_the_mesh_as_the_rules_shard_them():
    cfg = model.ModelConfig.tiny("qwen3", vocab_size=512, hidden_size=64, num_heads=4, num_kv_heads=2)
    stage = StageShape("sft", "sft", rows=8, seq=256, chunk_size=128)
    one = plan_stage(cfg, stage, DEFAULT_RULES, {"fsdp": 1}, CHIPS["v5p"])
    four = plan_stage(cfg, stage, DEFAULT_RULES, {"fsdp": 4}, CHIPS["v5p"])
    # Every parameter has an `embed` axis of 64 (split by fsdp) except the q / k norms: [layers=2, head_dim=16] each.
    norms = 2 * 2 * cfg.head_dim
    n_one, n_four = one["memory"]["params"] / 4, four["memory"]["params"] / 4  # f32 master weights
    assert n_one == model.count_params(cfg) and n_four == (n_one - norms) / 4 + norms
    assert (one["rows_per_device"], four["rows_per_device"]) == (8, 2)
    # A context axis splits the weights and Adam's moments like fsdp (`embed` over fsdp and context), not the rows.
    context = plan_stage(cfg, stage, DEFAULT_RULES, {"fsdp": 2, "context": 2}, CHIPS["v5p"])
    assert context["memory"]["params"] == four["memory"]["params"] and context["rows_per_device"] == 4
    assert context["memory"]["optimizer"] == four["memory"]["optimizer"] == 2 * four["memory"]["params"]
    # 6 rows do not split over fsdp=4: the rules replicate the batch, and so does the plan.
    assert (
        plan_stage(cfg, StageShape("sft", "sft", rows=6, seq=256), DEFAULT_RULES, {"fsdp": 4}, CHIPS["v5p"])[
            "rows_per_device"
        ]
        == 6
    )


def test_params_per_device_agree_with_the_shardings_jax_builds():
    cfg = model.ModelConfig.tiny("qwen3_moe", vocab_size=500, num_kv_heads=1)  # 500 and 1 kv head do not split
    mesh = abstract_mesh({"fsdp": 4, "tensor": 2, "expert": 2})
    shapes = jax.tree.map(
        lambda s: jax.ShapeDtypeStruct(s, jnp.float32),
        model.param_shapes(cfg),
        is_leaf=lambda x: isinstance(x, tuple) and all(isinstance(d, int) for d in x),
    )
    shardings = tree_shardings(model.param_axes(cfg), shapes, mesh, DEFAULT_RULES)
    local = sum(math.prod(s.shard_shape(x.shape)) for s, x in zip(jax.tree.leaves(shardings), jax.tree.leaves(shapes)))
    assert param_elements(cfg, DEFAULT_RULES, mesh) == local < model.count_params(cfg) / 8


def test_rollout_kv_cache_is_its_pages_by_page_by_layers_by_kv_heads_by_head_dim_by_two():
    """By default a replica's pool holds every slot at the cache length; `engine_pages` sizes it instead."""
    cfg = model.ModelConfig.tiny("qwen3", num_layers=3, num_kv_heads=2, head_dim=16, compute_dtype="bfloat16")
    stage = StageShape("rl", "rl", rows=4, seq=512, slots=8, cache_len=1024, rollout_tokens=8 * 512, engine_tensor=2)
    mesh = abstract_mesh({"fsdp": 2, "tensor": 2})
    mem = memory_plan(cfg, stage, DEFAULT_RULES, mesh)
    slots, kv_heads = 8 // 2, 2 // 2  # slots over the 2 engine replicas, kv heads over a replica's 2 chips
    per_token = 3 * kv_heads * 16 * 2 * 2  # layers × k and v in bf16
    tables = slots * (1 + 1024 // 128) * 4  # each slot's end and page table (int32)
    assert mem["kv_cache"] == slots * 1024 * per_token + tables
    fewer = memory_plan(cfg, dataclasses.replace(stage, engine_pages=12), DEFAULT_RULES, mesh)
    assert fewer["kv_cache"] == 12 * 128 * per_token + tables


def test_an_rl_stage_peaks_in_its_largest_phase_and_the_plan_names_the_phases_over():
    cfg = model.ModelConfig.tiny("qwen3", compute_dtype="bfloat16")
    stage = StageShape(
        "rl", "rl", rows=4, seq=512, cache_len=4096, resident_rows=16, groups=4, group_size=4, engine_tensor=1
    )
    mem = memory_plan(cfg, stage, DEFAULT_RULES, abstract_mesh({"fsdp": 4}))
    trainer = mem["params"] + mem["optimizer"] + mem["reference"]
    assert mem["rollout_phase"] == trainer + mem["engine_weights"] + mem["kv_cache"] + mem["rollout"]
    assert mem["handoff_phase"] == trainer + mem["engine_weights"] + mem["handoff"]
    assert mem["peak"] == max(mem["rollout_phase"], mem["update_phase"], mem["handoff_phase"])
    # 4 groups of 4 over 4 one-chip replicas: 4 slots each, the whole cache length, every layer and kv head; each
    # slot's end and page table of 4096 / 128 pages.
    tables = 4 * (1 + 4096 // 128) * 4
    assert mem["kv_cache"] == 4 * 4096 * (cfg.num_layers * cfg.num_kv_heads * cfg.head_dim * 2 * 2) + tables
    tight = dataclasses.replace(CHIPS["v5p"], hbm_bytes=int(mem["rollout_phase"] / USABLE_HBM) - 1)
    planned = plan_stage(cfg, stage, DEFAULT_RULES, {"fsdp": 4}, tight)
    assert not planned["fits"] and "rollout" in planned["over"]
    assert planned["engine"] == {
        **{"tensor": 1, "replicas": 4, "hosts": 1, "slots": 4, "dtype": "bfloat16"},
        **{"pages": 4 * 4096 // 128, "page": 128},  # every slot at the cache length
    }


def test_step_flops_count_forward_and_backward_plus_the_recompute_of_remat():
    dense = model.ModelConfig.tiny("qwen3")
    stage = StageShape("sft", "sft", rows=2, seq=1024)
    per_token = flops_per_token(dense, 512, training=True)  # 3 × forward at the mean causal context
    assert step_flops(dense, stage)["model"] == pytest.approx(per_token * 2 * 1024)
    assert step_flops(dense.replace(remat="full"), stage)["device"] == pytest.approx(per_token * 2 * 1024 * 4 / 3)
    moe = model.ModelConfig.tiny("qwen3_moe")  # 4 experts, top 2: moe_mlp computes all 4
    flops = step_flops(moe, stage)
    assert flops["device"] > flops["model"] == pytest.approx(flops_per_token(moe, 512, training=True) * 2 * 1024)


def test_a_mesh_is_suggested_when_a_7b_model_does_not_fit_one_chip():
    cfg = model.ModelConfig(
        **{
            **SMALL,
            "vocab_size": 152064,
            "hidden_size": 3584,
            "intermediate_size": 18944,
            "num_layers": 28,
            "num_heads": 28,
            "num_kv_heads": 4,
            "head_dim": 128,
        },
        compute_dtype="bfloat16",
        remat="full",
        attention_impl="splash",
    )
    stage = StageShape("sft", "sft", rows=16, seq=8192, chunk_size=1024)
    chip = CHIPS["v5e"]
    assert not plan_stage(cfg, stage, DEFAULT_RULES, {"fsdp": 1}, chip)["fits"]  # 16 bytes × 7.6B params alone
    suggestion = suggest_mesh(cfg, [stage], DEFAULT_RULES, chip, 1)
    assert suggestion["chips"] > 1 and plan_stage(cfg, stage, DEFAULT_RULES, suggestion["mesh"], chip)["fits"]
    half = suggestion["chips"] // 2
    assert suggest_mesh(cfg, [stage], DEFAULT_RULES, chip, half, max_chips=half) is None  # the fewest chips


def test_recipes_are_validated_by_the_loops_builders():
    with pytest.raises(RecipeError, match="seq_lenn"):
        make_plan({**sft_recipe(), "data": {"seq_lenn": 8}})
    with pytest.raises(RecipeError, match="train_files"):
        make_plan({**sft_recipe(), "train": {"tokenizer": "t"}})
    with pytest.raises(RecipeError, match="missing"):
        make_plan({**sft_recipe(), "model": {"hf_path": "/nonexistent", "remat": "full"}})
    rl = {
        "name": "r",
        "model": sft_recipe()["model"],
        "rl": {"questions": ["q.jsonl"], "tokenizer": "t", "objective_kwargs": {"eps_hi": 0.3}},
    }
    with pytest.raises(RecipeError, match="eps_hi"):
        make_plan(rl)
    with pytest.raises(RecipeError, match="unknown sections"):
        make_plan({**rl, "rl": {"questions": ["q.jsonl"], "tokenizer": "t"}, "data": {}})
    lora = sft_recipe(hf_path="/nonexistent", lora={"rank": 8})
    assert "model.lora: rank-8 adapters train, not the weights" in " ".join(make_plan(lora)["notes"])
    with pytest.raises(RecipeError, match="model.lora.rank: must be an integer >= 0"):
        make_plan(sft_recipe(hf_path="/nonexistent", lora={"rank": -1}))


def test_a_bad_mesh_is_a_usage_error_quoting_it(capsys):
    assert usage_error(["plan", "--config", "c.yaml", "--mesh", "fsdp=4,pipeline=2"], capsys) == (
        "jaxseeker plan: error: argument --mesh: 'fsdp=4,pipeline=2': expected axis=size with axes "
        "['data', 'fsdp', 'tensor', 'expert', 'context'], got 'pipeline=2'"
    )


def test_plan_command_prints_a_table_and_json(tmp_path, capsys):
    import yaml

    path = tmp_path / "small.yaml"
    path.write_text(yaml.safe_dump(sft_recipe(remat="full")))
    assert (
        main(["plan", "--config", str(path), "--mesh", "data=1,fsdp=-1", "--chips", "3", "--chip", "h100", "--json"])
        == 0
    )
    plan = json.loads(capsys.readouterr().out)
    assert plan["mesh"] == {"data": 1, "fsdp": 3, "tensor": 1, "expert": 1, "context": 1} and plan["fits"]
    assert plan["stages"][0]["rows_per_device"] == 1 and plan["chip"]["name"] == "NVIDIA H100 SXM"
    assert main(["plan", "--config", str(path), "--set", "data.seq_len=640"]) == 0
    table = capsys.readouterr().out
    assert "3 × 640" in table and "peak" in table and "fits" in table


@pytest.mark.parametrize("chips", ["0", "-4"])
def test_plan_chips_out_of_range_are_usage_errors(chips, capsys):
    assert usage_error(["plan", "--config", "c.yaml", "--chips", chips], capsys) == (
        f"jaxseeker plan: error: argument --chips: must be an integer >= 1, got {chips}"
    )


def test_a_context_axis_divides_a_rows_activations():
    cfg = model.ModelConfig.tiny("qwen3", num_layers=4, compute_dtype="bfloat16", remat="full", attention_impl="splash")
    stage = StageShape("rl", "rl", rows=2, seq=8192, slots=2, cache_len=8192, rollout_tokens=2 * 8192)
    one, four = (plan_stage(cfg, stage, DEFAULT_RULES, {"fsdp": 2, "context": n}, CHIPS["v5p"]) for n in (1, 4))
    assert (one["seq_per_device"], four["seq_per_device"]) == (8192, 2048)
    assert (one["attention"], four["attention"]) == ("splash", "all_gather/splash")  # context_attention's default
    assert four["memory"]["layer"] < one["memory"]["layer"] / 2  # a quarter, + the whole-row keys and values
    # the layers' residuals split four ways; the final hidden states stay whole (the chunked loss gathers them)
    final = 2 * cfg.hidden_size * 8192 * 2
    assert four["memory"]["activations"] - final == pytest.approx((one["memory"]["activations"] - final) / 4)
    ring = plan_stage(
        cfg.replace(context_attention="ring"), stage, DEFAULT_RULES, {"fsdp": 2, "context": 4}, CHIPS["v5p"]
    )
    assert ring["attention"] == "ring/blocked"  # no splash form of the ring
    gather = plan_stage(
        cfg.replace(attention_impl="blocked"), stage, DEFAULT_RULES, {"fsdp": 2, "context": 4}, CHIPS["v5p"]
    )
    assert ring["memory"]["layer"] < gather["memory"]["layer"]  # two chunks of keys / values, not the whole row


def test_tensor_parallelism_splits_the_saved_residuals_too():
    cfg = model.ModelConfig.tiny("qwen3", num_layers=8, remat="full", attention_impl="splash")
    stage = StageShape("sft", "sft", rows=2, seq=4096)
    one, two = (plan_stage(cfg, stage, DEFAULT_RULES, {"fsdp": 2, "tensor": n}, CHIPS["v5p"]) for n in (1, 2))
    final = 2 * cfg.hidden_size * 4096 * 4
    assert two["memory"]["activations"] - final == pytest.approx((one["memory"]["activations"] - final) / 2)


def test_cudnn_is_planned_with_the_mask_and_bias_it_takes():
    cfg = model.ModelConfig.tiny("qwen3", compute_dtype="bfloat16", remat="full")
    stage = StageShape("sft", "sft", rows=1, seq=4096)
    mem = {
        impl: plan_stage(cfg.replace(attention_impl=impl), stage, DEFAULT_RULES, {"fsdp": 1}, CHIPS["h100"])["memory"]
        for impl in ("cudnn", "splash")
    }
    pairs = 4096 * 4096
    assert mem["cudnn"]["activations"] - mem["splash"]["activations"] == pairs  # the bool mask, all the pass
    assert mem["cudnn"]["layer"] - mem["splash"]["layer"] == pairs * 2 * 2  # the bf16 bias and its gradient


@pytest.mark.parametrize("chip, mesh", [("v5p", ["mesh.context=1"]), ("v6e", ["mesh.context=4"])])
def test_8b_sft_at_128k_fits_the_slices_its_config_names(chip, mesh, capsys):
    """configs/webexplorer_qwen3-8b_sft.yaml: 128K rows on a v5p-64 (fsdp 32), and on a v6e-128 with context = 4."""
    sets = [arg for key in ["data.seq_len=131072", *mesh] for arg in ("--set", key)]
    assert main(["plan", "--config", "configs/webexplorer_qwen3-8b_sft.yaml", *sets, "--chip", chip, "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    context = 4 if chip == "v6e" else 1
    assert plan["chips"] == 32 * context
    assert plan["fits"] and plan["stages"][0]["seq_per_device"] == 131072 // context, plan["stages"][0]


def test_the_plan_finds_a_context_mesh_for_8b_sft_at_128k_on_v6e(capsys):
    assert (
        main(
            [
                "plan",
                "--config",
                "configs/webexplorer_qwen3-8b_sft.yaml",
                "--set",
                "data.seq_len=131072",
                "--chip",
                "v6e",
                "--json",
            ]
        )
        == 0
    )
    plan = json.loads(capsys.readouterr().out)
    assert not plan["fits"]  # the config's 64K mesh: fsdp 32 × context 2 at 90% of 32 GiB
    suggestion = plan["suggestion"]
    assert suggestion["mesh"]["context"] > 1 and suggestion["peak_bytes"] <= 0.9 * CHIPS["v6e"].hbm_bytes


@pytest.mark.parametrize("chip, mesh", [("v5p", []), ("v6e", ["mesh.tensor=1", "mesh.context=8"])])
def test_the_8b_grpo_128k_stage_fits_the_slices_its_config_names(chip, mesh, capsys):
    """configs/webexplorer_qwen3-8b_grpo.yaml: every stage on its v5p-256 mesh, and on a v6e-512 with context = 8."""
    sets = [arg for key in mesh for arg in ("--set", key)]
    assert main(["plan", "--config", "configs/webexplorer_qwen3-8b_grpo.yaml", *sets, "--chip", chip, "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["chips"] == (512 if mesh else 128)
    stages = plan["stages"]
    assert stages[-1]["seq"] == 131072 and all(s["fits"] for s in stages), [s["memory"]["peak"] for s in stages]


RL_CONFIGS = sorted(
    p for p in (Path(jaxseeker.__file__).parent / "configs").glob("*.yaml") if recipe_kind(read_recipe(p)) == "rl"
)  # RL recipes, not pipelines


@pytest.mark.parametrize("path", RL_CONFIGS, ids=lambda p: p.stem)
def test_every_rl_config_fits_the_slice_its_comment_names_with_the_engine(path, capsys):
    """Each RL recipe on the mesh it sets and its target, or the chip its `# Plan:` line names (v5p when it names
    none), with the rollout engine's weights, cache and hand-off counted."""
    chip = re.search(r"--chip (\w+)", path.read_text())
    where = [] if "target" in read_recipe(path) else ["--chip", chip.group(1) if chip else "v5p"]
    assert main(["plan", "--config", str(path), *where, "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    for stage in plan["stages"]:
        assert stage["engine"] and stage["memory"]["engine_weights"] > 0, stage["stage"]
        assert stage["fits"], (stage["stage"], stage["over"], {k: v for k, v in stage["memory"].items() if v})


@pytest.mark.parametrize("config", ["demo", "demo_focus"])
def test_a_pipelines_plan_is_of_the_model_its_stages_train(config):
    """The pipeline's stages train with blocked attention and the policy section's shape (RoPE base included), and
    the plan of a pipeline recipe says so."""
    recipe = read_recipe(config, [])
    plan = recipe_stages(recipe)
    assert plan.cfg.attention_impl == "blocked"
    if config == "demo_focus":
        assert plan.cfg.rope_theta == pipeline_config(recipe).policy.rope_theta == 10_000.0
