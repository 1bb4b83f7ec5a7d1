"""Evidence recall: which of a question's evidence pages an episode's visit calls opened."""

from collections.abc import Iterable, Sequence
from typing import Any
from urllib.parse import unquote


def evidence_recall(tool_calls: Sequence[Any], urls: Iterable[str]) -> float | None:
    """|evidence pages visited| / |evidence pages|, URLs compared percent-decoded; None when `urls` is empty.

    `tool_calls` are `agent.ToolCallRecord`s (or anything with `name` and `arguments`); a visit's `url`
    argument is one URL or a list of them; anything else a policy writes there (a number, an object) opens nothing.
    """
    wanted = {unquote(u) for u in urls}
    if not wanted:
        return None
    visited: set[str] = set()
    for call in tool_calls:
        if call.name != "visit":
            continue
        asked = call.arguments.get("url")
        listed = [asked] if isinstance(asked, str) else asked if isinstance(asked, list) else []
        visited.update(unquote(u) for u in listed if isinstance(u, str))
    return len(wanted & visited) / len(wanted)
