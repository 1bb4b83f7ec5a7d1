"""What every stage of one pipeline run shares: the config, the run directory, the world and its tools, the
stage runner, the policy's tokenizer."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from jaxseeker.agent import Question, RolloutConfig
from jaxseeker.pipeline.config import PipelineConfig
from jaxseeker.pipeline.stages import StageRunner


@dataclasses.dataclass
class PipelineRun:
    """One run of `jaxseeker pipeline` under `root`."""

    cfg: PipelineConfig
    root: Path
    runner: StageRunner
    progress: bool
    world: Any
    registry: Any
    tokenizer: Any = None  # the policy's, once its stage has run (or the pretrained model's)
    init_dir: Path | None = None  # the pretrained policy's HF directory (policy.init), None from scratch

    @property
    def qa_dir(self) -> Path:
        """Where the QA stage writes its splits."""
        return self.root / "qa"


def rollout_config(cfg: PipelineConfig) -> RolloutConfig:
    """The limits every rollout of the pipeline shares (expert, eval, RL). Its tools read the offline world, as fast
    as an engine step, so each call's result enters at the next step (`lockstep_tools`): a run repeats to the digit."""
    e = cfg.eval
    return RolloutConfig(
        max_tool_calls=e.max_tool_calls,
        max_context_tokens=e.max_context,
        max_tokens_per_turn=e.max_tokens_per_turn,
        answer_reserve_tokens=64,
        date="2026-01-01",
        prompt=e.prompt,
        lockstep_tools=True,
    )


def questions_of(records: list[dict]) -> list[Question]:
    """Rollout questions of QA records (everything but the question and answer goes into `meta`)."""
    return [
        Question(r["question"], r["answer"], {k: v for k, v in r.items() if k not in ("question", "answer")})
        for r in records
    ]
