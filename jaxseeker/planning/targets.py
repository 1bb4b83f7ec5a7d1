"""The machines a paper recipe is planned for, as data, and the search that makes a recipe fit one.

A `Target` is what a user rents: a number of chips, the memory per chip the backend reports usable (XLA's
`bytes_limit`: 31.25 GiB on a v6e, 95.74 GiB on a v5p; on a GPU the share `XLA_PYTHON_CLIENT_MEM_FRACTION` gives
it, which the launcher sets to `chips.USABLE_HBM`), each host's RAM and boot disk. A plan fits a target when every
phase of every stage stays `MARGIN` below the reported memory and a host can stage its chips' share of a
checkpoint (params and optimizer state, f32) in RAM.

`fit_recipe` searches, in order of preference, the meshes of the target's chips (`plan._meshes`: least tensor,
then least context parallelism), the attention kernels of its backend (`KERNELS`: TPU splash, then blocked; GPU
blocked), the context attention where the mesh has a context axis, then per stage:
  SFT  the remat (least recompute first) and the micro-batches: `data.batch_size` rows split into
       `optimizer.grad_accum` micro-batches (train.steps, checkpoint_every and log_every scaled so that the
       recipe's updates, rows per update and schedule stay as they were)
  RL   the update's remat and rows per pass (`plan_fit.choose_update`), the engine's slots (the recipe's, then
       halved) and chips per replica (least first, among those dividing the heads and KV heads: no replicated
       KV cache)
and returns the first that fits, with the keys it changed.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator, Mapping
from typing import Any

from jaxseeker.model.config import CONTEXT_ATTENTIONS, ModelConfig
from jaxseeker.parallel.rules import Rules
from jaxseeker.planning.chips import MARGIN, TARGETS, GiB, Target
from jaxseeker.planning.fit import _meshes, memory_plan
from jaxseeker.planning.memory import StageShape, abstract_mesh, param_elements
from jaxseeker.train.recipe import RecipeError

# Training attention, preferred first. GPU: the blocked kernel only. `attention_impl: cudnn` goes through
# `jax.nn.dot_product_attention`, whose public form takes packed rows' segments only as a dense mask, turned into a
# [q, k] bias of the compute dtype with its gradient (5 bytes a query-key pair in bf16) and computed whole, hidden
# tiles included: 128K rows cannot fit. cuDNN's own packed causal mode (`jax._src.cudnn.fused_attention_stablehlo`:
# q_offsets / kv_offsets with a padding-causal mask) would skip hidden tiles without a [q, k] array, but it is a
# private API that only compiles with a GPU present, so nothing here can test it. The blocked kernel holds one tile
# of scores at a time and skips hidden tiles, and its memory is checked by compiling it on CPU
# (tests/model/test_attention_memory.py); on a GPU it runs as XLA loops over tiles, slower than a fused kernel.
KERNELS = {"tpu": ("splash", "blocked"), "gpu": ("blocked",)}
REMATS = ("none", "dots", "full")  # least recompute first


def get_target(name: str) -> Target:
    """The target called `name`; RecipeError listing the known ones."""
    if name not in TARGETS:
        raise RecipeError(f"target {name!r}: known targets {sorted(TARGETS)}")
    return TARGETS[name]


def state_bytes(cfg: ModelConfig, stage: StageShape, rules: Rules, mesh: Any) -> float:
    """Bytes of one chip's share of a checkpoint: f32 params, Adam's two moments and MultiSteps' accumulator."""
    return 4.0 * param_elements(cfg, rules, mesh) * (3 + (stage.grad_accum > 1))


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _sft_options(stage: StageShape, shards: int) -> Iterator[StageShape]:
    """The stage with each remat (least recompute first) and each split of its rows into micro-batches whose rows
    the batch shards divide (fewest micro-batches first)."""
    for remat in REMATS:
        for split in _divisors(stage.rows):
            if (stage.rows // split) % shards == 0:
                yield dataclasses.replace(
                    stage, remat=remat, rows=stage.rows // split, grad_accum=stage.grad_accum * split
                )


def _engine_options(cfg: ModelConfig, stage: StageShape, target: Target) -> Iterator[StageShape]:
    """The stage with each engine layout: slots from the recipe's down by halves, chips per replica from the
    fewest that divide the query and KV heads (no replicated cache) up to a host's."""
    slots = stage.slots or stage.groups * stage.group_size
    tensors = [t for t in _divisors(target.per_host) if cfg.num_kv_heads % t == 0 and cfg.num_heads % t == 0]
    while slots >= 1:
        for tensor in tensors:
            if slots >= target.chips // tensor:  # a slot per replica at least
                yield dataclasses.replace(stage, slots=slots, engine_tensor=tensor)
        slots //= 2


@dataclasses.dataclass(frozen=True)
class Fit:
    """What `fit_recipe` found: the mesh and stages that fit, their peak bytes per chip, and the recipe keys set."""

    mesh: dict[str, int]
    stages: list[StageShape]
    peaks: list[float]
    changes: dict[str, Any]


def _fits(cfg: ModelConfig, stage: StageShape, rules: Rules, mesh: Any, target: Target, margin: float) -> float | None:
    """The stage's peak bytes per chip when every phase fits the target and a host can stage its checkpoint share,
    else None."""
    try:
        peak = memory_plan(cfg, stage, rules, mesh, target.per_host)["peak"]
    except ValueError:  # an engine layout this slice's hosts do not divide
        return None
    staging = target.per_host * state_bytes(cfg, stage, rules, mesh)
    return peak if peak <= target.budget(margin) and staging <= (1 - margin) * target.host_ram_bytes else None


def _fit_stages(
    cfg: ModelConfig, stages: list[StageShape], rules: Rules, mesh: Any, target: Target, margin: float
) -> tuple[list[StageShape], list[float]] | None:
    """The first options of `stages` (module docstring) that all fit on `mesh`, with their peaks: per SFT stage its
    remat and micro-batches; for RL each stage's update (`plan_fit.choose_update`) and one engine layout for all."""
    from jaxseeker.planning.fit import _batch_shards, choose_update

    if stages[0].kind == "sft":
        shards, chosen = _batch_shards(rules, mesh), []
        for stage in stages:
            fits = ((o, _fits(cfg, o, rules, mesh, target, margin)) for o in _sft_options(stage, shards))
            found = next(((o, p) for o, p in fits if p), None)
            if found is None:
                return None
            chosen.append(found)
        return [o for o, _ in chosen], [p for _, p in chosen]
    budget = target.budget(margin)
    updates = [
        choose_update(
            cfg,
            dataclasses.replace(s, choose=tuple(dict.fromkeys((*s.choose, "remat", "rows")))),
            rules,
            mesh,
            budget,
            target.per_host,
        )
        for s in stages
    ]
    for layout in _engine_options(cfg, stages[0], target):
        trial = [dataclasses.replace(s, slots=layout.slots, engine_tensor=layout.engine_tensor) for s in updates]
        peaks = [_fits(cfg, s, rules, mesh, target, margin) for s in trial]
        if all(peaks):
            return trial, peaks
    return None


def search(
    cfg: ModelConfig, stages: list[StageShape], rules: Rules, target: Target, margin: float = MARGIN
) -> tuple[dict[str, int], ModelConfig, list[StageShape], list[float]] | None:
    """(mesh, model config, stages, peak bytes) of the first layout (module docstring) on which every stage fits
    `target` with `margin`; None when none does."""
    for sizes in _meshes(target.chips, 8, cfg.num_experts):
        mesh = abstract_mesh(sizes)
        for kernel in KERNELS[target.backend]:
            attentions = [cfg.context_attention] + [a for a in CONTEXT_ATTENTIONS if a != cfg.context_attention]
            for attention in attentions if sizes["context"] > 1 else [cfg.context_attention]:
                trial = dataclasses.replace(cfg, attention_impl=kernel, context_attention=attention)
                fitted = _fit_stages(trial, stages, rules, mesh, target, margin)
                if fitted:
                    return sizes, trial, *fitted
    return None


def _changes(recipe: Mapping[str, Any], kind: str, sizes: dict, cfg: ModelConfig, stages: list[StageShape]) -> dict:
    """The recipe keys (dotted) the fit sets, with their values."""
    out: dict[str, Any] = {f"mesh.{k}": v for k, v in sizes.items()}
    out["model.attention_impl"] = cfg.attention_impl
    if sizes["context"] > 1:
        out["model.context_attention"] = cfg.context_attention
    out["model.remat"] = max((s.remat or cfg.remat for s in stages), key=REMATS.index)
    if kind == "sft":
        [s] = stages
        data, opt, train = (dict(recipe.get(k) or {}) for k in ("data", "optimizer", "train"))
        split = s.grad_accum // opt.get("grad_accum", 1)
        if split > 1:
            steps = train.get("steps", 1000)
            out["data.batch_size"] = s.rows
            out["optimizer.grad_accum"] = s.grad_accum
            out["optimizer.total_steps"] = opt.get("total_steps", steps)  # the schedule as it was
            out["train.steps"] = steps * split
            for key, default in (("checkpoint_every", 1000), ("log_every", 10)):
                out[f"train.{key}"] = train.get(key, default) * split
    else:
        out["engine.slots"] = stages[0].slots
        out["engine.tensor"] = stages[0].engine_tensor
    return out


def with_changes(recipe: Mapping[str, Any], changes: Mapping[str, Any]) -> dict:
    """`recipe` with the dotted `changes` applied (sections copied, not modified)."""
    out = {k: dict(v) if isinstance(v, Mapping) else v for k, v in recipe.items()}
    if "target" in changes and "target" not in out:  # after the name, where a reader looks for it
        out = {"name": out.pop("name", "recipe"), "target": None, **out}
    for dotted, value in changes.items():
        section, _, key = dotted.partition(".")
        out[section] = {**(out.get(section) or {}), key: value} if key else value
    return out


def fit_stages(recipe: Mapping[str, Any], rp: Any, target: Target, margin: float = MARGIN) -> Fit:
    """The layout of `recipe`, whose planned stages are `rp` (`planning.command.recipe_stages`), that fits `target`
    with `margin` (module docstring), or a RecipeError saying that none does."""
    if rp.kind == "pipeline":
        raise RecipeError("plan --target: give an SFT or RL recipe (a pipeline's stages run on one host)")
    found = search(rp.cfg, rp.stages, rp.rules, target, margin)
    if found is None:
        raise RecipeError(
            f"{rp.name}: no mesh, kernel, remat, micro-batching or engine layout fits {target.name} "
            f"({target.chips} chips, {target.budget(margin) / GiB:.2f} GiB a chip with a {margin:.0%} margin)"
        )
    sizes, cfg, stages, peaks = found
    changes = _changes(recipe, rp.kind, sizes, cfg, stages)
    changes["target"] = target.name
    return Fit(sizes, stages, peaks, changes)


def checkpoint_bytes(cfg: ModelConfig, stage: StageShape) -> float:
    """Bytes of a whole checkpoint: f32 params, Adam's moments (and MultiSteps' accumulator)."""
    from jaxseeker.model import count_params

    return 4.0 * count_params(cfg) * (3 + (stage.grad_accum > 1))


def host_report(
    cfg: ModelConfig, stage: StageShape, rules: Rules, sizes: Mapping[str, int], target: Target, keep: int = 3
) -> dict:
    """Per host: the RAM a checkpoint's staging takes (its chips' shares of the state), and where `keep` checkpoints
    go: the boot disk of a single host if they fit it, else a bucket (a multi-host slice always writes to one:
    `checkpoint_dir: gs://…`)."""
    mesh = abstract_mesh(sizes)
    whole = checkpoint_bytes(cfg, stage)
    hosts = max(1, math.prod(sizes.values()) // target.per_host)
    return {
        "staging_bytes": target.per_host * state_bytes(cfg, stage, rules, mesh),
        "host_ram_bytes": target.host_ram_bytes,
        "checkpoint_bytes": whole,
        "keep": keep,
        "boot_disk_bytes": target.boot_disk_bytes,
        "hosts": hosts,
        "backend": target.backend,
        "fits_boot_disk": hosts == 1 and keep * whole <= target.boot_disk_bytes,
    }
