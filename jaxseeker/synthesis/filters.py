"""Trajectory filters: small pure functions over an Episode, each giving a verdict with the reason it drops.

WebDancer's funnel (arXiv 2505.22648 §3.2): validity (ReAct format, parseable calls, no length
overrun) → correctness (a judge against the reference answer) → quality (no repeated identical
calls, no redundant observations, an action cap, and optionally an LLM's check of non-redundancy,
goal alignment and logical accuracy). WebSailor's RFT filter (arXiv 2507.02592 §4.1): correct, at
most `max_tokens` tokens, more than `min_tool_calls` tool calls.
"""

from __future__ import annotations

import collections
import dataclasses
import json
from collections.abc import Callable, Sequence

from jaxseeker.agent.episode import Episode
from jaxseeker.agent.prompts import FINAL_ANSWER_REQUEST
from jaxseeker.rewards import check_format, exact_match, llm_judge

Judge = Callable[[str, str, str], bool]  # (question, prediction, reference) -> correct?
LLMCheck = Callable[[list[dict[str, str]]], tuple[bool, str]]  # messages -> (keep?, why)
_MALFORMED = ("unknown tool", "unknown argument", "missing required argument", "argument '", "arguments must be")


@dataclasses.dataclass(frozen=True)
class Verdict:
    """Kept (`ok`) or dropped, with the reason."""

    ok: bool
    reason: str = ""


KEEP = Verdict(True)
Filter = Callable[[Episode], Verdict]


@dataclasses.dataclass(frozen=True)
class Stage:
    """One named stage of a funnel."""

    name: str
    check: Filter


def exact_judge(question: str, prediction: str, reference: str) -> bool:
    """Exact match after SQuAD normalisation (the question is not needed)."""
    return exact_match(prediction, reference)


def llm_answer_judge(complete: Callable[[list[dict]], str], *, style: str = "gaia") -> Judge:
    """A Judge backed by an LLM grader (`complete(messages) -> reply`); an unparsable reply counts as wrong."""

    def judge(question: str, prediction: str, reference: str) -> bool:
        return llm_judge(question, prediction, reference, complete, style=style).correct is True

    return judge


def assistant_turns(episode: Episode) -> list[str]:
    """The assistant messages of an episode, in order."""
    return [m["content"] for m in episode.messages if m["role"] == "assistant"]


def validity(episode: Episode, *, max_answers: int = 1) -> Verdict:
    """ReAct format: ended with an answer, every turn `<think>` + strict-JSON calls or one answer, no call the
    tools rejected as malformed, no format-error turn, no final-answer request (the context ran out)."""
    if episode.termination != "answer":
        return Verdict(False, f"ended by {episode.termination}, not an answer")
    if episode.format_errors:
        return Verdict(False, f"{episode.format_errors} turn(s) without a valid call or answer")
    if any(m["role"] == "user" and m["content"] == FINAL_ANSWER_REQUEST for m in episode.messages):
        return Verdict(False, "the context ran out (final-answer request)")
    form = check_format(assistant_turns(episode), max_answers=max_answers)
    if not form.ok:
        return Verdict(False, f"format: {form.reasons[0]}")
    bad = next((c for c in episode.tool_calls if c.error and c.error.lower().startswith(_MALFORMED)), None)
    if bad is not None:
        return Verdict(False, f"malformed {bad.name} call: {bad.error}")
    return KEEP


def correctness(episode: Episode, *, judge: Judge = exact_judge) -> Verdict:
    """The prediction matches the reference answer under `judge`."""
    if episode.answer is None:
        return Verdict(False, "no reference answer")
    if episode.prediction is None:
        return Verdict(False, "no prediction")
    if not judge(episode.question, episode.prediction, episode.answer):
        return Verdict(False, f"wrong answer {episode.prediction!r} (reference {episode.answer!r})")
    return KEEP


def call_key(name: str, arguments: dict) -> str:
    """A canonical text of one call (name + sorted-key JSON arguments)."""
    return name + json.dumps(arguments, sort_keys=True, ensure_ascii=False)


