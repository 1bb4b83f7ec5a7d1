"""The recipes the pipeline's training stages run. The `sft`, `extend` and `rft` sections are `jaxseeker sft` recipe
sections (`extend` and `rft` the `sft` section's with their own keys laid on), the `rl` section's sub-sections a
`jaxseeker rl` recipe's: a key means what it means in the recipe, and a key not set takes the recipe's own default.
The pipeline adds what only it knows (the policy, the paths, the eval section's rollout limits, the tools and world);
each stage writes the recipe it ran as `recipe.yaml`, which `jaxseeker sft --config` / `jaxseeker rl --config` runs
alone. `pipeline_config` reads a pipeline recipe and checks every stage's recipe before anything runs."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from jaxseeker.errors import InputError
from jaxseeker.pipeline.config import SHARED, STAGES, PipelineConfig
from jaxseeker.pipeline.context import rollout_config
from jaxseeker.pipeline.quick import quick_recipe
from jaxseeker.tools.config import tools_mapping
from jaxseeker.train.recipe import RecipeError, build, check_sections, merged

# Keys the pipeline sets in the recipes it builds; a section that sets one is an error.
SFT_PIPELINE_KEYS = {"train": ("train_files", "tokenizer", "out_dir", "checkpoint_dir"), "data": ("name_pool",)}
RL_PIPELINE_KEYS = {"rl": ("questions", "tokenizer", "out_dir", "checkpoint_dir")}
# extend and rft draw their own data orders: the sft's data.seed + 1 (extend), + 1 + round + 10·k (rft round r,
# fine-tune k of a soup)
DERIVED_SEED = {"data": ("seed",)}
SFT_STAGES = ("sft", "extend", "rft")

# Keys of the pipeline's own schema that are now recipe keys: where each one lives.
MOVED = {
    "policy": {
        "seq_len": "sft.data.seq_len",
        "batch_size": "sft.data.batch_size",
        "steps": "sft.train.steps",
        "lr": "sft.optimizer.lr",
        "context_weight": "sft.data.context_weight",
        "permute_digits": "sft.data.permute_digits",
        "copy_replay": "sft.data.copy_rate",
        "extend_steps": "extend.train.steps",
        "extend_seq_len": "extend.data.seq_len",
    },
    "rl": {
        "steps": "rl.rl.steps (rl.method pg) or rft.train.steps (rl.method rft)",
        "lr": "rl.optimizer.lr (rl.method pg) or rft.optimizer.lr (rl.method rft)",
        "group_size": "rl.rl.group_size",
        "questions_per_step": "rl.rl.batch_questions",
        "selection": "rl.rl.selection",
        "temperature": "rl.sampling.temperature",
        "negative_weight": "rl.rl.objective_kwargs.negative_weight",
        "advantage": "rl.rl.advantage",
        "epochs": "rl.rl.epochs",
        "adam_eps": "rl.optimizer.eps",
        "kl_coef": "rl.rl.kl_coef",
        "seed": "rl.rl.seed",
        "rft_unlikelihood": "rft.data.unlikelihood_weight",
    },
}


def pipeline_config(recipe: dict[str, Any], *, quick: bool = False) -> PipelineConfig:
    """A PipelineConfig from a recipe mapping: unknown sections and keys are errors naming them (a key that moved
    into a recipe section names where it went), and every training stage's recipe is checked as `jaxseeker sft` /
    `jaxseeker rl` would check it."""
    check_sections(recipe, ("name", *SHARED, *STAGES), "pipeline recipe")
    check_moved(recipe)
    if quick:
        recipe = quick_recipe(recipe)
    sections = {name: build(cls, recipe.get(name) or {}, name) for name, cls in STAGES.items()}
    sections |= {name: _read(parse, recipe.get(name), name) for name, parse in SHARED.items()}
    cfg = PipelineConfig(name=recipe.get("name", "demo") + ("-quick" if quick else ""), **sections)
    check_recipes(cfg)
    return cfg


def _read(parse: Any, value: Any, where: str) -> Any:
    """`parse(value, where)`, its errors RecipeErrors (they name the key already)."""
    try:
        return parse(value, where)
    except (InputError, FileNotFoundError) as e:
        raise RecipeError(str(e)) from None


def check_moved(recipe: Mapping[str, Any]) -> None:
    """Raise, naming the new place, when `recipe` sets a key of the pipeline's own schema that is a recipe key."""
    for section, moved in MOVED.items():
        values = recipe.get(section) or {}
        if not isinstance(values, Mapping):
            continue
        for key in sorted(set(values) & set(moved)):
            raise RecipeError(f"{section}.{key}: this key is {moved[key]}, the recipe's own (docs/configs.md)")
        reward = values.get("reward") if section == "rl" else None
        if reward is not None and not isinstance(reward, Mapping):
            raise RecipeError("rl.reward: the RL recipe's reward section; the reward function is rl.reward.fn")


