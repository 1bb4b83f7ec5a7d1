"""The RL recipe's sections that are plain settings: `rl`, `engine`, the progressive context stages, and what RL
requires of the `optimizer` and `sampling` sections."""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp

from jaxseeker import losses
from jaxseeker.agent import RolloutConfig
from jaxseeker.generation import SamplingConfig
from jaxseeker.losses.registry import packs_exactly, takes_segment_ids
from jaxseeker.train.optimizer import OptimizerConfig
from jaxseeker.train.recipe import RecipeError, build, check_kwargs
from jaxseeker.train.rl import selection as sel
from jaxseeker.train.rl.step import RLStepConfig

SECTIONS = (
    "name",
    "target",  # the machine the recipe is planned for (`planning.targets`)
    "model",
    "optimizer",
    "mesh",
    "rules",
    "rl",
    "rollout",
    "sampling",
    "engine",
    "tools",
    "world",
    "reward",
)
ROW_BUCKET = 256  # update rows are a multiple of this many tokens long
PACKED_ROW_MULTIPLE = 4  # with rl.pack, a mini-batch's row count is a multiple of this (and of the batch shards)


@dataclasses.dataclass(frozen=True)
class RLConfig:
    """The loop: questions, group sizes, selection, objective, context stages, logging and checkpoints."""

    questions: tuple[str, ...] = ()  # JSONL files of {"question", "answer"}
    tokenizer: str | None = None  # default: model.hf_path
    steps: int = 100  # RL steps
    batch_questions: int = 8  # B: groups per RL step
    group_size: int = 8  # G: rollouts per question
    mini_batches: int = 1  # optimizer steps per pass over the B·G episodes
    epochs: int = 1  # passes over the episodes per RL step
    selection: str = "grpo"  # grpo | dapo | dupo
    filter_metric: str = "correct"  # what makes a group informative to dapo / dupo: correct | reward
    dapo_max_rounds: int = 4  # extra sampling rounds DAPO may take to fill the batch
    dupo_filter_rollouts: int = 8  # DUPO pre-filter: rollouts per question of the starting policy (0: off)
    advantage: str = "grpo"  # grpo | dr_grpo (no /std) | rloo | package.module:function (`losses.get_advantage`)
    advantage_kwargs: Mapping[str, Any] = dataclasses.field(default_factory=dict)  # keywords of the advantage
    objective: str = "policy_loss"  # policy_loss | gspo | package.module:function
    objective_kwargs: Mapping[str, Any] = dataclasses.field(default_factory=dict)  # eps_low, eps_high, agg, norm, …
    kl_coef: float = 0.0  # KL in the loss: + kl_coef · agg(KL(π ‖ π_ref)) with the objective's agg
    kl_estimator: str = "k3"  # k1 | k2 | k3
    kl_reward_coef: float = 0.0  # KL in the reward: R - β Σ_t KL_t, β starting at kl_reward_coef
    kl_reward_estimator: str = "k1"  # k1 | k2 | k3
    kl_reward_target: float | None = None  # adaptive β toward this per-token KL (Ziegler et al.); None: fixed β
    kl_reward_horizon: int = 10000  # episodes over which adaptive β moves
    entropy_coef: float = 0.0  # entropy bonus: - entropy_coef · agg(H) with the objective's agg
    entropy_metric: bool = True  # report the policy's token entropy
    tis_cap: float | None = None  # truncated importance sampling: weigh tokens by min(π_old / π_sampler, tis_cap)
    overlong_filter: bool = False  # episodes cut by the context or tool-call limit train on no token
    chunk_size: int = 512  # positions whose logits the loss builds at once
    # XLA options for compiling the update and old-log-prob programs, as sft's train.compiler_options, e.g.
    # {"xla_cpu_experimental_ynn_fusion_type": "LIBRARY_FUSION_TYPE_DOT"} (XLA:CPU dots through YNNPACK)
    compiler_options: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    pack: bool | None = None  # several episodes per update row; null: where the objective allows it (rl_objectives.md)
    update_tokens: int = 0  # tokens of one forward/backward of the update (rows × row length); 0: planned to fit
    recompute_old_logp: bool | None = None  # old log-probs from a training forward; null: only for TIS / KL reward
    context_stages: tuple[Mapping[str, int], ...] = ()  # [{step, max_context, max_turns}]; () = the rollout section
    seed: int = 0  # the question sampler's and the rollouts' randomness
    out_dir: str | None = None  # default: runs/<recipe name>
    checkpoint_dir: str | None = None  # local or gs://…; default: <out_dir>/checkpoints
    checkpoint_every: int = 10  # steps between checkpoints
    keep: int = 3  # checkpoints kept
    episodes_every: int = 0  # write the step's episodes as JSONL every N steps (0: never)

    def __post_init__(self):
        object.__setattr__(self, "questions", tuple(self.questions))
        object.__setattr__(self, "context_stages", tuple(self.context_stages))
        # fail early, naming the known functions and the keywords they take
        objective = losses.get_policy_objective(self.objective)
        check_kwargs(objective, self.objective_kwargs, "rl.objective_kwargs")
        if "segment_ids" in self.objective_kwargs:
            raise ValueError("rl.objective_kwargs.segment_ids: the RL step passes the batch's segment ids; remove it")
        if self.pack is None:
            object.__setattr__(self, "pack", packs_exactly(objective))
        if self.recompute_old_logp is None:
            object.__setattr__(self, "recompute_old_logp", self.tis_cap is not None or self.kl_reward_coef > 0)
        elif not self.recompute_old_logp and (self.tis_cap is not None or self.kl_reward_coef > 0):
            raise ValueError(
                "rl.recompute_old_logp: false, but rl.tis_cap / rl.kl_reward_coef compare the trainer's old "
                "log-probs with the engine's (or the reference's): set it to true or leave it out"
            )
        if self.update_tokens < 0:
            raise ValueError(f"update_tokens must be >= 0 (0: planned to fit the machine), got {self.update_tokens}")
        if self.pack and not packs_exactly(objective):
            raise ValueError(
                f"rl.objective {self.objective!r} takes no `segment_ids`: with rl.pack: true a row holds several "
                "episodes, so a per-sequence reduction would see a row, not an episode. Either add a `segment_ids` "
                "keyword parameter and reduce per episode with it (losses.masked.segment_mean), or set "
                "rl.pack: false; an objective that only sums or averages over tokens may instead be marked "
                "`token_level = True`"
            )
        try:
            losses.check_aggregation(*losses.objective_aggregation(objective, self.objective_kwargs))
            if self.objective in losses.POLICY_OBJECTIVES:  # a user's objective may expect other shapes
                _trace_objective(objective, self.objective_kwargs)
        except ValueError as e:
            raise ValueError(f"rl.objective_kwargs: {e}") from None
        check_kwargs(losses.get_advantage(self.advantage), self.advantage_kwargs, "rl.advantage_kwargs")
        if self.selection not in sel.SELECTION_MODES:
            raise ValueError(f"selection {self.selection!r} is not one of {list(sel.SELECTION_MODES)}")
        if self.filter_metric not in sel.FILTER_METRICS:
            raise ValueError(f"filter_metric {self.filter_metric!r} is not one of {list(sel.FILTER_METRICS)}")
        for name in ("kl_estimator", "kl_reward_estimator"):
            if getattr(self, name) not in losses.KL_ESTIMATORS:
                raise ValueError(f"{name} {getattr(self, name)!r} is not one of {list(losses.KL_ESTIMATORS)}")
        for name in ("kl_coef", "kl_reward_coef", "entropy_coef"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.kl_reward_target is not None and not (self.kl_reward_target > 0 and self.kl_reward_horizon > 0):
            raise ValueError(
                f"kl_reward_target ({self.kl_reward_target}) and kl_reward_horizon "
                f"({self.kl_reward_horizon}) must be > 0"
            )
        if self.tis_cap is not None and not self.tis_cap > 0:
            raise ValueError(f"tis_cap must be > 0 or null, got {self.tis_cap}")
        for name in ("steps", "batch_questions", "group_size", "mini_batches", "epochs", "checkpoint_every"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if (self.batch_questions * self.group_size) % self.mini_batches:
            raise ValueError(
                f"batch_questions·group_size = {self.batch_questions * self.group_size} episodes do "
                f"not split into mini_batches={self.mini_batches}"
            )


# The RL optimizer's defaults by what trains (keys the recipe's `optimizer` section does not set): a constant lr
# after a warm-up over the first tenth of the updates, no weight decay. Full fine-tuning at 1e-6 as GRPO
# (DeepSeekMath arXiv 2402.03300), DAPO (arXiv 2503.14476) and Dr. GRPO (arXiv 2503.20783) train; LoRA adapters an
# order of magnitude higher (Schulman et al., "LoRA Without Regret", 2025: LoRA's best lr is about 10× full
# fine-tuning's, in RL too). The SFT defaults (`OptimizerConfig`: lr 1e-3, weight decay 0.1) would wreck a
# pretrained policy in a few RL steps.
RL_OPTIMIZER_DEFAULTS = {
    "full": {"lr": 1e-6, "min_lr": 1e-6, "weight_decay": 0.0},
    "lora": {"lr": 1e-5, "min_lr": 1e-5, "weight_decay": 0.0},
}
# of the run's optimizer updates, rounded down: the first update of a warm-up has lr 0, which a run of a few updates
# cannot spare
RL_WARMUP_FRACTION = 0.1


def rl_optimizer_config(rl: RLConfig, section: Mapping[str, Any] | None, *, lora: bool = False) -> OptimizerConfig:
    """The `optimizer` section for RL over `RL_OPTIMIZER_DEFAULTS[lora or full]` and a warm-up over the first tenth
    (rounded down) of a schedule as long as the run's optimizer updates, rl.steps · rl.mini_batches · rl.epochs /
    grad_accum (each update accumulates `grad_accum` mini-batches, which must divide `rl.mini_batches` so that an
    update never spans two passes over a step's episodes). `min_lr` follows a given `lr` (constant) unless set."""
    section = dict(section or {})
    accum = section.get("grad_accum", 1)
    if isinstance(accum, int) and accum >= 1 and rl.mini_batches % accum:
        raise RecipeError(
            f"optimizer.grad_accum={accum} must divide rl.mini_batches={rl.mini_batches}: each optimizer "
            "update accumulates that many mini-batches of one pass"
        )
    updates = rl.steps * rl.mini_batches * rl.epochs // (accum if isinstance(accum, int) and accum >= 1 else 1)
    defaults = dict(RL_OPTIMIZER_DEFAULTS["lora" if lora else "full"])
    if "lr" in section:
        defaults["min_lr"] = section["lr"]
    warmup = math.floor(RL_WARMUP_FRACTION * section.get("total_steps", updates))  # 0 under 10 updates
    return build(OptimizerConfig, {"total_steps": updates, "warmup_steps": warmup, **defaults, **section}, "optimizer")


def rl_sampling(section: Mapping[str, Any] | None) -> SamplingConfig:
    """The recipe's `sampling` section (temperature 1.0 unless it sets one), checked for RL."""
    sampling = build(SamplingConfig, {"temperature": 1.0, **(section or {})}, "sampling")
    check_rl_sampling(sampling)
    return sampling


def step_config(rl: RLConfig, sampling: SamplingConfig) -> RLStepConfig:
    """What the compiled update computes for `rl` at the rollouts' sampling temperature (ValueError when invalid)."""
    return RLStepConfig(
        objective=rl.objective,
        objective_kwargs=dict(rl.objective_kwargs),
        kl_coef=rl.kl_coef,
        kl_estimator=rl.kl_estimator,
        temperature=sampling.temperature,
        chunk_size=rl.chunk_size,
        entropy=rl.entropy_metric,
        entropy_coef=rl.entropy_coef,
    )


def check_rl_sampling(sampling: SamplingConfig) -> None:
    """RL needs the log-probs of the distribution the tokens were drawn from. The engine reports, and the trainer
    recomputes, log-probs of softmax(logits / T) before any top-k / top-p truncation, so truncated sampling would
    make every update silently off-policy: refuse it."""
    if sampling.top_p < 1.0 or sampling.top_k > 0:
        raise RecipeError(
            f"sampling: top_p={sampling.top_p}, top_k={sampling.top_k}: RL computes old log-probs under "
            "the untruncated softmax(logits / temperature), so truncated sampling would train "
            "off-policy; set sampling.top_p: 1.0 and sampling.top_k: 0 (temperature alone shapes RL "
            "rollouts)"
        )


@dataclasses.dataclass(frozen=True)
class EngineConfig:
    """The generation engine of the rollouts (`generation.Engine` in the generation layout,
    `parallel.GENERATION_RULES`); 0 picks the default noted.

    The slice's devices form engine replicas of `tensor` devices each (within a host); a replica holds the whole
    model split over its devices and decodes its share of the slots. The engine's weights and cache are freed
    during each update and the new weights handed over on device after it (`generation.handoff`).
    """

    slots: int = 0  # episodes in flight over the whole slice; 0: a step's episodes (⌈B / hosts⌉ · G per host)
    max_len: int = 0  # 0: the largest context of the stages
    steps_per_call: int = 8  # decode steps per device call
    tensor: int = 0  # devices per engine replica (must divide a host's); 0: all of a host's devices
    dtype: str | None = None  # the engine's weights and KV cache; None: the model's compute dtype
    stacked_prefill: bool = False  # keep a stacked copy of the weights for a scanned prefill (2× the weights' memory)
    pages: int = 0  # KV cache pages of 128 positions per replica; 0: every slot at max_len (`generation.pages`)

    def __post_init__(self):
        for name in ("slots", "max_len", "tensor", "pages"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0 (0: the default), got {getattr(self, name)}")
        if self.dtype is not None and self.dtype not in ("float32", "bfloat16", "float16"):
            raise ValueError(f"dtype {self.dtype!r} is not one of ['float32', 'bfloat16', 'float16'] (or null)")


def engine_slots(engine: EngineConfig, rl: RLConfig, processes: int, replicas: int) -> int:
    """Slots of one host's engine (`slots_per_host` of the recipe's engine and batch)."""
    return slots_per_host(engine.slots, rl.batch_questions, rl.group_size, processes, replicas)


def slots_per_host(slots: int, groups: int, group_size: int, hosts: int, replicas: int) -> int:
    """Slots of one host's engine: `slots` (the whole slice's) split evenly over the `hosts`, or when 0 all of the
    host's share of a step's episodes (⌈groups / hosts⌉ groups of `group_size`) at once; rounded up to a multiple
    of the host's engine `replicas`, which hold as many slots each."""
    per_host = -(-slots // hosts) if slots else -(-groups // hosts) * group_size
    return -(-per_host // replicas) * replicas


@dataclasses.dataclass(frozen=True)
class ContextStage:
    """From RL step `step` (0-based) on: `max_context` tokens per episode and at most `max_turns` tool calls."""

    step: int  # the first RL step (0-based) of the stage
    max_context: int  # context tokens per episode
    max_turns: int  # tool calls per episode at most


def context_stages(rl: RLConfig, rollout_cfg: RolloutConfig) -> list[ContextStage]:
    """The stages of `rl.context_stages` sorted by step, or one stage of the rollout section."""
    if not rl.context_stages:
        return [ContextStage(0, rollout_cfg.max_context_tokens, rollout_cfg.max_tool_calls)]
    stages = sorted(
        (build(ContextStage, s, f"rl.context_stages[{i}]") for i, s in enumerate(rl.context_stages)),
        key=lambda s: s.step,
    )
    if stages[0].step != 0:
        raise RecipeError(f"rl.context_stages: the first stage must start at step 0, got {stages[0].step}")
    return stages


def stage_at(stages: list[ContextStage], step: int) -> ContextStage:
    """The stage in force at RL step `step`."""
    return [s for s in stages if s.step <= step][-1]


def _trace_objective(objective, kwargs: Mapping[str, Any]) -> None:
    """Trace a built-in `objective` with `kwargs` on one row of two tokens (shapes only, nothing computed), so that
    its own checks of its hyper-parameters (`negative_weight >= 0`, `0 <= eps_low < 1` …) fail when the recipe is read,
    not at the first update."""
    row = jax.ShapeDtypeStruct((1, 2), jnp.float32)  # [batch, seq]
    extra = {"segment_ids": jax.ShapeDtypeStruct((1, 2), jnp.int32)} if takes_segment_ids(objective) else {}
    jax.eval_shape(
        functools.partial(objective, **kwargs), row, row, jax.ShapeDtypeStruct((1,), jnp.float32), row, **extra
    )
