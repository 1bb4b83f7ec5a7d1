"""Summarise trajectory files: records, tokens, trained-token fraction, turns, tool calls, bad lines.

Bad lines never stop the inspection: each is reported as ``FILE:LINE: reason`` (including records
that parse but cannot be tokenized with a loss mask).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from jaxseeker.data.chat import tokenize_chat
from jaxseeker.data.records import TOOL_CALL_OPEN, BadLine, Trajectory, is_observation, iter_jsonl


def _count_turns(trajectory: Trajectory) -> dict[str, int]:
    """Assistant turns, tool calls (``<tool_call>`` blocks in assistant turns) and observations."""
    assistant = [m["content"] for m in trajectory.messages if m["role"] == "assistant"]
    return {
        "assistant_turns": len(assistant),
        "tool_calls": sum(text.count(TOOL_CALL_OPEN) for text in assistant),
        "observations": sum(1 for m in trajectory.messages if is_observation(m)),
    }


def inspect_items(items: Iterable[Trajectory | BadLine], tokenizer: Any) -> dict[str, Any]:
    """JSON-ready summary of trajectories and bad lines (bad lines listed as ``FILE:LINE: reason``)."""
    totals = {"records": 0, "tokens": 0, "trained_tokens": 0, "assistant_turns": 0, "tool_calls": 0, "observations": 0}
    lengths: list[int] = []
    bad_lines: list[str] = []
    for item in items:
        if isinstance(item, BadLine):
            bad_lines.append(str(item))
            continue
        try:
            ids, mask = tokenize_chat(item.messages, tokenizer)
        except ValueError as e:
            bad_lines.append(f"{item.source}: {e}")
            continue
        totals["records"] += 1
        totals["tokens"] += int(ids.size)
        totals["trained_tokens"] += int(mask.sum())
        for key, value in _count_turns(item).items():
            totals[key] += value
        lengths.append(int(ids.size))
    records = totals["records"]
    return {
        **totals,
        "trained_fraction": totals["trained_tokens"] / totals["tokens"] if totals["tokens"] else 0.0,
        "tokens_per_record": {
            "mean": totals["tokens"] / records if records else 0.0,
            "max": max(lengths, default=0),
            "min": min(lengths, default=0),
        },
        "assistant_turns_per_record": totals["assistant_turns"] / records if records else 0.0,
        "tool_calls_per_record": totals["tool_calls"] / records if records else 0.0,
        "bad_lines": bad_lines,
    }


def inspect_files(paths: Sequence[str | Path], tokenizer: Any) -> dict[str, Any]:
    """Summary of one or more JSONL trajectory files (see ``inspect_items``), with the file list."""
    items = (item for path in paths for item in iter_jsonl(path))
    return {"files": [str(p) for p in paths], **inspect_items(items, tokenizer)}