def stage_sections(cfg: PipelineConfig, stage: str) -> dict[str, dict]:
    """The SFT recipe sections of `stage` (sft | extend | rft) as set: the sft section's, with extend's or rft's laid
    on key by key."""
    sft = {k: dict(v) for k, v in dataclasses.asdict(cfg.sft).items()}
    return sft if stage == "sft" else merged(sft, dataclasses.asdict(getattr(cfg, stage)))


def sft_config(cfg: PipelineConfig, stage: str) -> tuple[Any, Any, Any]:
    """The DataConfig, OptimizerConfig and TrainConfig `stage`'s recipe resolves to (the recipe's defaults filled)."""
    from jaxseeker.data import DataConfig
    from jaxseeker.train.optimizer import OptimizerConfig
    from jaxseeker.train.recipe import build
    from jaxseeker.train.sft.loop import TrainConfig

    sections = stage_sections(cfg, stage)
    train = build(TrainConfig, sections["train"], "train")
    optimizer = build(OptimizerConfig, {"total_steps": train.steps, **sections["optimizer"]}, "optimizer")
    return build(DataConfig, sections["data"], "data"), optimizer, train


def rl_config(cfg: PipelineConfig) -> tuple[Any, Any]:
    """The RLConfig and SamplingConfig of the rl section's `rl` and `sampling` sub-sections (RL's default
    temperature 1.0): the rft rollouts read their group_size, seed and temperature."""
    from jaxseeker.generation import SamplingConfig
    from jaxseeker.train.recipe import build
    from jaxseeker.train.rl.config import RLConfig

    sampling = build(SamplingConfig, {"temperature": 1.0, **cfg.rl.sampling}, "rl.sampling")
    return build(RLConfig, cfg.rl.rl, "rl.rl"), sampling


def stage_seed(cfg: PipelineConfig, stage: str, round_: int = 1, member: int = 0) -> int | None:
    """The data seed the pipeline gives `stage`: None for sft (its own data.seed), the sft's + 1 for extend, and
    + 1 + round + 10·member for fine-tune `member` of rft round `round_`."""
    if stage == "sft":
        return None
    base = sft_config(cfg, "sft")[0].seed
    return base + 1 if stage == "extend" else base + 1 + round_ + 10 * member


def sft_recipe(
    cfg: PipelineConfig,
    stage: str,
    *,
    name: str,
    model: Mapping[str, Any],
    train_files: Sequence[str | Path],
    tokenizer: str | Path,
    out_dir: str | Path,
    name_pool: str = "",
    seed: int | None = None,
) -> dict[str, Any]:
    """The `jaxseeker sft` recipe of `stage` (sft | extend | rft): its sections as set, with the pipeline's keys."""
    pipeline: dict[str, dict] = {
        "train": {"train_files": [str(f) for f in train_files], "tokenizer": str(tokenizer), "out_dir": str(out_dir)},
        "data": ({"name_pool": name_pool} if name_pool else {}) | ({"seed": seed} if seed is not None else {}),
    }
    sections = merged(stage_sections(cfg, stage), pipeline)
    return plain({"name": name, "model": dict(model)} | {k: v for k, v in sections.items() if v})


def rl_recipe(
    cfg: PipelineConfig, *, name: str, model: Mapping[str, Any], questions: Sequence[str | Path], out_dir: str | Path
) -> dict[str, Any]:
    """The `jaxseeker rl` recipe of the rl stage (rl.method pg): the rl section's sub-sections as set, with the
    pipeline's keys: the questions, the rollout limits of the eval section, the tools section's tools over the
    world."""
    rc = rollout_config(cfg)
    pipeline = {"rl": {"questions": [str(q) for q in questions], "out_dir": str(out_dir)}}
    sections = merged(cfg.rl.recipe_sections(), pipeline)
    return plain(
        {"name": name, "model": dict(model)}
        | {k: v for k, v in sections.items() if v}
        | {
            "rollout": {
                "max_context_tokens": rc.max_context_tokens,
                "max_tokens_per_turn": rc.max_tokens_per_turn,
                "answer_reserve_tokens": rc.answer_reserve_tokens,
                "max_tool_calls": rc.max_tool_calls,
                "date": rc.date,
                "prompt": rc.prompt,
                "lockstep_tools": rc.lockstep_tools,
            },
            "tools": tools_mapping(cfg.tools),
            "world": cfg.world.spec(),
        }
    )


