"""Strict format check of a ReAct episode's assistant turns, and the final answer they give.

Each assistant turn is `<think>…</think>` followed either by one or more
`<tool_call>{"name": …, "arguments": {…}}</tool_call>` blocks (strict JSON) or by one
`<answer>…</answer>`; only whitespace may sit outside the blocks. An episode ends with its answer turn.
"""

import dataclasses
import json
import re
from collections.abc import Sequence

_TAG = re.compile(r"<(/?)(think|tool_call|answer|tool_response)>")


@dataclasses.dataclass(frozen=True)
class FormatResult:
    """Outcome of `check_format`: `ok` is True exactly when `reasons` is empty."""

    ok: bool
    reasons: list[str]


def _blocks(text: str) -> tuple[list[tuple[str, str]], list[str]]:
    """Split one turn into (tag, content) blocks; also return what is malformed about it."""
    blocks: list[tuple[str, str]] = []
    problems: list[str] = []
    open_tag: str | None = None
    open_end = 0
    last_end = 0
    for match in _TAG.finditer(text):
        closing, tag = match.group(1) == "/", match.group(2)
        if tag == "tool_response":
            problems.append("contains <tool_response> (observations are written by the environment)")
            continue
        if not closing:
            if open_tag is not None:
                problems.append(f"<{tag}> opened inside <{open_tag}>")
                continue
            stray = text[last_end : match.start()].strip()
            if stray:
                problems.append(f"text outside tags: {stray[:40]!r}")
            open_tag, open_end = tag, match.end()
        elif open_tag != tag:
            problems.append(f"</{tag}> without a matching <{tag}>")
        else:
            blocks.append((tag, text[open_end : match.start()]))
            open_tag, last_end = None, match.end()
    if open_tag is not None:
        problems.append(f"<{open_tag}> is never closed")
    elif text[last_end:].strip():
        problems.append(f"text outside tags: {text[last_end:].strip()[:40]!r}")
    return blocks, problems


def _tool_call_problem(content: str) -> str | None:
    """Why a <tool_call> body is not a strict JSON `{"name": str, "arguments": {…}}`, or None."""
    try:
        call = json.loads(content)
    except json.JSONDecodeError as err:
        return f"<tool_call> is not valid JSON ({err.msg} at char {err.pos})"
    if not isinstance(call, dict) or not isinstance(call.get("name"), str):
        return '<tool_call> JSON needs a string "name"'
    if not isinstance(call.get("arguments", {}), dict):
        return '<tool_call> "arguments" must be a JSON object'
    return None


def _turn_kind(blocks: list[tuple[str, str]]) -> tuple[str | None, list[str]]:
    """'tool_call' or 'answer' for a well-ordered turn, with the ordering problems found."""
    tags = [tag for tag, _ in blocks]
    if not tags or tags[0] != "think":
        return None, ["does not start with <think>…</think>"]
    rest = tags[1:]
    if "think" in rest:
        return None, ["has more than one <think> block"]
    if not rest:
        return None, ["has no <tool_call> or <answer> after </think>"]
    if rest == ["answer"]:
        return "answer", []
    if set(rest) == {"tool_call"}:
        return "tool_call", []
    if set(rest) == {"answer"}:
        return None, ["has more than one <answer>"]
    return None, ["mixes <tool_call> and <answer>"]


def check_format(assistant_turns: str | Sequence[str], *, max_answers: int = 1) -> FormatResult:
    """Check the ReAct format of an episode given as its assistant messages, in order.

    Every turn must be `<think>…</think>` then `<tool_call>` blocks of strict JSON or one `<answer>`;
    the last turn must be an answer turn and the episode may hold at most `max_answers` of them
    (1 for ReAct; up to `max_submissions` for SRRL, where wrong answers get feedback and the episode
    goes on). A single string is checked as a one-turn episode.
    """
    turns = [assistant_turns] if isinstance(assistant_turns, str) else list(assistant_turns)
    if not turns:
        return FormatResult(ok=False, reasons=["episode has no assistant turn"])
    reasons: list[str] = []
    kinds: list[str | None] = []
    for index, text in enumerate(turns):
        if not isinstance(text, str):
            raise TypeError(f"assistant turn {index} is {type(text).__name__}, expected str")
        blocks, problems = _blocks(text)
        kind, order_problems = _turn_kind(blocks) if not problems else (None, [])
        problems += order_problems
        if kind == "tool_call":
            problems += [p for tag, body in blocks if tag == "tool_call" and (p := _tool_call_problem(body))]
        reasons += [f"turn {index}: {problem}" for problem in problems]
        kinds.append(kind)
    n_answers = kinds.count("answer")
    if kinds[-1] != "answer" and kinds[-1] is not None:
        reasons.append(f"turn {len(turns) - 1}: the episode does not end with an <answer>")
    if n_answers > max_answers:
        reasons.append(f"episode has {n_answers} answer turns, at most {max_answers} allowed")
    return FormatResult(ok=not reasons, reasons=reasons)


def extract_answer(assistant_turns: str | Sequence[str]) -> str | None:
    """The stripped text of the last `<answer>…</answer>` in the episode, or None when there is none."""
    turns = [assistant_turns] if isinstance(assistant_turns, str) else list(assistant_turns)
    for text in reversed(turns):
        answers = [body for tag, body in _blocks(text)[0] if tag == "answer"]
        if answers:
            return answers[-1].strip()
    return None