def quality(episode: Episode, *, max_actions: int = 30, llm_check: LLMCheck | None = None) -> Verdict:
    """No identical call made twice, no observation seen twice, at most `max_actions` tool calls, and
    (optional) an LLM's approval of non-redundancy, goal alignment and logical accuracy."""
    repeats = [
        k for k, n in collections.Counter(call_key(c.name, c.arguments) for c in episode.tool_calls).items() if n > 1
    ]
    if repeats:
        return Verdict(False, f"repeated identical call {repeats[0][:120]}")
    observations = [m["content"] for m in episode.messages[2:] if m["role"] == "user"]
    seen = [o for o, n in collections.Counter(observations).items() if n > 1]
    if seen:
        return Verdict(False, f"redundant observation seen twice: {seen[0][:80]!r}")
    if len(episode.tool_calls) > max_actions:
        return Verdict(False, f"{len(episode.tool_calls)} tool calls exceed the cap of {max_actions}")
    if llm_check is not None:
        keep, why = llm_check(episode.messages)
        if not keep:
            return Verdict(False, f"LLM quality check: {why}")
    return KEEP


def rft(episode: Episode, *, judge: Judge = exact_judge, max_tokens: int = 32768, min_tool_calls: int = 5) -> Verdict:
    """WebSailor's RFT filter: correct, at most `max_tokens` tokens, more than `min_tool_calls` tool calls."""
    right = correctness(episode, judge=judge)
    if not right.ok:
        return right
    if len(episode.token_ids) > max_tokens:
        return Verdict(False, f"{len(episode.token_ids)} tokens exceed {max_tokens}")
    if len(episode.tool_calls) <= min_tool_calls:
        return Verdict(False, f"{len(episode.tool_calls)} tool calls, not more than {min_tool_calls}")
    return KEEP


QUALITY_PROMPT = """You review a web-search agent's trajectory for training data. Judge three things: \
non-redundancy (no step repeats information already found), goal alignment (every step serves the question) \
and logical accuracy (each thought follows from the observations before it).

{trajectory}

Reply with one line: "KEEP" if all three hold, else "DROP: <the main problem>"."""


def llm_quality_check(complete: Callable[[list[dict]], str], *, max_chars: int = 60_000) -> LLMCheck:
    """An LLMCheck asking a model (`complete(messages) -> reply`) for KEEP / DROP: reason."""

    def check(messages: list[dict[str, str]]) -> tuple[bool, str]:
        text = "\n\n".join(f"[{m['role']}]\n{m['content']}" for m in messages[1:])[-max_chars:]
        reply = complete([{"role": "user", "content": QUALITY_PROMPT.format(trajectory=text)}]).strip()
        if reply.upper().startswith("KEEP"):
            return True, ""
        return False, reply.partition(":")[2].strip() or reply[:200]

    return check


def webdancer_funnel(
    *, judge: Judge = exact_judge, max_actions: int = 30, llm_check: LLMCheck | None = None, max_answers: int = 1
) -> list[Stage]:
    """validity → correctness → quality."""
    return [
        Stage("validity", lambda e: validity(e, max_answers=max_answers)),
        Stage("correctness", lambda e: correctness(e, judge=judge)),
        Stage("quality", lambda e: quality(e, max_actions=max_actions, llm_check=llm_check)),
    ]


def websailor_funnel(*, judge: Judge = exact_judge, max_tokens: int = 32768, min_tool_calls: int = 5) -> list[Stage]:
    """validity → the RFT filter (correct, ≤ max_tokens, > min_tool_calls)."""
    return [
        Stage("validity", validity),
        Stage("rft", lambda e: rft(e, judge=judge, max_tokens=max_tokens, min_tool_calls=min_tool_calls)),
    ]


def run_funnel(stages: Sequence[Stage], episode: Episode) -> tuple[list[str], Stage | None, str]:
    """(names of the stages passed, the stage that dropped it or None, its reason)."""
    passed = []
    for stage in stages:
        verdict = stage.check(episode)
        if not verdict.ok:
            return passed, stage, verdict.reason
        passed.append(stage.name)
    return passed, None, ""
