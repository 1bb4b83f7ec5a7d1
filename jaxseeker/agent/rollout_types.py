"""What a rollout takes and gives: the limits of an episode and of the loop (`RolloutConfig`), and the episodes
with the loop's timing statistics (`RolloutResult`, `RolloutStats`)."""

from __future__ import annotations

import dataclasses

from jaxseeker.agent import prompts
from jaxseeker.agent.episode import Episode


@dataclasses.dataclass(frozen=True)
class RolloutConfig:
    """Limits of one episode and of the loop; defaults follow WebSailor / WebDancer."""

    max_tool_calls: int = 100  # OpenSeeker uses 200
    max_context_tokens: int = 32768  # context tokens of an episode: prompt, turns and tool results
    max_tokens_per_turn: int = 8192  # tokens one turn may write
    answer_reserve_tokens: int = 512  # context kept free for the final-answer request and its answer
    timeout_s: float = 3600.0  # wall clock per episode, from its admission into a slot
    max_format_errors: int = 3  # consecutive turns without a valid call or answer that end an episode
    max_submissions: int = 5  # answer_submit calls of a multi-submit (SRRL) episode
    correct_marker: str = "Correct"  # feedback starting with this ends a multi-submit episode
    tool_workers: int = 32  # threads running tool calls, shared by all episodes
    date: str | None = None  # date in the system prompt; None: today
    prompt: str = "full"  # system prompt: "full" (tool schemas) or "compact" (one line of signatures)
    # every tool call's result enters at the engine step after its turn (the loop waits for it): the engine's batches,
    # and so every log-prob and update, repeat run to run whatever the tools' latency; for tools as fast as a step
    lockstep_tools: bool = False

    def __post_init__(self) -> None:
        for name in (
            "max_tool_calls",
            "max_context_tokens",
            "max_tokens_per_turn",
            "max_format_errors",
            "max_submissions",
            "tool_workers",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"RolloutConfig.{name} must be >= 1, got {getattr(self, name)}")
        if self.prompt not in prompts.PROMPT_STYLES:
            raise ValueError(f"RolloutConfig.prompt must be 'full' or 'compact', got {self.prompt!r}")
        if self.answer_reserve_tokens < 0 or self.timeout_s <= 0:
            raise ValueError("RolloutConfig: answer_reserve_tokens must be >= 0 and timeout_s > 0")


@dataclasses.dataclass
class RolloutStats:
    """Where the wall time went: inside `engine.step()`, idle (episodes in flight but none decoding), host."""

    wall_s: float = 0.0
    step_s: float = 0.0
    idle_s: float = 0.0
    steps: int = 0
    sampled_tokens: int = 0
    episodes: int = 0
    tool_calls: int = 0
    terminations: dict[str, int] = dataclasses.field(default_factory=dict)

    @property
    def idle_fraction(self) -> float:
        """Share of wall time with episodes holding slots but no slot decoding (waiting for tools)."""
        return self.idle_s / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def tokens_per_s(self) -> float:
        """Sampled tokens per second of wall time."""
        return self.sampled_tokens / self.wall_s if self.wall_s > 0 else 0.0


@dataclasses.dataclass(frozen=True)
class RolloutResult:
    """The episodes (ordered by question, then sample) and the loop's timing statistics."""

    episodes: list[Episode]
    stats: RolloutStats
