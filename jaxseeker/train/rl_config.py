"""The RL recipe's sections that are plain settings: `rl`, `engine` and the progressive context stages."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from jaxseeker import losses
from jaxseeker.agent import RolloutConfig
from jaxseeker.losses.registry import packs_exactly
from jaxseeker.train import selection as sel
from jaxseeker.train.recipe import RecipeError, build, check_kwargs

SECTIONS = ("name", "model", "optimizer", "mesh", "rules", "rl", "rollout", "sampling", "engine", "tools", "world",
            "reward")
ROW_BUCKET = 256  # update rows are a multiple of this many tokens long
PACKED_ROW_MULTIPLE = 4  # with rl.pack, a mini-batch's row count is a multiple of this (and of the batch shards)


@dataclasses.dataclass(frozen=True)
class RLConfig:
    """The loop: questions, group sizes, selection, objective, context stages, logging and checkpoints."""

    questions: tuple[str, ...] = ()  # JSONL files of {"question", "answer"}
    tokenizer: str | None = None  # default: model.hf_path
    steps: int = 100
    batch_questions: int = 8  # B: groups per RL step
    group_size: int = 8  # G: rollouts per question
    mini_batches: int = 1  # optimizer steps per pass over the B·G episodes
    epochs: int = 1  # passes over the episodes per RL step
    selection: str = "grpo"  # grpo | dapo | dupo
    dapo_max_rounds: int = 4  # extra sampling rounds DAPO may take to fill the batch
    dupo_filter_rollouts: int = 8  # DUPO pre-filter: rollouts per question of the starting policy (0: off)
    advantage: str = "grpo"  # grpo | dr_grpo (no /std) | rloo | package.module:function (`losses.get_advantage`)
    advantage_kwargs: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    objective: str = "policy_loss"
    objective_kwargs: Mapping[str, Any] = dataclasses.field(default_factory=dict)  # eps_low, eps_high, agg, clip_c
    kl_coef: float = 0.0
    kl_estimator: str = "k3"
    entropy_metric: bool = True
    chunk_size: int = 512
    pack: bool = False  # several episodes per update row: objectives that take segment_ids or are token_level
    context_stages: tuple[Mapping[str, int], ...] = ()  # [{step, max_context, max_turns}]; () = the rollout section
    seed: int = 0
    out_dir: str | None = None  # default: runs/<recipe name>
    checkpoint_dir: str | None = None  # local or gs://…; default: <out_dir>/checkpoints
    checkpoint_every: int = 10
    keep: int = 3
    episodes_every: int = 0  # write the step's episodes as JSONL every N steps (0: never)

    def __post_init__(self):
        object.__setattr__(self, "questions", tuple(self.questions))
        object.__setattr__(self, "context_stages", tuple(self.context_stages))
        # fail early, naming the known functions and the keywords they take
        objective = losses.get_policy_objective(self.objective)
        check_kwargs(objective, self.objective_kwargs, "rl.objective_kwargs")
        if "segment_ids" in self.objective_kwargs:
            raise ValueError("rl.objective_kwargs.segment_ids: the RL step passes the batch's segment ids; remove it")
        if self.pack and not packs_exactly(objective):
            raise ValueError(
                f"rl.objective {self.objective!r} takes no `segment_ids`: with rl.pack: true a row holds several "
                "episodes, so a per-sequence reduction would see a row, not an episode. Either add a `segment_ids` "
                "keyword parameter and reduce per episode with it (losses.masked.segment_mean), or set "
                "rl.pack: false; an objective that only sums or averages over tokens may instead be marked "
                "`token_level = True`")
        check_kwargs(losses.get_advantage(self.advantage), self.advantage_kwargs, "rl.advantage_kwargs")
        if self.selection not in sel.SELECTION_MODES:
            raise ValueError(f"selection {self.selection!r} is not one of {list(sel.SELECTION_MODES)}")
        for name in ("steps", "batch_questions", "group_size", "mini_batches", "epochs", "checkpoint_every"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if (self.batch_questions * self.group_size) % self.mini_batches:
            raise ValueError(f"batch_questions·group_size = {self.batch_questions * self.group_size} episodes do "
                             f"not split into mini_batches={self.mini_batches}")


@dataclasses.dataclass(frozen=True)
class EngineConfig:
    """The generation engine of the rollouts; 0 picks the default noted."""

    slots: int = 0  # 0: this process's share of a step's episodes, all in flight (⌈B / processes⌉ · G)
    max_len: int = 0  # 0: the largest context of the stages
    steps_per_call: int = 8
    min_window: int = 256


@dataclasses.dataclass(frozen=True)
class ContextStage:
    """From RL step `step` (0-based) on: `max_context` tokens per episode and at most `max_turns` tool calls."""

    step: int
    max_context: int
    max_turns: int


def context_stages(rl: RLConfig, rollout_cfg: RolloutConfig) -> list[ContextStage]:
    """The stages of `rl.context_stages` sorted by step, or one stage of the rollout section."""
    if not rl.context_stages:
        return [ContextStage(0, rollout_cfg.max_context_tokens, rollout_cfg.max_tool_calls)]
    stages = sorted((build(ContextStage, s, f"rl.context_stages[{i}]") for i, s in enumerate(rl.context_stages)),
                    key=lambda s: s.step)
    if stages[0].step != 0:
        raise RecipeError(f"rl.context_stages: the first stage must start at step 0, got {stages[0].step}")
    return stages


def stage_at(stages: list[ContextStage], step: int) -> ContextStage:
    """The stage in force at RL step `step`."""
    return [s for s in stages if s.step <= step][-1]
