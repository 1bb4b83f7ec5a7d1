"""The RL update fits by construction: the plan of its micro-batched step against XLA's own accounting of the
compiled step, the remat and rows the plan picks, the demo's policy-gradient plan, and the refusal of a recipe
that cannot fit."""

import dataclasses
import functools
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxseeker import model
from jaxseeker.parallel import DEFAULT_RULES, MeshConfig, batch_sharding, make_mesh
from jaxseeker.planning.chips import CHIPS, USABLE_HBM, GiB
from jaxseeker.planning.command import make_plan
from jaxseeker.planning.fit import (
    UPDATE_TOKENS,
    choose_update,
    device_budget,
    memory_plan,
    plan_rl,
    planned_recipe,
    resolve_mesh,
)
from jaxseeker.planning.memory import StageShape, abstract_mesh
from jaxseeker.planning.recipe import mesh_and_rules, model_config, rl_stages
from jaxseeker.train.optimizer import OptimizerConfig, make_optimizer
from jaxseeker.train.recipe import RecipeError, read_recipe
from jaxseeker.train.rl.rows import ROW_KEYS
from jaxseeker.train.rl.step import RLStepConfig, accumulated_update, rl_loss
from jaxseeker.train.state import abstract_train_state

FAST_COMPILE = {"xla_backend_optimization_level": 0, "xla_llvm_disable_expensive_passes": True}
# A Qwen2-shaped model (q/k/v biases, no q/k norm): the plan's coefficients were fitted on Qwen3 SFT steps only.
SMALL = model.ModelConfig(
    model_type="qwen2",
    vocab_size=3000,
    hidden_size=96,
    intermediate_size=256,
    num_layers=3,
    num_heads=6,
    num_kv_heads=2,
    head_dim=16,
    qkv_bias=True,
    qk_norm=False,
    attention_impl="blocked",
)
ROWS, SEQ, MICRO, CHUNK = 2, 320, 3, 128  # a micro-batch of 2 rows of 320 tokens, 3 of them in one update


def compiled_update_bytes(cfg: model.ModelConfig) -> int:
    """Peak device bytes XLA assigns to the real RL update of `MICRO` micro-batches, built as `rl.step.make_rl_step`
    builds it: arguments + outputs − the donated state they alias + temporaries (`compiled.memory_analysis()`)."""
    opt = make_optimizer(OptimizerConfig(total_steps=4, warmup_steps=0))
    mesh = make_mesh(MeshConfig(fsdp=1), jax.devices()[:1])
    state = abstract_train_state(functools.partial(model.init_params, cfg), model.param_axes(cfg), opt, mesh)
    loss_fn = functools.partial(rl_loss, step_cfg=RLStepConfig(chunk_size=CHUNK))
    step = functools.partial(accumulated_update, model_cfg=cfg, optimizer=opt, loss_fn=loss_fn)
    bsh = batch_sharding(mesh, (MICRO, ROWS, SEQ))
    batch = {
        k: jax.ShapeDtypeStruct((MICRO, ROWS, SEQ), jnp.float32 if k in ("old_logp", "advantages") else jnp.int32)
        for k in ROW_KEYS
    }
    batch = {k: jax.ShapeDtypeStruct(v.shape, v.dtype, sharding=bsh) for k, v in batch.items()}
    batch["loss_scale"] = jax.ShapeDtypeStruct((MICRO,), jnp.float32)
    compiled = jax.jit(step, donate_argnums=0, compiler_options=FAST_COMPILE).lower(state, batch).compile()
    m = compiled.memory_analysis()
    return m.argument_size_in_bytes + m.output_size_in_bytes - m.alias_size_in_bytes + m.temp_size_in_bytes


@pytest.mark.parametrize("remat", ["full", "none"])
def test_planned_update_is_within_25_percent_of_the_compiled_micro_batched_rl_update(remat):
    """XLA's buffer assignment of the compiled update (not a process's RSS: on CPU a tiny step's RSS is the Python
    heap, the compiler and allocator slack), against the update phase the plan gives the same shapes."""
    cfg = dataclasses.replace(SMALL, remat=remat)
    stage = StageShape(
        "rl", "rl", rows=ROWS, seq=SEQ, chunk_size=CHUNK, resident_rows=MICRO * ROWS, mini_batch_rows=MICRO * ROWS
    )
    planned = memory_plan(cfg, stage, DEFAULT_RULES, abstract_mesh({}))["update_phase"]
    measured = compiled_update_bytes(cfg)
    assert 0.75 <= planned / measured <= 1.25, (remat, planned, measured)


