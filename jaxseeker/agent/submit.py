"""Multi-submit (WebSeer SRRL) episodes outside training: each episode's `answer_submit` scores a submission against
its own question's reference answer, as `jaxseeker rl` does (`RLRun.registry_for`), for `rollout` and `eval`, and
the `--tools` / `--submit-threshold` flags of both commands."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

from jaxseeker.agent.episode import Episode, Question
from jaxseeker.agent.loop import RegistrySource
from jaxseeker.agent.parser import parse_answer
from jaxseeker.argtypes import at_least, comma_names
from jaxseeker.errors import InputError
from jaxseeker.rewards.format import check_format
from jaxseeker.rewards.srrl import submit_feedback
from jaxseeker.tools import ToolsConfig, answer_submit_tool, build_registry
from jaxseeker.tools.config import TOOL_NAMES
from jaxseeker.world import Corpus

SUBMIT_TOOL = "answer_submit"
TOOLS = comma_names(TOOL_NAMES)  # `--tools`: an unknown name is a usage error
TOOLS_HELP = (
    f"comma-separated tools of every episode ({', '.join(TOOL_NAMES)}); {SUBMIT_TOOL} scores each "
    "submission against the question's own answer (WebSeer's multi-submit episodes)"
)
SUBMIT_F1 = at_least(0.0, float, above=True, high=1.0)  # `--submit-threshold`: an F1 in (0, 1]
SUBMIT_HELP = (
    f'token F1 from which {SUBMIT_TOOL} says "Correct!", which ends the episode (default %(default)s, as '
    "RL's reward.submit_threshold)"
)


def episode_tools(config: ToolsConfig, *, corpus: Corpus | None, submit_threshold: float) -> RegistrySource:
    """`build_registry(config)`; with `answer_submit` enabled, a function Question → the other tools plus (last, as in
    RL) an `answer_submit` whose feedback is the token F1 of a submission against that question's `answer`:
    "Correct! The F1 score is 0.83." from `submit_threshold` on, else "Incorrect! …" (`rewards.submission_feedback`).
    """
    if SUBMIT_TOOL not in config.enabled:
        return build_registry(config, corpus=corpus)
    others = dataclasses.replace(config, enabled=tuple(n for n in config.enabled if n != SUBMIT_TOOL))
    base = build_registry(others, corpus=corpus)
    return lambda question: base.extended(answer_submit_tool(submit_feedback(question.answer, submit_threshold)))


def require_answers(path: str | Path, numbered: Sequence[tuple[int, Question]]) -> None:
    """An InputError naming `PATH:LINE` and the first question of `numbered` (`episode.numbered_questions`) without a
    reference answer: `answer_submit` scores every submission against it."""
    for line, question in numbered:
        if question.answer is None or not question.answer.strip():
            raise InputError(
                f"{path}:{line}: question {question.question!r} has no 'answer'; the answer_submit tool "
                "scores each submission against it"
            )


def format_ok(episode: Episode) -> bool:
    """`rewards.check_format` of the assistant turns; in a multi-submit episode the last submission is its answer
    when the final turn gives none (how RL scores and eval judges it)."""
    turns = [m["content"] for m in episode.messages if m["role"] == "assistant"]
    if episode.submissions and not (turns and parse_answer(turns[-1]) is not None):
        turns.append(f"<think></think><answer>{episode.submissions[-1].answer}</answer>")
    return check_format(turns).ok
