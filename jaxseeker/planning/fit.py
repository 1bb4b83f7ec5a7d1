"""The RL update fits by construction: the plan picks its remat and micro-batch rows for the memory of the machine,
and a run whose plan does not fit is refused before its first rollout.

`choose_update` takes an RL stage (`memory.StageShape`) whose `choose` names what is left to pick ("remat": the
recipe's model section sets none; "rows": `rl.update_tokens` is 0) and returns it with the cheapest choice whose
update phase fits the budget: the least recompute first (remat none, then dots, then full: each costs FLOPs), and
for it as many rows as fit, up to `UPDATE_TOKENS` tokens per device and pass (more tokens per pass buy no speed once
the matmuls fill the chip, and cost memory). `planned_recipe` applies it to a `jaxseeker rl` recipe on this
process's devices (on CPU the host's RAM less what the process already holds, on accelerators each device's memory):
it writes the choice into the recipe (`model.remat`, `rl.update_tokens`, `rl.pack`), or raises a `RecipeError` with
the plan and the keys to set; `plan_rl` also gives the plan's peak.

`memory_plan` adds a stage's bytes per device (the components of `planning.memory`, the rollout engine's of
`planning.rollout`) into its phases and their peak; `resolve_mesh` gives a recipe's mesh its axis sizes;
`plan_stage` is a stage's plan on one mesh, `suggest_mesh` the mesh on which every stage fits.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Mapping
from typing import Any

from jax.sharding import AbstractMesh

from jaxseeker.model.config import ATTENTION_IMPLS, CONTEXT_ATTENTIONS, ModelConfig
from jaxseeker.parallel.mesh_config import MESH_AXES, MeshConfig
from jaxseeker.parallel.rules import Rules
from jaxseeker.planning.chips import MARGIN, USABLE_HBM, Chip, GiB
from jaxseeker.planning.flops import step_flops
from jaxseeker.planning.memory import (
    _UPDATE,
    BYTES,
    PHASES,
    StageShape,
    _local_sizes,
    abstract_mesh,
    activation_bytes,
    attention_kernel,
    attention_pair_bytes,
    logits_bytes,
    param_elements,
)
from jaxseeker.planning.rollout import engine_memory, engine_summary
from jaxseeker.train.heap import resident_gib
from jaxseeker.train.recipe import RecipeError

UPDATE_TOKENS = 2048  # tokens per device of one forward/backward pass the plan aims for at most
REMATS = ("none", "dots", "full")  # least recompute first


def memory_plan(
    cfg: ModelConfig, stage: StageShape, rules: Rules, mesh: AbstractMesh, per_host: int = 4
) -> dict[str, float]:
    """Bytes per device of every component (`planning.memory`'s docstring), the phases of an RL stage and the `peak`;
    `per_host`: chips a host drives (the rollout engine's replicas stay within one)."""
    cfg = dataclasses.replace(cfg, remat=stage.remat) if stage.remat else cfg
    n = param_elements(cfg, rules, mesh)
    f32 = 4 * n
    cb = BYTES[cfg.compute_dtype]
    acts = activation_bytes(cfg, stage.rows, stage.seq, rules, mesh)
    rows_in = _local_sizes(cfg, stage.resident_rows or stage.rows, rules, dict(mesh.shape), stage.seq)
    keys = 5 if stage.kind == "sft" else 7 + stage.reference  # int32 / f32 [rows, seq] arrays (train.rl.rows.ROW_KEYS)
    mem = {
        "params": f32,
        "optimizer": 2 * f32 + (f32 if stage.grad_accum > 1 else 0),
        "grads": f32,
        "grad_sum": f32 if stage.kind == "rl" else 0,
        "compute": 2 * cb * n if cb < 4 else 0,  # the cast copy and its gradients, alive during the pass
        "reference": f32 if stage.reference else 0,
        "activations": acts["activations"],
        "layer": acts["layer"],
        "logits": logits_bytes(cfg, stage.rows, stage.seq, stage.chunk_size, rules, mesh),
        "batch": rows_in.rows * rows_in.seq * keys * 4,
        "engine_weights": 0,
        "kv_cache": 0,
        "rollout": 0,
        "handoff": 0,
    }
    if stage.rolls_out:
        mem.update(engine_memory(cfg, stage, math.prod(dict(mesh.shape).values()), per_host, n))
    mem = {k: float(v) for k, v in mem.items()}
    trainer = mem["params"] + mem["optimizer"] + mem["reference"]
    grads_in_pass = mem["grads"] if cb == 4 else 0.0  # in bf16 the pass makes bf16 grads (in `compute`)
    train = grads_in_pass + mem["grad_sum"] + mem["compute"] + mem["activations"] + max(mem["layer"], mem["logits"])
    update = mem["grads"] + _UPDATE * f32
    mem["update_phase"] = trainer + mem["batch"] + max(train, update)
    mem["rollout_phase"] = trainer + mem["engine_weights"] + mem["kv_cache"] + mem["rollout"]
    mem["handoff_phase"] = trainer + mem["engine_weights"] + mem["handoff"]
    mem["peak"] = max(
        mem["update_phase"],
        mem["rollout_phase"] if stage.rolls_out else 0.0,
        mem["handoff_phase"] if stage.rolls_out else 0.0,
    )
    return mem


def resolve_mesh(mesh: MeshConfig, chips: int | None, notes: list[str]) -> dict[str, int]:
    """Concrete axis sizes: a -1 axis takes `chips` (1 when not given, noted); with no -1, `chips` must match."""
    sizes = mesh.sizes()
    if -1 in sizes and chips is None:
        notes.append("the mesh has a -1 axis and --chips was not given: planned on 1 chip")
    n = chips if chips is not None else (1 if -1 in sizes else math.prod(sizes))
    try:
        return dict(zip(MESH_AXES, mesh.resolve(n)))
    except ValueError as e:
        raise RecipeError(f"mesh: {e}") from None


def _batch_shards(rules: Rules, mesh: Any) -> int:
    """How many ways the `batch` rule splits the rows on `mesh`."""
    sizes = dict(mesh.shape)
    return math.prod(sizes.get(a, 1) for a in rules.get("batch", ()))


def choose_update(
    cfg: ModelConfig, stage: StageShape, rules: Rules, mesh: Any, budget: float, per_host: int = 4
) -> StageShape:
    """`stage` with the remat and micro-batch rows that `stage.choose` leaves open (module docstring): the first
    that fits `budget` bytes per device in the update phase, or the most frugal when none does (its plan then says
    NO)."""
    if stage.kind != "rl" or not stage.choose:
        return stage
    remats = REMATS if "remat" in stage.choose else (stage.remat or cfg.remat,)
    rows_options: tuple[int, ...] = (stage.rows,)
    if "rows" in stage.choose:
        shards = _batch_shards(rules, mesh)
        most = max(1, UPDATE_TOKENS // stage.seq)
        if stage.mini_batch_rows:
            most = min(most, -(-stage.mini_batch_rows // shards))
        rows_options = tuple(k * shards for k in range(most, 0, -1))
    for remat in remats:
        for rows in rows_options:
            trial = dataclasses.replace(stage, remat=remat, rows=rows)
            if memory_plan(cfg, trial, rules, mesh, per_host)["update_phase"] <= budget:
                return trial
    return dataclasses.replace(stage, remat=remats[-1], rows=rows_options[-1])


def kernels_pair_bytes(cfg: ModelConfig, local: Any, seq: int) -> dict[str, float]:
    """`memory.attention_pair_bytes` of every attention the model could run at this shape and layout (by the name
    `memory.attention_kernel` gives it): what choosing another `attention_impl` would cost a query-key pair."""
    out: dict[str, float] = {}
    for impl in ATTENTION_IMPLS:
        trial = dataclasses.replace(cfg, attention_impl=impl)
        out.setdefault(attention_kernel(trial, local.seq_shards), attention_pair_bytes(trial, local, seq))
    return out


def plan_stage(
    cfg: ModelConfig,
    stage: StageShape,
    rules: Rules,
    mesh_sizes: Mapping[str, int],
    chip: Chip,
    budget: float | None = None,
) -> dict:
    """Memory, FLOPs and ideal time (at the chips' bf16 peak) of one stage on one mesh; `fits` when the peak
    is within `budget` bytes (default: `USABLE_HBM` of the chip's memory; a target's: `planning.targets`);
    `engine`: the rollout engine's layout (None without one). An RL stage with `choose` gets the remat and rows that
    fit (`fit.choose_update`)."""
    mesh = abstract_mesh(mesh_sizes)
    budget = USABLE_HBM * chip.hbm_bytes if budget is None else budget
    stage = choose_update(cfg, stage, rules, mesh, budget, chip.per_host)
    chips = math.prod(dict(mesh.shape).values())
    memory = memory_plan(cfg, stage, rules, mesh, chip.per_host)
    flops = step_flops(cfg, stage)
    local = _local_sizes(cfg, stage.rows, rules, dict(mesh.shape), stage.seq)
    return {
        "stage": stage.name,
        "kind": stage.kind,
        "mesh": dict(mesh.shape),
        "chips": chips,
        "rows_per_device": local.rows,
        "remat": stage.remat or cfg.remat,
        "update_tokens": stage.rows * stage.seq,
        "seq": stage.seq,
        "seq_per_device": local.seq,
        "attention": attention_kernel(cfg, local.seq_shards),
        "attention_bytes_per_pair": attention_pair_bytes(cfg, local, stage.seq),
        "kernels_bytes_per_pair": kernels_pair_bytes(cfg, local, stage.seq),
        "engine": engine_summary(cfg, stage, dict(mesh.shape), chip.per_host),
        "memory": memory,
        "hbm_bytes": chip.hbm_bytes,
        "fits": memory["peak"] <= budget,
        "over": [p for p in PHASES if memory[f"{p}_phase"] > budget],
        "flops": flops,
        "ideal_step_s": flops["device"] / (chips * chip.peak_flops),
    }


def _meshes(chips: int, max_tensor: int, experts: int) -> list[dict[str, int]]:
    """Meshes of `chips` devices with data = 1, ordered by preference: least tensor, then least context, then
    least expert parallelism (fsdp takes the rest). Context parallelism comes before tensor parallelism: once
    the rows are one per device it is what shrinks a long row, and it moves a layer's keys and values (a
    fraction of its width under GQA) where tensor parallelism moves the whole residual stream four times."""
    out = []
    for tensor in (t for t in (1, 2, 4, 8, 16) if t <= max_tensor and chips % t == 0):
        for context in (c for c in (1, 2, 4, 8, 16, 32) if chips % (tensor * c) == 0):
            for expert in (
                e for e in (1, 2, 4, 8, 16, 32, 64, 128) if e <= max(experts, 1) and chips % (tensor * context * e) == 0
            ):
                out.append(
                    {
                        "data": 1,
                        "fsdp": chips // (tensor * context * expert),
                        "tensor": tensor,
                        "expert": expert,
                        "context": context,
                    }
                )
    return out


def suggest_mesh(
    cfg: ModelConfig,
    stages: list[StageShape],
    rules: Rules,
    chip: Chip,
    chips: int,
    *,
    max_chips: int = 8192,
    max_tensor: int = 8,
) -> dict | None:
    """The preferred mesh on which every stage fits, on `chips` chips or (when none does) on the fewest
    chips up to `max_chips` (doubling); None when nothing fits. A mesh with a context axis is tried with the
    model's `context_attention`, then with the other one. Returns {"mesh", "chips", "peak_bytes",
    "context_attention"}."""
    budget = USABLE_HBM * chip.hbm_bytes
    others = [a for a in CONTEXT_ATTENTIONS if a != cfg.context_attention]
    n = chips
    while n <= max_chips:
        for sizes in _meshes(n, max_tensor, cfg.num_experts):
            for attention in [cfg.context_attention] + (others if sizes["context"] > 1 else []):
                trial = dataclasses.replace(cfg, context_attention=attention)
                mesh = abstract_mesh(sizes)
                try:
                    peak = max(
                        memory_plan(
                            trial,
                            choose_update(trial, s, rules, mesh, budget, chip.per_host),
                            rules,
                            mesh,
                            chip.per_host,
                        )["peak"]
                        for s in stages
                    )
                except ValueError:  # the engine's tensor size does not divide this slice's hosts
                    continue
                if peak <= USABLE_HBM * chip.hbm_bytes:
                    return {"mesh": sizes, "chips": n, "peak_bytes": peak, "context_attention": attention}
        n *= 2
    return None


def device_budget() -> tuple[float, str]:
    """(bytes a plan may fill per local device, what they are): on CPU `USABLE_HBM` of the host's RAM less what this
    process already holds (the runtime, the world, the data: the devices' memory is the same RAM), shared by its
    devices; on an accelerator the memory its backend reports usable less `MARGIN`, as `jaxseeker plan --target`
    plans it (`planning.targets`)."""
    import jax

    device = jax.local_devices()[0]
    if device.platform == "cpu":
        ram, held = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"), (resident_gib() or 0.0) * GiB
        where = f"host RAM ({ram / GiB:.0f} GiB, {held / GiB:.2f} GiB of it held by this process)"
        return (USABLE_HBM * ram - held) / jax.local_device_count(), where
    limit = (device.memory_stats() or {}).get("bytes_limit")
    if not limit:
        return math.inf, f"{device.device_kind} (memory unknown)"
    return (1 - MARGIN) * limit, f"{device.device_kind} memory ({limit / GiB:.2f} GiB usable)"


def planned_recipe(recipe: Mapping[str, Any], budget: float | None = None, where: str | None = None) -> dict:
    """`recipe` (a `jaxseeker rl` recipe) with its update planned on this process's devices (`device_budget`, or
    `budget` bytes per device): `model.remat`, `rl.update_tokens` and `rl.pack` set to what the run uses. Raises
    RecipeError, before anything is loaded or rolled out, when a context stage does not fit, naming the phase, its
    size and the keys to set."""
    return plan_rl(recipe, budget, where)[0]


def plan_rl(recipe: Mapping[str, Any], budget: float | None = None, where: str | None = None) -> tuple[dict, float]:
    """(`planned_recipe`'s recipe, the plan's peak bytes per device over its context stages), so a run can set its
    measured peak against the plan."""
    import jax

    from jaxseeker.planning.recipe import mesh_and_rules, model_config, rl_stages

    if budget is None:
        budget, where = device_budget()
    where = where or f"{budget / GiB:.1f} GiB"
    notes: list[str] = []
    stages = rl_stages(recipe, notes)
    mesh_cfg, rules = mesh_and_rules(recipe)
    cfg = model_config(recipe.get("model"), notes)
    mesh = abstract_mesh(resolve_mesh(mesh_cfg, jax.device_count(), notes))
    chosen = [choose_update(cfg, s, rules, mesh, budget, min(jax.local_device_count(), 8)) for s in stages]
    remat = max((s.remat or cfg.remat for s in chosen), key=REMATS.index)
    rl = build_rl(recipe)
    tokens = rl.update_tokens or min(s.rows * s.seq for s in chosen)
    peak = 0.0
    for s in chosen:  # the rows `train.rl.update.update` runs: update_tokens // seq, at least 1, at most a mini-batch's
        s = dataclasses.replace(s, remat=remat, rows=min(s.mini_batch_rows, max(1, tokens // s.seq)))
        memory = memory_plan(cfg, s, rules, mesh, min(jax.local_device_count(), 8))
        peak = max(peak, memory["peak"])
        over = [p for p in PHASES if memory[f"{p}_phase"] > budget]
        if over:
            phases = ", ".join(f"{p} {_size(memory[f'{p}_phase'])}" for p in over)
            keys = [f"rl.update_tokens: {s.seq} (one row a pass)"] * (s.rows > 1)
            keys += ["model.remat: full"] * (remat != "full")
            keys += ["a shorter rl.context_stages max_context", "fewer engine.slots or rl.batch_questions"]
            raise RecipeError(
                f"rl: the plan of stage {s.name!r} ({s.rows} × {s.seq} tokens per pass, remat {remat}) does not "
                f"fit {where}: {phases} over {_size(budget)} per device. Set {', '.join(keys)}, or run on a "
                "larger mesh (`jaxseeker plan --config …` suggests one)"
            )
    out = {k: dict(v) if isinstance(v, Mapping) else v for k, v in recipe.items()}
    out["model"] = {**(recipe.get("model") or {}), "remat": remat}
    out["rl"] = {**(recipe.get("rl") or {}), "update_tokens": tokens, "pack": rl.pack}
    return out, peak


def _size(n: float) -> str:
    """Bytes as GiB, or MiB below a tenth of one."""
    return f"{n / GiB:.2f} GiB" if n >= GiB / 10 else f"{n / 2**20:.1f} MiB"


def build_rl(recipe: Mapping[str, Any]) -> Any:
    """The recipe's RLConfig (defaults resolved)."""
    from jaxseeker.train.recipe import build
    from jaxseeker.train.rl.config import RLConfig

    return build(RLConfig, recipe.get("rl"), "rl")