def test_the_plan_picks_the_least_recompute_that_fits_then_the_most_rows():
    cfg = model.ModelConfig.tiny(vocab_size=32000, hidden_size=512, intermediate_size=2048, num_layers=8)
    stage = StageShape("rl", "rl", rows=1, seq=512, mini_batch_rows=16, choose=("remat", "rows"))
    mesh = abstract_mesh({})

    def update_bytes(remat, rows):
        return memory_plan(cfg, StageShape("rl", "rl", rows=rows, seq=512, remat=remat), DEFAULT_RULES, mesh)[
            "update_phase"
        ]

    roomy = choose_update(cfg, stage, DEFAULT_RULES, mesh, budget=1e15)
    assert (roomy.remat, roomy.rows) == ("none", UPDATE_TOKENS // 512)  # no more tokens a pass than it needs
    tight = choose_update(cfg, stage, DEFAULT_RULES, mesh, budget=update_bytes("none", 1) + 1)
    assert (tight.remat, tight.rows) == ("none", 1)
    tighter = choose_update(cfg, stage, DEFAULT_RULES, mesh, budget=update_bytes("full", 2) + 1)
    assert (
        tighter.remat in ("dots", "full") and update_bytes(tighter.remat, tighter.rows) <= update_bytes("full", 2) + 1
    )
    given = choose_update(cfg, StageShape("rl", "rl", rows=3, seq=512, remat="none"), DEFAULT_RULES, mesh, budget=1.0)
    assert (given.remat, given.rows) == ("none", 3)  # nothing left to choose: the plan then says it does not fit


def test_the_demos_policy_gradient_update_fits_12_gib_with_the_defaults():
    plan = make_plan(read_recipe("demo", ["rl.method=pg"]))
    rl = next(s for s in plan["stages"] if s["stage"] == "rl")
    assert rl["fits"] and rl["memory"]["peak"] <= 12 * GiB, rl["memory"]
    assert rl["update_tokens"] <= UPDATE_TOKENS and rl["memory"]["update_phase"] <= rl["memory"]["peak"]


def test_a_recipe_that_cannot_fit_is_refused_naming_the_keys_to_set():
    recipe = read_recipe("rl_tiny", ["rl.update_tokens=2048", "model.remat=none"])
    planned = planned_recipe(recipe, budget=CHIPS["v5p"].hbm_bytes, where="a v5p")
    assert planned["model"]["remat"] == "none" and planned["rl"]["update_tokens"] == 2048  # as given: 12 rows of 160
    assert (
        planned_recipe(planned, budget=CHIPS["v5p"].hbm_bytes) == planned
    )  # planning a planned recipe changes nothing
    assert planned["rl"]["pack"] is True  # the default objective packs exactly
    keys = r"rl.update_tokens: 160 \(one row a pass\), model.remat: full"
    with pytest.raises(RecipeError, match=rf"does not fit 1 MiB: .*update 48.5 MiB.*{keys}"):
        planned_recipe(recipe, budget=2**20, where="1 MiB")
    chosen = planned_recipe(read_recipe("rl_tiny", []), budget=CHIPS["v5p"].hbm_bytes)
    assert chosen["model"]["remat"] == "none" and chosen["rl"]["update_tokens"] == (UPDATE_TOKENS // 160) * 160


def test_on_cpu_the_plan_fits_in_the_host_ram_this_process_does_not_already_hold():
    """The devices' memory is the host's RAM, of which the runtime, the world and the data already hold some: a
    process holding 512 MiB more has 512 MiB less to plan in (shared by its local devices)."""
    before, where = device_budget()
    assert "GiB of it held by this process" in where
    held = np.ones(512 * 2**20 // 8)  # 512 MiB of float64, resident once written
    after, _ = device_budget()
    assert before - after >= 0.95 * held.nbytes / jax.local_device_count()
    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    assert after * jax.local_device_count() <= USABLE_HBM * ram - held.nbytes
    recipe, peak = plan_rl(read_recipe("rl_tiny", []), budget=CHIPS["v5p"].hbm_bytes)
    assert recipe == planned_recipe(read_recipe("rl_tiny", []), budget=CHIPS["v5p"].hbm_bytes)
    stage = rl_stages(recipe, [])[0]  # the planned stage again, by hand: its peak is the one plan_rl gives
    rows = min(stage.mini_batch_rows, recipe["rl"]["update_tokens"] // stage.seq)
    stage = dataclasses.replace(stage, remat=recipe["model"]["remat"], rows=rows)
    mesh_cfg, rules = mesh_and_rules(recipe)
    mesh = abstract_mesh(resolve_mesh(mesh_cfg, jax.device_count(), []))
    cfg = model_config(recipe["model"], [])
    assert peak == memory_plan(cfg, stage, rules, mesh, min(jax.local_device_count(), 8))["peak"] > 0
