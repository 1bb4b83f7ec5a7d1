"""Reading JSONL files line by line, each bad line named FILE:LINE; below every stage, so any of them may use it."""

from __future__ import annotations

import codecs
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from jaxseeker.errors import InputError


def json_values(path: str | Path) -> Iterator[tuple[int, Any, str | None]]:
    """(line number, value, None) for every non-blank line of a JSONL file, or (line number, None, reason) for one
    that is not UTF-8 or not JSON. Lines end at ``\\n`` only (``\\r`` is JSON whitespace); a leading BOM is dropped."""
    if Path(path).is_dir():
        raise InputError(f"{path}: is a directory, not a JSONL file")
    with open(path, "rb") as f:
        for line_no, raw in enumerate(f, start=1):
            if line_no == 1:
                raw = raw.removeprefix(codecs.BOM_UTF8)
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                yield line_no, None, f"not UTF-8: byte {raw[e.start]:#04x} at byte {e.start + 1} of the line"
                continue
            if not line.strip():
                continue
            try:
                yield line_no, json.loads(line), None
            except json.JSONDecodeError as e:
                yield line_no, None, f"invalid JSON: {e.msg} (column {e.colno})"
            except (ValueError, RecursionError) as e:  # e.g. an integer over 4300 digits, arrays nested too deeply
                yield line_no, None, f"invalid JSON: {e}"


def json_lines(path: str | Path) -> Iterator[tuple[int, Any]]:
    """(line number, parsed object) for every non-blank line of a JSONL file; a line that is not UTF-8 JSON raises
    ``InputError`` naming FILE:LINE."""
    for line_no, obj, reason in json_values(path):
        if reason is not None:
            raise InputError(f"{path}:{line_no}: {reason}")
        yield line_no, obj
