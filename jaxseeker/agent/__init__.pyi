"""Names `jaxseeker.agent` exports, each imported from its module on first use (lazy_loader reads this stub)."""

from .episode import (
    TERMINATIONS,
    Episode,
    Question,
    Submission,
    ToolCallRecord,
    as_question,
    read_episodes,
    read_questions,
    rendering_matches,
    write_episodes,
)
from .loop import rollout, run_episodes
from .parser import ToolCall, ToolCallError, parse_answer, parse_tool_calls, split_think
from .prompts import FINAL_ANSWER_REQUEST, Renderer, format_observation, initial_messages, system_prompt
from .rollout_types import RolloutConfig, RolloutResult, RolloutStats
from .scripted import ScriptedEngine, bigram_params, tool_calling_model, tool_calling_params

__all__ = [
    "FINAL_ANSWER_REQUEST",
    "TERMINATIONS",
    "Episode",
    "Question",
    "Renderer",
    "RolloutConfig",
    "RolloutResult",
    "RolloutStats",
    "ScriptedEngine",
    "Submission",
    "ToolCall",
    "ToolCallError",
    "ToolCallRecord",
    "as_question",
    "bigram_params",
    "format_observation",
    "initial_messages",
    "parse_answer",
    "parse_tool_calls",
    "read_episodes",
    "read_questions",
    "rendering_matches",
    "rollout",
    "run_episodes",
    "split_think",
    "system_prompt",
    "tool_calling_model",
    "tool_calling_params",
    "write_episodes",
]
