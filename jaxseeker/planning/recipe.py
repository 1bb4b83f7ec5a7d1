"""An SFT or RL recipe's model, mesh and stages for the planner, validated as `jaxseeker sft` / `rl` would (a pipeline
recipe's stages are those of the recipes it trains: `command.pipeline_stages`).

Every section goes through the same builders the loops use (`TrainConfig`, `DataConfig`, `RLConfig`,
`RolloutConfig`, `RewardConfig`, `ToolsConfig`, …), so a recipe that plans is one whose keys the loop
accepts. Nothing is loaded but a `config.json` (or a GGUF file's metadata): no weights, tokenizer, data or
questions, and no device.
A model section with an `hf_path` that is not on this machine is planned from the shape fields it gives
(the paper configs restate the checkpoint's `config.json` for this).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from jaxseeker import model
from jaxseeker.errors import did_you_mean
from jaxseeker.parallel import MESH_AXES, MeshConfig, Rules, make_rules
from jaxseeker.planning.memory import StageShape
from jaxseeker.train.lora import lora_from_recipe
from jaxseeker.train.optimizer import OptimizerConfig
from jaxseeker.train.recipe import RecipeError, build, check_kwargs, check_sections

SHAPE_FIELDS = (
    "model_type",
    "vocab_size",
    "hidden_size",
    "intermediate_size",
    "num_layers",
    "num_heads",
    "num_kv_heads",
    "head_dim",
)


def model_config(section: Mapping[str, Any] | None, notes: list[str]) -> model.ModelConfig:
    """The ModelConfig of a `model` section without loading weights: `hf_path`'s config.json with the other keys
    as overrides, or (no checkpoint here) the keys alone, which must then give the shape."""
    section = dict(section or {})
    lora = lora_from_recipe(section)
    if lora is not None:
        notes.append(
            f"model.lora: rank-{lora.rank} adapters train, not the weights; the memory planned is full "
            "fine-tuning's, an upper bound"
        )
    section.pop("lora", None)
    hf_path = section.pop("hf_path", None)
    known = [f.name for f in dataclasses.fields(model.ModelConfig)]
    unknown = sorted(set(section) - set(known))
    if unknown:
        raise RecipeError(
            f"model: unknown keys {unknown}{did_you_mean(unknown, ['hf_path', 'lora', *known])}; known "
            f"keys: ['hf_path', 'lora'] + {known}"
        )
    try:
        gguf_file = model.gguf_source(hf_path) if hf_path else None  # a registered name's or a .gguf file
        if gguf_file is not None:
            return model.load_gguf_config(gguf_file, **section)
        if hf_path and (Path(hf_path) / "config.json").is_file():
            return model.load_config(hf_path, **section)
        if hf_path:
            missing = [k for k in SHAPE_FIELDS if k not in section]
            if missing:
                raise RecipeError(
                    f"model.hf_path={hf_path!r} has no config.json here, and the model section does "
                    f"not give the shape: missing {missing}"
                )
            notes.append(f"model.hf_path {hf_path} is not here: planned from the shape in the model section")
        return build(model.ModelConfig, section, "model")
    except model.ConfigError as e:
        raise RecipeError(f"model: {e}") from None


def position_notes(cfg: model.ModelConfig, stages: list[StageShape]) -> list[str]:
    """A note for each stage whose rows run past the positions the model serves (`ModelConfig.context_reach`): RoPE
    extrapolates there, which a long-context recipe fixes with a rope scaling."""
    reach = cfg.context_reach
    return [
        f"{s.name}: rows of {s.seq:,} tokens run past the {reach:,} positions the model serves; set model.rope_scaling "
        f"(YaRN as Qwen documents it: {{rope_type: yarn, factor: {-(-s.seq // 32768)}.0, "
        "original_max_position_embeddings: 32768}) or shorten the rows"
        for s in stages
        if s.seq > reach
    ]


def mesh_and_rules(recipe: Mapping[str, Any]) -> tuple[MeshConfig, Rules]:
    """The `mesh` section as a MeshConfig and the `rules` section over the default rules (mesh axes checked)."""
    mesh = build(MeshConfig, recipe.get("mesh"), "mesh")
    rules = make_rules(recipe.get("rules"))
    for name, axes in rules.items():
        unknown = [a for a in axes if a not in MESH_AXES]
        if unknown:
            raise RecipeError(f"rules.{name}: unknown mesh axes {unknown}; mesh axes: {list(MESH_AXES)}")
    return mesh, rules


def _tokenizer_given(tokenizer: str | None, recipe: Mapping[str, Any], where: str) -> None:
    """The check of `build_policy`: a tokenizer directory, or the model's `hf_path`."""
    if not (tokenizer or (recipe.get("model") or {}).get("hf_path")):
        raise RecipeError(f"{where}: a tokenizer directory is needed when the model is not an HF checkpoint")


