"""Trajectory records: read JSONL, validate, and normalise to one canonical message list.

Two input shapes are accepted, one per JSONL line:

* ``{"messages": [{"role": …, "content": …}, …], …}`` — the WebDancer / OpenSeeker sample format.
  Observations come back either as a ``user`` message whose content starts with ``<tool_response>``
  or as ``tool`` messages (a run of consecutive ``tool`` messages is one observation).
* ``{"prompt": …, "completion": …}`` — each side a string or a list of messages.

Every record is normalised so that an observation is always ONE ``user`` message whose content is
``<tool_response>\\n…\\n</tool_response>`` blocks joined by ``\\n`` (the bytes Qwen's chat template
writes for ``tool`` messages). Training and inference then share one rendering.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from jaxseeker.errors import InputError
from jaxseeker.jsonl import MAX_LINE_BYTES, json_values, quote

ROLES = ("system", "user", "assistant", "tool")
TOOL_RESPONSE_OPEN = "<tool_response>"
TOOL_RESPONSE_CLOSE = "</tool_response>"
TOOL_CALL_OPEN = "<tool_call>"
# Messages of one record: far above an agent trajectory (the longest recipe allows 100 turns, ~200 messages); a
# conversation of this many tokenizes in about a second (`data.chat.assistant_spans` is linear in the turns).
MAX_MESSAGES = 10_000

Message = dict[
    str, Any
]  # role and content; "weight": 0 on an assistant turn kept out of the loss, -1 on a rejected one


@dataclasses.dataclass(frozen=True)
class Trajectory:
    """One normalised record: canonical messages, the other keys of the line, and where it came from."""

    messages: tuple[Message, ...]
    meta: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    source: str = ""  # "FILE:LINE"


@dataclasses.dataclass(frozen=True)
class BadLine:
    """A line that could not be read as a trajectory."""

    path: str
    line: int
    reason: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.reason}"


class BadLineError(InputError):
    """Raised when input lines are malformed and bad lines are not skipped; lists them all."""

    def __init__(self, bad_lines: Sequence[BadLine]):
        self.bad_lines = tuple(bad_lines)
        shown = "\n".join(str(b) for b in self.bad_lines[:20])
        more = len(self.bad_lines) - 20
        tail = f"\n… and {more} more" if more > 0 else ""
        super().__init__(f"{len(self.bad_lines)} bad line(s) (set data.skip_bad_lines to skip them):\n{shown}{tail}")


def is_observation(message: Mapping[str, str]) -> bool:
    """True for a tool observation: a ``tool`` message or a ``user`` message starting with ``<tool_response>``."""
    if message["role"] == "tool":
        return True
    return message["role"] == "user" and message["content"].lstrip().startswith(TOOL_RESPONSE_OPEN)


def _wrap_tool_content(content: str) -> str:
    """Wraps one tool result in ``<tool_response>`` tags unless it already carries them."""
    stripped = content.strip()
    if stripped.startswith(TOOL_RESPONSE_OPEN) and stripped.endswith(TOOL_RESPONSE_CLOSE):
        return stripped
    return f"{TOOL_RESPONSE_OPEN}\n{content}\n{TOOL_RESPONSE_CLOSE}"


def lone_surrogate(text: str) -> int | None:
    """The index of the first lone surrogate in ``text`` (half of a UTF-16 pair, e.g. from the JSON escape
    ``\\ud800``), which no UTF-8 file or tokenizer can hold; None when there is none."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:  # UTF-8 encodes every code point but a surrogate
        return e.start
    return None


def _content_text(content: Any, where: str) -> str:
    """Returns message content as text; a list of ``{"type": "text", "text": …}`` parts is joined. Text with a lone
    surrogate (a JSON escape such as ``\\ud800``) is an error: no tokenizer or UTF-8 file can hold it."""
    if isinstance(content, list) and all(
        isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str) for p in content
    ):
        content = "".join(p["text"] for p in content)
    if not isinstance(content, str):
        raise ValueError(f"{where}: content must be a string or a list of text parts, got {type(content).__name__}")
    at = lone_surrogate(content)
    if at is not None:
        raise ValueError(
            f"{where}: content holds a lone surrogate {content[at]!r} at character {at}, which is not valid Unicode"
        )
    return content


def _weight(message: Mapping[str, Any], role: str, where: str) -> dict[str, int]:
    """`{"weight": 0}` for an assistant turn kept out of the loss (OpenAI's fine-tuning key), `{"weight": -1}` for a
    rejected turn (`data.unlikelihood`: its repeats are made unlikely), else nothing."""
    if "weight" not in message:
        return {}
    weight = message["weight"]
    if role != "assistant" or isinstance(weight, bool) or weight not in (-1, 0, 1):
        raise ValueError(
            f"{where}: 'weight' must be 1, 0 or -1 on an assistant message, got {quote(weight)} on a {role} message"
        )
    return {"weight": int(weight)} if weight != 1 else {}