def plain(recipe: Mapping[str, Any]) -> dict[str, Any]:
    """`recipe` as plain YAML-able data (tuples become lists)."""
    return json.loads(json.dumps(recipe))


def write_recipe(out: Path, recipe: Mapping[str, Any]) -> Path:
    """Write `recipe` as `out/recipe.yaml`, the file `jaxseeker sft|rl --config` runs alone; returns its path."""
    path = out / "recipe.yaml"
    out.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(dict(recipe), sort_keys=False, allow_unicode=True))
    return path


def _check_pipeline_keys(stage: str, sections: Mapping[str, Mapping], reserved: Mapping[str, Sequence[str]]) -> None:
    for section, keys in reserved.items():
        for key in keys:
            if key in (sections.get(section) or {}):
                raise RecipeError(f"{stage}.{section}.{key}: the pipeline sets this key; remove it")


def check_recipes(cfg: PipelineConfig) -> None:
    """Raise on a training stage's recipe that `jaxseeker sft` / `jaxseeker rl` would refuse (the error names the
    stage's section and key), or on a key of the pipeline's in a recipe section."""
    from jaxseeker.planning.recipe import rl_stages, sft_stages

    for stage in SFT_STAGES:
        sections = dataclasses.asdict(getattr(cfg, stage))
        _check_pipeline_keys(stage, sections, SFT_PIPELINE_KEYS)
        if stage != "sft":
            _check_pipeline_keys(stage, sections, DERIVED_SEED)
    _check_pipeline_keys("rl", cfg.rl.recipe_sections(), RL_PIPELINE_KEYS)
    copy_rate = cfg.sft.data.get("copy_rate", 0.0)
    if cfg.policy.init and copy_rate:
        raise RecipeError(
            f"sft.data.copy_rate ({copy_rate}) replays a from-scratch policy's copy warm-up; policy.init "
            f"({cfg.policy.init!r}) is pretrained: set it to 0"
        )
    checks = {"rl": lambda recipe: rl_stages(recipe, [])} | dict.fromkeys(SFT_STAGES, sft_stages)
    for stage, recipe in stand_in_recipes(cfg).items():
        _as_stage(stage, checks[stage], recipe)
    check_rl_lr(cfg)


def check_rl_lr(cfg: PipelineConfig) -> None:
    """Refuse an RL fine-tune that would inherit the SFT learning rate. The rft stage's recipe is the sft section's
    with the rft section laid on, so without `rft.optimizer.lr` it would train the policy on its own episodes at the
    SFT's rate (1e-4 … 1e-3), which RL's few, self-generated episodes do not bear. The pg stage never inherits: its
    optimizer is `rl.optimizer` over the RL defaults (`train.rl.config.RL_OPTIMIZER_DEFAULTS`)."""
    if cfg.rl.method != "rft" or "lr" in cfg.rft.optimizer:
        return
    inherited = sft_config(cfg, "sft")[1].lr
    raise RecipeError(
        f"rft.optimizer.lr: not set, so the rft fine-tune would inherit the SFT learning rate "
        f"(sft.optimizer.lr = {inherited:g}); RL fine-tunes a trained policy on its own episodes at about 1e-6 … 1e-5 "
        "(full) or 1e-5 … 1e-4 (LoRA): set rft.optimizer.lr (and min_lr) for the RL stage"
    )


def stand_in_recipes(cfg: PipelineConfig) -> dict[str, dict[str, Any]]:
    """The recipes of the config's training stages (sft, extend, rft, rl; only those it runs but rl, whose recipe
    rft reads too) with stand-in paths: every key the sections set, as `jaxseeker plan` or a check reads them."""
    where = {"name": cfg.name, "model": {"hf_path": "policy"}, "out_dir": "out"}
    stages = ("sft",) + ("extend",) * cfg.extend.given() + ("rft",) * (cfg.rl.method == "rft")
    out = {
        stage: sft_recipe(cfg, stage, train_files=["trajectories.jsonl"], tokenizer="policy", **where)
        for stage in stages
    }
    rl_where = where | {"model": where["model"] | cfg.rl.model_keys()}  # the RL stage's own adapters, if any
    return out | {"rl": rl_recipe(cfg, questions=["questions.jsonl"], **rl_where)}


def _as_stage(stage: str, check: Any, *args: Any) -> Any:
    """`check(*args)` with a RecipeError's section prefixed by the pipeline section it came from."""
    try:
        return check(*args)
    except RecipeError as e:
        raise RecipeError(f"{stage}.{e}") from None