def sft_stages(recipe: Mapping[str, Any]) -> list[StageShape]:
    """Validate an SFT recipe as `train.sft.loop.prepare` does; its one stage."""
    from jaxseeker.data import DataConfig
    from jaxseeker.train.sft.loop import SECTIONS, TrainConfig, resolve_loss

    check_sections(recipe, SECTIONS, "recipe")
    train = build(TrainConfig, recipe.get("train"), "train")
    if not train.train_files:
        raise RecipeError("train.train_files: give at least one JSONL file or ArrayRecord directory")
    data = build(DataConfig, recipe.get("data"), "data")
    opt = build(OptimizerConfig, {"total_steps": train.steps, **(recipe.get("optimizer") or {})}, "optimizer")
    resolve_loss(train.loss, train.chunk_size)
    _tokenizer_given(train.tokenizer, recipe, "train.tokenizer")
    return [
        StageShape(
            "sft", "sft", rows=data.batch_size, seq=data.seq_len, chunk_size=train.chunk_size, grad_accum=opt.grad_accum
        )
    ]


def _check_rl_parts(recipe: Mapping[str, Any], rl: Any) -> None:
    """Validate sampling, reward, objective and tools as `train.rl.loop.prepare` does; starts no tool, judge, world."""
    from jaxseeker import rewards
    from jaxseeker.tools import tools_config
    from jaxseeker.tools.llm_client import LLMConfig
    from jaxseeker.train.rl.config import rl_sampling, step_config
    from jaxseeker.train.rl.scoring import RewardConfig
    from jaxseeker.world import world_spec

    sampling = rl_sampling(recipe.get("sampling"))
    reward = build(RewardConfig, recipe.get("reward"), "reward")
    check_kwargs(rewards.get_reward_fn(reward.fn), reward.kwargs, "reward.kwargs")
    if reward.judge == "llm":
        build(LLMConfig, reward.llm, "reward.llm")
    try:
        step_config(rl, sampling)
    except ValueError as e:
        raise RecipeError(f"rl: {e}") from None
    try:
        tools_config(recipe.get("tools") or {"enabled": []})
        world_spec(recipe.get("world"))
    except (ValueError, FileNotFoundError) as e:  # their errors name the key
        raise RecipeError(str(e)) from None
    _tokenizer_given(rl.tokenizer, recipe, "rl.tokenizer")


def rl_stages(recipe: Mapping[str, Any], notes: list[str]) -> list[StageShape]:
    """Validate an RL recipe as `train.rl.loop.prepare` does; one stage per context stage."""
    from jaxseeker.agent import RolloutConfig
    from jaxseeker.train.rl.config import SECTIONS, EngineConfig, RLConfig, context_stages, rl_optimizer_config

    check_sections(recipe, SECTIONS, "recipe")
    rl = build(RLConfig, recipe.get("rl"), "rl")
    if not rl.questions:
        raise RecipeError('rl.questions: give at least one JSONL file of {"question", "answer"}')
    opt = rl_optimizer_config(rl, recipe.get("optimizer"))
    _check_rl_parts(recipe, rl)
    rollout_cfg = build(RolloutConfig, recipe.get("rollout"), "rollout")
    engine = build(EngineConfig, recipe.get("engine"), "engine")
    stages = context_stages(rl, rollout_cfg)
    episodes = rl.batch_questions * rl.group_size
    cache_len = engine.max_len or max(s.max_context for s in stages)
    if rl.selection == "dapo":
        notes.append(f"DAPO may roll out up to {rl.dapo_max_rounds} more rounds per step; FLOPs count one")
    per_mini_batch = episodes // rl.mini_batches  # rows of a mini-batch at most: one episode each
    choose = tuple(
        k for k, given in (("remat", "remat" in (recipe.get("model") or {})), ("rows", rl.update_tokens)) if not given
    )
    out = []
    for s in stages:
        name = "rl" if len(stages) == 1 else f"rl {s.max_context // 1024}K (step {s.step}+)"
        out.append(
            StageShape(
                name,
                "rl",
                rows=min(per_mini_batch, max(1, rl.update_tokens // s.max_context)) if rl.update_tokens else 1,
                seq=s.max_context,
                chunk_size=rl.chunk_size,
                grad_accum=opt.grad_accum,
                updates=rl.mini_batches * rl.epochs,
                resident_rows=episodes,
                slots=engine.slots,
                cache_len=cache_len,
                rollout_tokens=episodes * s.max_context,
                reference=rl.kl_coef > 0 or rl.kl_reward_coef > 0,
                groups=rl.batch_questions,
                group_size=rl.group_size,
                engine_tensor=engine.tensor,
                engine_dtype=engine.dtype,
                stacked_prefill=engine.stacked_prefill,
                engine_pages=engine.pages,
                mini_batch_rows=per_mini_batch,
                recompute=rl.recompute_old_logp,
                choose=choose,
            )
        )
    return out