def normalize_messages(messages: Sequence[Mapping[str, Any]], *, require_assistant: bool = True) -> list[Message]:
    """Validates messages and returns the canonical list (tool runs merged into one user observation).

    Rules: roles are one of ``ROLES``; ``system`` may only come first; the first non-system message
    is a user message (a question, not an observation); at least one assistant message unless
    ``require_assistant`` is False (an inference prompt). An assistant message may carry ``"weight": 0``
    (as in OpenAI's fine-tuning format): it stays in the context but out of the loss; ``"weight": -1`` marks a
    rejected turn (``data.unlikelihood``). Other keys are
    dropped. The function is idempotent.
    """
    if not isinstance(messages, (list, tuple)) or not messages:
        raise ValueError("'messages' must be a non-empty list")
    out: list[Message] = []
    pending_tool: list[str] = []

    def flush_tool() -> None:
        if pending_tool:
            out.append({"role": "user", "content": "\n".join(_wrap_tool_content(c) for c in pending_tool)})
            pending_tool.clear()

    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(message, Mapping):
            raise ValueError(f"{where}: expected an object with 'role' and 'content'")
        role = message.get("role")
        if role not in ROLES:
            raise ValueError(f"{where}: role {quote(role)} is not one of {list(ROLES)}")
        if "content" not in message or message["content"] is None:
            raise ValueError(
                f"{where}: missing 'content' (tool_calls fields are not read: "
                "write <tool_call>…</tool_call> in the assistant content)"
            )
        content = _content_text(message["content"], where)
        if message.get("tool_calls") and TOOL_CALL_OPEN not in content:
            raise ValueError(
                f"{where}: 'tool_calls' is not read and the content has no {TOOL_CALL_OPEN}: write "
                f"{TOOL_CALL_OPEN}…</tool_call> in the assistant content"
            )
        if role == "tool":
            pending_tool.append(content)
            continue
        flush_tool()
        if role == "system" and i != 0:
            raise ValueError(f"{where}: a system message may only come first")
        out.append({"role": role, "content": content} | _weight(message, role, where))
    flush_tool()

    conversation = out[1:] if out[0]["role"] == "system" else out
    if not conversation or conversation[0]["role"] != "user" or is_observation(conversation[0]):
        raise ValueError("the first non-system message must be a user question")
    if require_assistant and not any(m["role"] == "assistant" for m in out):
        raise ValueError("no assistant message: nothing to train on")
    return out


def _side_to_messages(value: Any, role: str, key: str) -> list[Mapping[str, Any]]:
    """Turns one side of a prompt/completion record into messages."""
    if isinstance(value, str):
        return [{"role": role, "content": value}]
    if isinstance(value, list):
        return value
    raise ValueError(f"'{key}' must be a string or a list of messages, got {type(value).__name__}")


def parse_record(obj: Any, source: str = "", *, max_messages: int = MAX_MESSAGES) -> Trajectory:
    """Turns one decoded JSON value into a ``Trajectory``; raises ``ValueError`` saying what is wrong (among them,
    more than ``max_messages`` messages)."""
    if not isinstance(obj, dict):
        raise ValueError(f"expected a JSON object, got {type(obj).__name__}")
    if "messages" in obj:
        messages = obj["messages"]
        meta = {k: v for k, v in obj.items() if k != "messages"}
    elif "prompt" in obj and "completion" in obj:
        messages = _side_to_messages(obj["prompt"], "user", "prompt") + _side_to_messages(
            obj["completion"], "assistant", "completion"
        )
        meta = {k: v for k, v in obj.items() if k not in ("prompt", "completion")}
    else:
        raise ValueError(f"expected key 'messages' or keys 'prompt' and 'completion', got keys {quote(sorted(obj))}")
    if isinstance(messages, (list, tuple)) and len(messages) > max_messages:
        raise ValueError(f"{len(messages):,} messages, over the limit of {max_messages:,} (max_messages)")
    return Trajectory(messages=tuple(normalize_messages(messages)), meta=meta, source=source)


def iter_jsonl(
    path: str | Path, *, max_line_bytes: int = MAX_LINE_BYTES, max_messages: int = MAX_MESSAGES
) -> Iterator[Trajectory | BadLine]:
    """Yields a ``Trajectory`` or a ``BadLine`` for every non-blank line of a JSONL file; a line over
    ``max_line_bytes`` or a record of more than ``max_messages`` messages is a ``BadLine``."""
    path_str = str(path)
    for line_no, obj, reason in json_values(path, max_line_bytes=max_line_bytes):
        if reason is not None:
            yield BadLine(path_str, line_no, reason)
            continue
        try:
            yield parse_record(obj, source=f"{path_str}:{line_no}", max_messages=max_messages)
        except ValueError as e:
            yield BadLine(path_str, line_no, str(e))


def read_trajectories(
    paths: str | Path | Sequence[str | Path],
    *,
    skip_bad_lines: bool = False,
    max_line_bytes: int = MAX_LINE_BYTES,
    max_messages: int = MAX_MESSAGES,
) -> list[Trajectory]:
    """Reads every record of one or more JSONL files (``iter_jsonl``'s bounds); raises ``BadLineError`` (all bad
    lines) unless skipped, and then says on stderr how many were skipped."""
    if isinstance(paths, (str, Path)):
        paths = [paths]
    records: list[Trajectory] = []
    bad: list[BadLine] = []
    for path in paths:
        for item in iter_jsonl(path, max_line_bytes=max_line_bytes, max_messages=max_messages):
            (bad if isinstance(item, BadLine) else records).append(item)
    if bad and not skip_bad_lines:
        raise BadLineError(bad)
    if bad:
        print(f"skipped {len(bad)} bad line(s), first: {bad[0]}", file=sys.stderr)
    return records


def trajectory_to_json(trajectory: Trajectory) -> dict[str, Any]:
    """The JSON object of a trajectory (other keys first, then canonical messages)."""
    return {**trajectory.meta, "messages": [dict(m) for m in trajectory.messages]}
