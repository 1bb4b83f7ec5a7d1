"""The pipeline recipe: one frozen dataclass per stage, defaults for the embedded offline demo. The sections of the
data (world, questions, expert, tools) are in `data_config.py`; the policy and its training and eval stages here."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from jaxseeker.agent.prompts import PROMPT_STYLES
from jaxseeker.data.tokenizer import SPLITS
from jaxseeker.pipeline.data_config import (
    PIPELINE_TOOLS,
    PIPELINE_WORLD,
    ExpertStage,
    QAStage,
    pipeline_tools,
    pipeline_world,
)
from jaxseeker.tools import ToolsConfig
from jaxseeker.world.spec import WorldSpec

RL_METHODS = ("pg", "rft")  # policy gradient (`train.rl`); rejection-sampling fine-tuning (`train.rl.rejection`)


@dataclasses.dataclass(frozen=True)
class PolicyStage:
    """The policy every training stage starts from: a pretrained model (`init`: a registered name such as
    `smollm2-135m-instruct`, a GGUF file or an HF directory; its tokenizer and chat template come with it), or, with
    `init` empty, a small Qwen3-architecture model trained from scratch with its own tokenizer (the shape keys
    below), whose copying heads a copy warm-up may form first. How it is trained: the `sft` section."""

    init: str = ""  # a registered name, a GGUF file or an HF directory; "": from scratch
    # LoRA adapters for every fine-tune of the policy (`model.lora` of the SFT recipes: rank, alpha, targets);
    # empty or rank 0: full fine-tuning
    lora: tuple[tuple[str, Any], ...] = ()
    # SFT fine-tunes, fine-tune k on its own data order (the SFT's data seed + k), whose weight mean is the SFT policy
    # (`train.average`, a model soup, as `rl.rft_seeds`); 1: one fine-tune
    sft_seeds: int = 1
    vocab_size: int = 4096  # from scratch: the tokenizer's vocabulary (trained on the run's text)
    hidden_size: int = 256  # from scratch: the model's shape
    num_layers: int = 4  # from scratch
    num_heads: int = 4  # from scratch
    num_kv_heads: int = 2  # from scratch
    head_dim: int = 64  # from scratch
    intermediate_size: int = 704  # from scratch
    rope_theta: float = 1_000_000.0  # Qwen3's; from scratch, copying heads form sooner with 1e4 (docs/results.md)
    tokenizer_split: str = "qwen2"  # pre-tokenizer: "qwen2", or "names" (a name tokenises alike everywhere)
    drop_thousands_separators: bool = False  # the tokenizer reads `4,427` as `4427` (data.train_tokenizer)
    # every SFT draw renames the entities a trajectory searches for from the world's non-test names (the SFT
    # recipes' data.name_pool, written by the pipeline)
    permute_names: bool = False
    copy_warmup_steps: int = 0  # copy-task steps from random init before the agent SFT (train.sft.copy_warmup); 0: none
    copy_warmup_target_loss: float = 0.0  # the warm-up stops early once its 50-step mean copy loss is below this
    copy_warmup_layers: int = 0  # warm up this many layers, then stack zero-output layers up to num_layers; 0: all
    copy_warmup_digit_rate: float = 0.0  # fraction of number-like copy runs (train.sft.copy_warmup.copy_batch)
    copy_warmup_gap: int = 0  # up to this many filler tokens between a copy run and its copy
    # rows of the warm-up's batches (its learning rate is sft.optimizer.lr); 0: sft.data.batch_size (fewer rows may
    # not form the heads)
    copy_warmup_rows: int = 0

    def __post_init__(self):
        if isinstance(self.lora, dict):
            object.__setattr__(self, "lora", tuple(sorted(self.lora.items())))
        if self.init and self.copy_warmup_steps:
            raise ValueError(
                "policy.copy_warmup_steps trains a from-scratch policy's copying heads; policy.init "
                f"({self.init!r}) is pretrained: set it to 0"
            )
        for name in (
            "sft_seeds",
            "vocab_size",
            "hidden_size",
            "num_layers",
            "num_heads",
            "num_kv_heads",
            "head_dim",
            "intermediate_size",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"policy.{name} must be >= 1, got {getattr(self, name)}")
        if self.rope_theta <= 0:
            raise ValueError(f"policy.rope_theta must be > 0, got {self.rope_theta}")
        if self.tokenizer_split not in SPLITS:
            raise ValueError(f"policy.tokenizer_split must be one of {sorted(SPLITS)}, got {self.tokenizer_split!r}")
        if self.copy_warmup_gap < 0:
            raise ValueError(f"policy.copy_warmup_gap must be >= 0, got {self.copy_warmup_gap}")
        if self.copy_warmup_rows < 0:
            raise ValueError(f"policy.copy_warmup_rows must be >= 0, got {self.copy_warmup_rows}")
        if not 0.0 <= self.copy_warmup_digit_rate <= 1.0:
            raise ValueError(f"policy.copy_warmup_digit_rate must lie in [0, 1], got {self.copy_warmup_digit_rate}")
        if not 0 <= self.copy_warmup_layers <= self.num_layers:
            raise ValueError(
                f"policy.copy_warmup_layers must lie in [0, num_layers={self.num_layers}], "
                f"got {self.copy_warmup_layers}"
            )


Section = Mapping[str, Any]


def _section() -> Any:
    return dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class SFTSections:
    """Sections of a `jaxseeker sft` recipe (docs/configs.md, "SFT recipe"), with only the keys set here: the
    recipe's own defaults give the rest. The pipeline sets `name`, `model` (the policy section),
    `train.train_files`, `train.tokenizer`, `train.out_dir` (the stage's directory, its checkpoints under it) and,
    with `policy.permute_names`, `data.name_pool`."""

    data: Section = _section()  # the recipe's `data` section: rows, packing, loss weights, copy replay
    optimizer: Section = _section()  # the recipe's `optimizer` section (AdamW, warm-up, cosine to min_lr)
    train: Section = _section()  # the recipe's `train` section: steps, chunk_size, eval_fraction, cadence
    mesh: Section = _section()  # the recipe's `mesh` section
    rules: Section = _section()  # the recipe's `rules` section

    def __post_init__(self):
        for name, value in dataclasses.asdict(self).items():
            if not isinstance(value, Mapping):
                raise ValueError(f"{name} must be a mapping (the SFT recipe's `{name}` section), got {value!r}")

    def given(self) -> bool:
        """Whether any key is set (an `extend` section runs the context extension only when one is)."""
        return any(dataclasses.asdict(self).values())


@dataclasses.dataclass(frozen=True)
class EvalStage:
    """Evaluation on the held-out test questions."""

    k: int = 1  # rollouts per question; more than one only when sampled (greedy repeats the same rollout)
    slots: int = 16  # episodes decoded at once
    max_context: int = 6144  # context tokens of an episode (the expert's and RL's too)
    max_tool_calls: int = 16  # tool calls per episode at most
    max_tokens_per_turn: int = 256  # tokens one turn may write
    prompt: str = "full"  # the agent's system prompt: "full" (tool schemas) or "compact" (one line)
    temperature: float = 0.0  # sampling of the evaluated policy: 0 is greedy
    top_p: float = 1.0  # nucleus sampling (1: off)
    # also evaluate every policy on this many questions (the QA recipes, other seeds) drawn apart from every split
    # and from the RL pool (stage `qa_fresh`); each eval asks them after the test, and the report gives both sets
    fresh_questions: int = 0
    zero_shot: bool = True  # with policy.init: also evaluate the pretrained policy before SFT (`eval_base`)
    # also sample this many rollouts a test question at sampled_temperature from the SFT and RL policies (stages
    # `sample_sft`, `sample_rl`): sampled pass@1 and pass@k beside greedy, paired by question; 0: off
    sampled_k: int = 0
    sampled_temperature: float = 0.7  # the sampled evals' temperature

    def __post_init__(self):
        if self.prompt not in PROMPT_STYLES:
            raise ValueError(f"eval.prompt must be 'full' or 'compact', got {self.prompt!r}")
        if self.temperature < 0 or not 0 < self.top_p <= 1:
            raise ValueError(
                f"eval.temperature must be >= 0 and eval.top_p in (0, 1], got {self.temperature} and {self.top_p}"
            )
        if self.k < 1:
            raise ValueError(f"eval.k must be >= 1, got {self.k}")
        if self.fresh_questions < 0:
            raise ValueError(f"eval.fresh_questions must be >= 0, got {self.fresh_questions}")
        if self.sampled_k < 0 or (self.sampled_k and not self.sampled_temperature > 0):
            raise ValueError(
                f"eval.sampled_k must be >= 0 and eval.sampled_temperature > 0 with it, got {self.sampled_k} and "
                f"{self.sampled_temperature}"
            )
        if self.k > 1 and self.temperature == 0:
            raise ValueError(
                f"eval.k is {self.k} with eval.temperature 0: greedy decoding over the offline tools "
                f"repeats one rollout {self.k} times; set eval.k: 1 or eval.temperature > 0"
            )

    def limits(self) -> dict[str, Any]:
        """What the expert's and RL's rollouts share with the eval: the section less its sampling, k, slots and
        fresh questions."""
        return {k: v for k, v in self.rollouts().items() if k not in ("k", "slots", "temperature", "top_p")}

    def rollouts(self) -> dict[str, Any]:
        """What an eval's rollouts depend on: the section less which questions are asked and which policies."""
        leave = ("fresh_questions", "zero_shot", "sampled_k", "sampled_temperature")
        return {k: v for k, v in dataclasses.asdict(self).items() if k not in leave}


@dataclasses.dataclass(frozen=True)
class RLStage:
    """RL after SFT, by one of two methods, on the RL split and the questions the two pool keys add.

    `method: pg`, the group-relative policy gradient, runs the `jaxseeker rl` recipe of the sub-sections below
    (docs/configs.md, "RL recipe"), with only the keys set here: the recipe's own defaults give the rest. The
    pipeline sets `name`, `model`, `rollout` (the eval section's limits), `tools`, `world`, `rl.questions` and
    `rl.out_dir` (the stage's directory, its checkpoints under it).

    `method: rft`, rejection-sampling fine-tuning (`jaxseeker.train.rl.rejection`), rolls out every pool question
    `rl.group_size` times at `sampling.temperature` (seeded by `rl.seed`), keeps the right episodes and fine-tunes
    on them with the `rft` section's SFT recipe; the other sub-sections are unused. `rft_rounds` > 1 iterates (expert
    iteration): round r rolls out round r-1's policy and fine-tunes that policy further (STaR and ReST-EM fine-tune
    the base model afresh each round instead)."""

    method: str = "pg"  # pg (group-relative policy gradient) | rft (rejection-sampling fine-tuning)
    train_questions: int = 0  # also this many of the SFT's training questions (a seeded sample) in the RL pool
    fresh_questions: int = 0  # also this many new questions (the QA recipes, other seeds) apart from every split
    rft_per_question: int = 2  # rft: at most this many distinct right episodes of a question are kept
    # rft: also this many of the expert's SFT trajectories (a seeded sample) in the fine-tune data, so it keeps the
    # SFT's mix of one- and multi-hop episodes (the right rollouts are mostly one-hop); 0: the rollouts alone
    rft_replay: int = 0
    rft_rounds: int = 1  # rft: rounds of roll out → keep → fine-tune, each from the last round's policy
    # rft: fine-tunes on the kept episodes, each on its own data order, whose weight mean is the policy
    # (`train.average`, a model soup); 1: one fine-tune
    rft_seeds: int = 1
    # WiSE-FT: also the weight mean (1 - average)·SFT + average·RL (stage `average`, evaluated as `eval_average`);
    # null: none
    average: float | None = None
    # keys laid over the RL stage's `model` section (the policy's): `lora` (rank 0: full fine-tuning), `config`
    model: Section = _section()
    rl: Section = _section()  # the recipe's `rl` section: steps, batch_questions, group_size, selection, objective
    # the recipe's `optimizer` section; keys not set take the RL defaults (lr 1e-6 full, 1e-5 LoRA, constant after
    # a warm-up over a tenth of the updates, no weight decay), never the sft section's
    optimizer: Section = _section()
    sampling: Section = _section()  # the recipe's `sampling` section: temperature
    engine: Section = _section()  # the recipe's `engine` section: the rollouts' generation engine
    reward: Section = _section()  # the recipe's `reward` section: fn, judge
    mesh: Section = _section()  # the recipe's `mesh` section
    rules: Section = _section()  # the recipe's `rules` section

    def __post_init__(self):
        if self.method not in RL_METHODS:
            raise ValueError(f"rl.method must be one of {list(RL_METHODS)}, got {self.method!r}")
        for name in RL_RECIPE_SECTIONS:
            value = getattr(self, name)
            if not isinstance(value, Mapping):
                raise ValueError(f"rl.{name} must be a mapping (the RL recipe's `{name}` section), got {value!r}")
        if self.rft_per_question < 1:
            raise ValueError(f"rl.rft_per_question must be >= 1, got {self.rft_per_question}")
        for name in ("rft_rounds", "rft_seeds"):
            value = getattr(self, name)
            if value < 1 or (value > 1 and self.method != "rft"):
                raise ValueError(
                    f"rl.{name} must be >= 1, and above 1 only with rl.method rft; got {value} with {self.method!r}"
                )
        if self.rft_replay < 0 or (self.rft_replay and self.method != "rft"):
            raise ValueError(
                f"rl.rft_replay must be >= 0, and above 0 only with rl.method rft; got {self.rft_replay} "
                f"with {self.method!r}"
            )
        if self.train_questions < 0:
            raise ValueError(f"rl.train_questions must be >= 0, got {self.train_questions}")
        if self.average is not None and not 0 < self.average < 1:
            raise ValueError(
                f"rl.average must lie in (0, 1) (the RL policy's share of the weight mean), got {self.average}"
            )
        if not isinstance(self.model, Mapping) or set(self.model) - {"lora", "config"}:
            raise ValueError(
                f"rl.model: only `lora` and `config` are the RL stage's own (the pipeline sets the rest), "
                f"got {self.model!r}"
            )
        if self.fresh_questions < 0:
            raise ValueError(f"rl.fresh_questions must be >= 0, got {self.fresh_questions}")

    def recipe_sections(self) -> dict[str, dict]:
        """The `jaxseeker rl` recipe's sections as set here."""
        return {name: dict(getattr(self, name)) for name in RL_RECIPE_SECTIONS}

    def stages(self) -> tuple[str, ...]:
        """The RL stages' directories under the run, in order: `rl`, then `rl_round2` … for later rft rounds."""
        return ("rl",) + tuple(f"rl_round{r}" for r in range(2, self.rft_rounds + 1))

    def model_keys(self) -> dict[str, Any]:
        """The `model` keys the RL stage lays over the policy's (`lora` as a plain mapping)."""
        return {k: dict(v) if isinstance(v, Mapping) else v for k, v in self.model.items()}


RL_RECIPE_SECTIONS = ("rl", "optimizer", "sampling", "engine", "reward", "mesh", "rules")


@dataclasses.dataclass(frozen=True)
class PipelineConfig:
    """All stages of `jaxseeker pipeline`: the pipeline's own sections, and each training stage's recipe sections
    (`sft`, `extend`, `rft` of a `jaxseeker sft` recipe; `rl` of a `jaxseeker rl` recipe)."""

    name: str = "demo"
    world: WorldSpec = PIPELINE_WORLD
    qa: QAStage = QAStage()
    expert: ExpertStage = ExpertStage()
    tools: ToolsConfig = PIPELINE_TOOLS
    policy: PolicyStage = PolicyStage()
    eval: EvalStage = EvalStage()
    sft: SFTSections = SFTSections()
    extend: SFTSections = SFTSections()
    rl: RLStage = RLStage()
    rft: SFTSections = SFTSections()

    def stages(self) -> tuple[str, ...]:
        """The stages this config runs, in order (each one's directory under the run)."""
        p = self.policy
        start = (
            ("eval_base",) * self.eval.zero_shot if p.init else ("tokenizer",) + ("warmup",) * bool(p.copy_warmup_steps)
        )
        return (
            ("qa",)
            + ("qa_fresh",) * bool(self.eval.fresh_questions)
            + ("expert",)
            + start
            + ("sft",)
            + ("extend",) * self.extend.given()
            + ("eval_sft",)
            + ("sample_sft",) * bool(self.eval.sampled_k)
            + self.rl.stages()
            + ("eval_rl",)
            + ("sample_rl",) * bool(self.eval.sampled_k)
            + ("average", "eval_average") * (self.rl.average is not None)
            + ("sample_average",) * bool(self.eval.sampled_k and self.rl.average is not None)
        )


# The sections every recipe kind writes alike (`world`: a spec string or a mapping; `tools`: the tools section of
# every recipe), each read by its parser with the pipeline's defaults.
SHARED = {"world": pipeline_world, "tools": pipeline_tools}
# The pipeline's other sections, each read into its dataclass.
STAGES = {
    "qa": QAStage,
    "expert": ExpertStage,
    "policy": PolicyStage,
    "eval": EvalStage,
    "sft": SFTSections,
    "extend": SFTSections,
    "rl": RLStage,
    "rft": SFTSections,
}
