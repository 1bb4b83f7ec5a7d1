"""The RL update fits by construction: the plan picks its remat and micro-batch rows for the memory of the machine,
and a run whose plan does not fit is refused before its first rollout.

`choose_update` takes an RL stage (`plan.StageShape`) whose `choose` names what is left to pick ("remat": the
recipe's model section sets none; "rows": `rl.update_tokens` is 0) and returns it with the cheapest choice whose
update phase fits the budget: the least recompute first (remat none, then dots, then full: each costs FLOPs), and
for it as many rows as fit, up to `UPDATE_TOKENS` tokens per device and pass (more tokens per pass buy no speed once
the matmuls fill the chip, and cost memory). `planned_recipe` applies it to a `jaxseeker rl` recipe on this
process's devices (host RAM on CPU, each device's memory on accelerators): it writes the choice into the recipe
(`model.remat`, `rl.update_tokens`, `rl.pack`), or raises a `RecipeError` with the plan and the keys to set.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Mapping
from typing import Any

from jaxseeker.model.config import ModelConfig
from jaxseeker.parallel.rules import Rules
from jaxseeker.train.chips import MARGIN, USABLE_HBM, GiB
from jaxseeker.train.plan import PHASES, StageShape, abstract_mesh, memory_plan
from jaxseeker.train.recipe import RecipeError

UPDATE_TOKENS = 2048  # tokens per device of one forward/backward pass the plan aims for at most
REMATS = ("none", "dots", "full")  # least recompute first


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


def device_budget() -> tuple[float, str]:
    """(bytes a plan may fill per local device, what they are): on CPU `USABLE_HBM` of the host's RAM shared by its
    devices; on an accelerator the memory its backend reports usable less `MARGIN`, as `jaxseeker plan --target`
    plans it (`train.targets`)."""
    import jax

    device = jax.local_devices()[0]
    if device.platform == "cpu":
        ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        return USABLE_HBM * ram / jax.local_device_count(), f"host RAM ({ram / GiB:.0f} GiB)"
    limit = (device.memory_stats() or {}).get("bytes_limit")
    if not limit:
        return math.inf, f"{device.device_kind} (memory unknown)"
    return (1 - MARGIN) * limit, f"{device.device_kind} memory ({limit / GiB:.2f} GiB usable)"


def planned_recipe(recipe: Mapping[str, Any], budget: float | None = None, where: str | None = None) -> dict:
    """`recipe` (a `jaxseeker rl` recipe) with its update planned on this process's devices (`device_budget`, or
    `budget` bytes per device): `model.remat`, `rl.update_tokens` and `rl.pack` set to what the run uses. Raises
    RecipeError, before anything is loaded or rolled out, when a context stage does not fit, naming the phase, its
    size and the keys to set."""
    import jax

    from jaxseeker.train.plan_command import resolve_mesh
    from jaxseeker.train.plan_recipe import mesh_and_rules, model_config, rl_stages

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
    for s in chosen:  # the rows `rl_update.update` runs: update_tokens // seq, at least 1, at most a mini-batch's
        s = dataclasses.replace(s, remat=remat, rows=min(s.mini_batch_rows, max(1, tokens // s.seq)))
        memory = memory_plan(cfg, s, rules, mesh, min(jax.local_device_count(), 8))
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
    return out


def _size(n: float) -> str:
    """Bytes as GiB, or MiB below a tenth of one."""
    return f"{n / GiB:.2f} GiB" if n >= GiB / 10 else f"{n / 2**20:.1f} MiB"


def build_rl(recipe: Mapping[str, Any]) -> Any:
    """The recipe's RLConfig (defaults resolved)."""
    from jaxseeker.train.recipe import build
    from jaxseeker.train.rl_config import RLConfig

    return build(RLConfig, recipe.get("rl"), "rl")
