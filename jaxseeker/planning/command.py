"""`jaxseeker plan`: per-device memory, FLOPs and fit of every stage of a recipe on a mesh of chips.

`make_plan` reads an SFT, RL or pipeline recipe (`recipe_stages`; a pipeline's stages are those of the recipes it
trains, `pipeline_stages`), so, like every command, this module sits above the offline pipeline; the planner below
it (`memory`, `rollout`, `fit`, `recipe`) plans one SFT or RL recipe, and the training loops use it.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jaxseeker import model
from jaxseeker.argtypes import at_least
from jaxseeker.cli_args import add_config, add_mesh
from jaxseeker.planning.chips import CHIPS, TARGETS, USABLE_HBM, GiB, Target
from jaxseeker.train.recipe import RecipeError, recipe_kind

if TYPE_CHECKING:  # jax loads inside the functions that plan, so `jaxseeker --help` stays quick
    from jaxseeker.parallel import MeshConfig, Rules
    from jaxseeker.planning.memory import StageShape
    from jaxseeker.planning.targets import Fit

ROWS = (
    "params",
    "optimizer",
    "grads",
    "grad_sum",
    "compute",
    "reference",
    "activations",
    "layer",
    "logits",
    "batch",
    "engine_weights",
    "kv_cache",
    "rollout",
    "handoff",
)
PHASE_ROWS = (("rollout_phase", "rollout phase"), ("update_phase", "update phase"), ("handoff_phase", "hand-off"))


@dataclasses.dataclass
class RecipePlan:
    """What `recipe_stages` reads from a recipe."""

    name: str
    kind: str  # "sft" | "rl" | "pipeline"
    cfg: model.ModelConfig
    mesh: MeshConfig
    rules: Rules
    stages: list[StageShape]
    notes: list[str]


def pipeline_stages(recipe: Mapping[str, Any], notes: list[str]) -> tuple[model.ModelConfig, list[StageShape]]:
    """The training stages `jaxseeker pipeline` runs from its recipe (`pipeline.recipes`): sft, extend, and rl (its
    `jaxseeker rl` recipe, or with rl.method rft the rft section's `jaxseeker sft` recipe)."""
    from jaxseeker.pipeline import pipeline_config
    from jaxseeker.pipeline.recipes import stand_in_recipes
    from jaxseeker.pipeline.train_stages import model_section
    from jaxseeker.planning.recipe import model_config, rl_stages, sft_stages

    try:
        cfg = pipeline_config(dict(recipe))
        # the model section the stages train: a pretrained policy's config read without loading (or importing) the
        # weights, or the from-scratch shape
        policy = model_config(model_section(cfg, cfg.policy.init or None), [])
    except (ValueError, model.ConfigError) as e:
        raise RecipeError(f"pipeline recipe: {e}") from None
    recipes = stand_in_recipes(cfg)
    rl, rft = recipes.pop("rl"), recipes.pop("rft", None)
    rl_shapes = rl_stages(rl, notes) if rft is None else [dataclasses.replace(s, name="rl") for s in sft_stages(rft)]
    stages = [dataclasses.replace(s, name=name) for name, r in recipes.items() for s in sft_stages(r)]
    return policy, stages + rl_shapes


def recipe_stages(recipe: Mapping[str, Any]) -> RecipePlan:
    """Validate `recipe` (SFT, RL or pipeline) and return its model, mesh, rules and stages."""
    from jaxseeker.parallel import MeshConfig, make_rules
    from jaxseeker.planning.recipe import mesh_and_rules, model_config, position_notes, rl_stages, sft_stages

    kind, notes = recipe_kind(recipe), []
    name = str(recipe.get("name", "recipe"))
    if kind == "pipeline":
        cfg, stages = pipeline_stages(recipe, notes)
        notes += position_notes(cfg, stages)
        return RecipePlan(name, kind, cfg, MeshConfig(), make_rules(), stages, notes)
    mesh, rules = mesh_and_rules(recipe)
    stages = sft_stages(recipe) if kind == "sft" else rl_stages(recipe, notes)
    cfg = model_config(recipe.get("model"), notes)
    notes += position_notes(cfg, stages)
    return RecipePlan(name, kind, cfg, mesh, rules, stages, notes)


def fit_recipe(recipe: Mapping[str, Any], target: Target, margin: float | None = None) -> Fit:
    """The layout of `recipe` (an SFT or RL recipe) that fits `target` with `margin` (default `targets.MARGIN`), or
    a RecipeError saying that none does (`targets.fit_stages` on the recipe's stages)."""
    from jaxseeker.planning import targets

    return targets.fit_stages(recipe, recipe_stages(recipe), target, targets.MARGIN if margin is None else margin)


def make_plan(
    recipe: Mapping[str, Any],
    *,
    mesh: MeshConfig | None = None,
    chip: str | None = None,
    chips: int | None = None,
    target: str | None = None,
    write_bytes_per_s: float | None = None,
) -> dict:
    """The plan of every stage of `recipe` (validated first) on `mesh` (default: the recipe's) of `chip`s (default:
    those of `target`, or of the recipe's `target` when no chip is given, else v5p), and a suggested mesh when some
    stage does not fit. Against a target (`planning.targets`) a stage fits within `targets.MARGIN` of the memory the
    backend reports, and the plan says what a host stages of a checkpoint, whether one fits its boot disk, and how
    long a preemption save takes at `write_bytes_per_s` a host (default: the target's). JSON-serialisable."""
    from jaxseeker.model import count_params
    from jaxseeker.planning.fit import plan_stage, resolve_mesh, suggest_mesh
    from jaxseeker.planning.memory import FLASH_IMPLS
    from jaxseeker.planning.preemption import preemption_report
    from jaxseeker.planning.summarizer import summarizer_report
    from jaxseeker.planning.targets import MARGIN, get_target, host_report

    the_target = get_target(target or recipe["target"]) if target or (chip is None and "target" in recipe) else None
    if the_target and write_bytes_per_s:
        the_target = dataclasses.replace(the_target, write_bytes_per_s=write_bytes_per_s)
    chip = the_target.chip if the_target else chip or "v5p"
    if chip not in CHIPS:
        raise RecipeError(f"--chip {chip!r}: known chips {sorted(CHIPS)}")
    rp = recipe_stages(recipe)
    notes = list(rp.notes)
    chips = the_target.chips if the_target and chips is None else chips
    sizes = resolve_mesh(mesh or rp.mesh, chips, notes)
    the_chip, cfg = CHIPS[chip], rp.cfg
    budget = the_target.budget() if the_target else USABLE_HBM * the_chip.hbm_bytes
    try:
        stages = [plan_stage(cfg, s, rp.rules, sizes, the_chip, budget) for s in rp.stages]
    except ValueError as e:
        raise RecipeError(f"engine: {e}") from None
    n_chips = math.prod(sizes.values())
    hosts = max(1, n_chips // min(the_chip.per_host, n_chips))
    if rp.kind == "rl":
        for s in stages:
            s["summarizer"] = summarizer_report(recipe, s, the_chip, budget, hosts)
    summarizer = max(
        (s["summarizer"] for s in stages if s.get("summarizer")), key=lambda r: r["chips_needed"] or 0, default=None
    )
    fits = all(s["fits"] for s in stages)  # the summariser runs apart: its own `fits` flags it
    suggestion = None if fits or the_target else suggest_mesh(cfg, rp.stages, rp.rules, the_chip, n_chips)
    target_info = preemption = None
    if the_target:
        preemption = preemption_report(cfg, rp.stages[0], rp.rules, sizes, the_target)
        section = (recipe.get("train") if rp.kind == "sft" else recipe.get("rl")) or {}
        host = host_report(cfg, rp.stages[0], rp.rules, sizes, the_target, section.get("keep", 3))
        fits = fits and host["staging_bytes"] <= (1 - MARGIN) * host["host_ram_bytes"]
        peak = max(s["memory"]["peak"] for s in stages)
        target_info = {
            "name": the_target.name,
            "usable_bytes": the_target.usable_bytes,
            "margin": MARGIN,
            "budget_bytes": budget,
            "free": 1 - peak / the_target.usable_bytes,
            "host": host,
        }
    split = [s for s in stages if s["seq_per_device"] < s["seq"]]
    if split:
        notes.append(
            f"context parallelism: attention {split[0]['attention']} (model.context_attention / the kernel "
            "on each device); the chunked loss runs on whole rows on each device of the context axis (it "
            "gathers the final hidden states)"
        )
    elif cfg.attention_impl not in FLASH_IMPLS:
        held = "the [q, k] mask as a bias" if cfg.attention_impl == "cudnn" else "[q, k] f32 scores"
        notes.append(
            f"attention_impl={cfg.attention_impl} holds {held} in training; splash (TPU) and blocked do not, "
            "nor does a mesh with a context axis"
        )
    engine = next((s["engine"] for s in stages if s["engine"]), None)
    if engine:
        notes.append(
            f"rollouts: the engine's own layout, {engine['replicas']} replicas of {engine['tensor']} chips "
            f"(weights in {engine['dtype']}, split over each replica's chips), dropped during the update; "
            "decoding is bandwidth-bound (the ideal time counts its FLOPs only)"
        )
    return {
        "name": rp.name,
        "kind": rp.kind,
        "model": {
            "architecture": cfg.model_type,
            "parameters": count_params(cfg),
            "layers": cfg.num_layers,
            "hidden_size": cfg.hidden_size,
            "experts": cfg.num_experts,
            "remat": cfg.remat,
            "compute_dtype": cfg.compute_dtype,
            "attention_impl": cfg.attention_impl,
        },
        "chip": {
            "key": chip,
            "name": the_chip.name,
            "hbm_bytes": the_chip.hbm_bytes,
            "peak_flops": the_chip.peak_flops,
            "usable_fraction": USABLE_HBM,
        },
        "target": target_info,
        "mesh": sizes,
        "chips": n_chips,
        "stages": stages,
        "fits": fits,
        "suggestion": suggestion,
        "summarizer": summarizer,
        "preemption": preemption,
        "notes": notes,
    }


def _gib(x: float) -> str:
    return f"{x / GiB:,.2f}"


def _pair_text(x: float) -> str:
    """Bytes per query-key pair, to three significant digits however small."""
    return f"{x:.3g}"


def _mesh_text(sizes: Mapping[str, int]) -> str:
    return ",".join(f"{k}={v}" for k, v in sizes.items())


def format_plan(plan: Mapping[str, Any]) -> str:
    """The plan as a table: GiB per device by component and stage, then peak, fit, FLOPs and ideal time; then the
    target, the preemption save and the summariser."""
    from jaxseeker.planning.preemption import preemption_lines
    from jaxseeker.planning.summarizer import summarizer_lines

    m, chip = plan["model"], plan["chip"]
    experts = f", {m['experts']} experts" if m["experts"] else ""
    lines = [
        (
            f"{plan['name']} ({plan['kind']}): {m['architecture']} {m['parameters'] / 1e9:.2f}B params, {m['layers']} "
            f"layers{experts}; remat {m['remat']}, {m['compute_dtype']}, attention {m['attention_impl']}"
        ),
        (
            f"mesh {_mesh_text(plan['mesh'])} = {plan['chips']} × {chip['name']} ({chip['hbm_bytes'] / GiB:.0f} GiB, "
            f"{chip['peak_flops'] / 1e12:.0f} TFLOP/s bf16)"
        ),
        "",
    ]
    stages = plan["stages"]
    width = max(12, *(len(s["stage"]) for s in stages))
    lines.append(f"{'GiB per device':<16}" + "".join(f"{s['stage']:>{width + 2}}" for s in stages))
    rows = [
        ("rows × seq", [f"{s['rows_per_device']} × {s['seq_per_device']}" for s in stages]),
        ("remat", [s["remat"] for s in stages]),
        ("attention", [s["attention"] for s in stages]),
        ("  B / q-k pair", [_pair_text(s["attention_bytes_per_pair"]) for s in stages]),
    ]
    engines = any(s["engine"] for s in stages)
    if engines:
        layouts = [s["engine"] for s in stages]
        rows.append(("engine slots", [f"{e['replicas']} × {e['slots']}" if e else "-" for e in layouts]))
        rows.append(("  KV pages", [f"{e['pages']:,} × {e['page']}" if e else "-" for e in layouts]))
    rows += [(key, [_gib(s["memory"][key]) for s in stages]) for key in ROWS if any(s["memory"][key] for s in stages)]
    if engines:
        rows += [(label, [_gib(s["memory"][key]) for s in stages]) for key, label in PHASE_ROWS]
    if plan.get("summarizer"):
        reports = [s.get("summarizer") or {} for s in stages]
        rows += [
            ("summariser calls", [f"{r['calls']:,}" if r else "-" for r in reports]),
            ("  decode tok/s", [f"{r['decode_tokens_per_s']:,.0f}" if r else "-" for r in reports]),
            ("  chips", [f"{r['chips_needed']:,}" if r.get("chips_needed") else "-" for r in reports]),
        ]
    rows += [
        ("peak", [_gib(s["memory"]["peak"]) for s in stages]),
        (
            f"fits ({plan['target']['budget_bytes'] / GiB:.2f} GiB)"
            if plan["target"]
            else f"fits ({chip['usable_fraction']:.0%} HBM)",
            ["yes" if s["fits"] else "NO: " + ", ".join(s["over"]) for s in stages],
        ),
        ("PFLOP / step", [f"{s['flops']['device'] / 1e15:,.1f}" for s in stages]),
        ("  model PFLOP", [f"{s['flops']['model'] / 1e15:,.1f}" for s in stages]),
        ("ideal step s", [f"{s['ideal_step_s']:,.2f}" for s in stages]),
    ]
    for label, values in rows:
        lines.append(f"{label:<16}" + "".join(f"{v:>{width + 2}}" for v in values))
    lines.append(
        "peak = the largest phase: params + optimizer + reference + (rollouts: the engine's weights, cache "
        "and largest call | the update: batch + the pass or optimizer step | the hand-off); see "
        "`jaxseeker.planning.memory`"
    )
    if plan["target"]:
        lines += _target_lines(plan["target"])
    if plan.get("preemption"):
        lines += preemption_lines(plan["preemption"])
    if plan.get("summarizer"):
        lines += summarizer_lines(plan["summarizer"])
    if plan.get("changes"):
        lines.append("set for the target: " + ", ".join(f"{k}={v}" for k, v in plan["changes"].items()))
    if not plan["fits"] and plan["target"]:
        lines.append(f"does not fit {plan['target']['name']}: `jaxseeker plan --config … --target NAME` searches")
    elif not plan["fits"]:
        s = plan["suggestion"]
        attention = f", context_attention {s['context_attention']}" if s and s["mesh"]["context"] > 1 else ""
        lines.append(
            f"suggested mesh: {_mesh_text(s['mesh'])} on {s['chips']} chips (peak {_gib(s['peak_bytes'])} "
            f"GiB{attention})"
            if s
            else "no mesh of up to 8192 chips fits: shorten the rows, use remat full "
            "and a flash attention, or fewer slots"
        )
    lines += [f"note: {n}" for n in plan["notes"]]
    return "\n".join(lines)


def _target_lines(t: Mapping[str, Any]) -> list[str]:
    """What the plan says of its target: the margin left and the host's share of a checkpoint."""
    host = t["host"]
    disk = (
        f"the {host['keep']} kept fit the {_gib(host['boot_disk_bytes'])} GiB boot disk"
        if host["fits_boot_disk"]
        else f"over the {_gib(host['boot_disk_bytes'])} GiB boot disk: a checkpoint_dir on a larger disk or gs://"
        if host["backend"] == "gpu"
        else "give a gs:// checkpoint_dir (tpu.py launch --bucket)"
        + (" or a data disk (tpu.py create --data-disk)" if host["hosts"] == 1 else f": {host['hosts']} hosts")
    )
    return [
        f"target {t['name']}: {_gib(t['usable_bytes'])} GiB a chip as the backend reports it, {t['margin']:.0%} "
        f"margin: the peak leaves {t['free']:.1%} free",
        f"host: a checkpoint's staging takes {_gib(host['staging_bytes'])} of {_gib(host['host_ram_bytes'])} GiB "
        f"RAM; a checkpoint is {_gib(host['checkpoint_bytes'])} GiB, {disk}",
    ]


def _plan(args: argparse.Namespace) -> int:
    from jaxseeker.planning.targets import get_target, with_changes
    from jaxseeker.train.recipe import read_recipe

    recipe = read_recipe(args.config, args.set)
    changes = None
    if args.target:
        if args.mesh or args.chip or args.chips:
            raise RecipeError("--target: the search picks the mesh and chips; leave out --mesh, --chip and --chips")
        changes = fit_recipe(recipe, get_target(args.target)).changes
        recipe = with_changes(recipe, changes)
    bandwidth = args.write_gbps * 1e9 if args.write_gbps else None
    plan = make_plan(
        recipe, mesh=args.mesh, chip=args.chip, chips=args.chips, target=args.target, write_bytes_per_s=bandwidth
    )
    plan["changes"] = changes
    if args.write:
        import yaml

        args.write.write_text(yaml.safe_dump(recipe, sort_keys=False))
    print(json.dumps(plan, indent=2) if args.json else format_plan(plan))
    return 0


def add_parser(subparsers) -> None:
    """Add `plan --config FILE [--mesh …] [--chip …] [--chips N] [--target NAME [--write FILE]] [--write-gbps GB_S]
    [--json]`."""
    p = subparsers.add_parser("plan", help="per-device memory, FLOPs and fit of a recipe's stages on a mesh")
    add_config(
        p,
        what="SFT, RL or pipeline recipe",
        example="data.seq_len=8192",
        recipes=("webexplorer_qwen3-8b_sft", "rl_tiny", "demo"),
    )
    add_mesh(p, devices=False)
    p.add_argument("--chip", default=None, choices=sorted(CHIPS), help="default: the recipe's target's, else v5p")
    p.add_argument(
        "--target",
        choices=sorted(TARGETS),
        default=None,
        help="search the mesh, kernels, remat, micro-batches and engine layout that fit this machine",
    )
    p.add_argument("--write", type=Path, default=None, metavar="FILE", help="with --target: write the fitted recipe")
    p.add_argument(
        "--chips", type=at_least(1), default=None, help="chips for a -1 mesh axis (default: the mesh's product)"
    )
    p.add_argument(
        "--write-gbps",
        type=at_least(0.0, float, above=True),
        default=None,
        metavar="GB_S",
        help="a host's checkpoint write rate for the preemption save (default: the target's, 1 GB/s)",
    )
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=_plan)
