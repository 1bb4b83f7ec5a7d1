"""Read a policy turn: its `<think>` part, every `<tool_call>` block (near-JSON repaired) and its `<answer>`."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping
from typing import Any

import json_repair

_TOOL_CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)
_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
_THINK = re.compile(r"<think>.*?</think>", re.DOTALL)
_FENCE = re.compile(r"\A```(?:json)?\s*(.*?)\s*```\Z", re.DOTALL)
_NAME_KEYS = ("name", "tool_name")
_ARGUMENT_KEYS = ("arguments", "tool_args", "parameters", "args")


@dataclasses.dataclass(frozen=True)
class ToolCall:
    """A parsed call: tool `name`, its `arguments` object, and the block's `raw` text."""

    name: str
    arguments: dict[str, Any]
    raw: str = ""


@dataclasses.dataclass(frozen=True)
class ToolCallError:
    """A `<tool_call>` block that is not a usable call; `message` names the problem (fit for an observation)."""

    message: str
    raw: str = ""


def split_think(text: str) -> tuple[str, str]:
    """(thought, rest): the first thought of a turn and the action text that follows it.

    The thought is the text inside the first `<think>…</think>` (or before a lone `</think>`); a turn
    without any think tag is all action. Later `<think>…</think>` blocks are thoughts too and are left out
    of `rest`. A `<think>` never closed (a turn cut mid-thought) is still thinking: everything after it is
    thought, not action, so `rest` stops there; when the turn's only thought is unclosed, the thought is
    the text after its `<think>` and `rest` is empty.
    """
    end = text.find("</think>")
    if end < 0:
        start = text.find("<think>")
        return (text[start + len("<think>") :].strip(), "") if start >= 0 else ("", text)
    start = text.rfind("<think>", 0, end)
    thought = text[start + len("<think>") : end] if start >= 0 else text[:end]
    rest = _THINK.sub("", text[end + len("</think>") :])
    unclosed = rest.find("<think>")
    return thought.strip(), rest if unclosed < 0 else rest[:unclosed]


def parse_answer(text: str) -> str | None:
    """The stripped text of the last complete `<answer>…</answer>` in the action (`split_think`'s rest), or None."""
    answers = _ANSWER.findall(split_think(text)[1])
    return answers[-1].strip() if answers else None


def _loads(text: str) -> Any:
    try:
        return json.loads(text, strict=False)
    except (json.JSONDecodeError, RecursionError):
        pass
    try:
        return json_repair.loads(text)
    except Exception:  # noqa: BLE001 - whatever json_repair cannot handle is reported as unparseable
        return None


def _call_from(obj: Any, raw: str) -> ToolCall | ToolCallError:
    if not isinstance(obj, Mapping):
        return ToolCallError(f"tool call is not a JSON object with a name and arguments: {raw[:200]!r}", raw)
    name = next((obj[k] for k in _NAME_KEYS if k in obj), None)
    if not isinstance(name, str) or not name.strip():
        return ToolCallError(f"tool call has no tool name (expected a 'name' string): {raw[:200]!r}", raw)
    arguments = next((obj[k] for k in _ARGUMENT_KEYS if k in obj), {})
    if isinstance(arguments, str):
        decoded = _loads(arguments) if arguments.strip() else {}
        if not isinstance(decoded, Mapping):
            return ToolCallError(
                f"arguments of tool call {name.strip()!r} are not a JSON object: {arguments[:200]!r}", raw
            )
        arguments = decoded
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, Mapping):
        return ToolCallError(
            f"arguments of tool call {name.strip()!r} must be an object, got {type(arguments).__name__}", raw
        )
    return ToolCall(name.strip(), dict(arguments), raw)


def parse_block(body: str) -> list[ToolCall | ToolCallError]:
    """The call(s) in the body of one `<tool_call>` block: an object, or a list of objects."""
    raw = body.strip()
    if not raw:
        return [ToolCallError("empty <tool_call> block", body)]
    fenced = _FENCE.match(raw)
    obj = _loads(fenced.group(1) if fenced else raw)
    if isinstance(obj, list) and obj:
        return [_call_from(item, raw) for item in obj]
    return [_call_from(obj, raw)]


def parse_tool_calls(text: str) -> list[ToolCall | ToolCallError]:
    """Every `<tool_call>…</tool_call>` block in the action (`split_think`'s rest), in order; an unclosed last
    block is an error."""
    rest = split_think(text)[1]
    results: list[ToolCall | ToolCallError] = []
    for body in _TOOL_CALL.findall(rest):
        results.extend(parse_block(body))
    tail = rest[rest.rfind("</tool_call>") + len("</tool_call>") :] if "</tool_call>" in rest else rest
    if "<tool_call>" in tail:
        results.append(
            ToolCallError(
                "unclosed <tool_call> block: end the call with </tool_call>", tail[tail.find("<tool_call>") :]
            )
        )
    return results
