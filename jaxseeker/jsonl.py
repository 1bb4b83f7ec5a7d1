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


def drop_torn_tail(path: str | Path, chunk: int = 1 << 16) -> int:
    """Cut the unfinished last line a killed writer left at the end of an append-only JSONL file (no closing line
    feed, not JSON), so a resumed run appends on a line of its own; returns how many bytes were cut (0: whole).
    A last line that is whole JSON without its line feed gets the line feed instead."""
    with open(path, "rb+") as f:
        end = f.seek(0, 2)
        if end == 0:
            return 0
        f.seek(end - 1)
        if f.read(1) == b"\n":
            return 0
        start = end
        while start > 0:  # back to the line feed before the last line, a chunk at a time
            step = min(chunk, start)
            f.seek(start - step)
            block = f.read(step)
            cut = block.rfind(b"\n")
            start -= step
            if cut >= 0:
                start += cut + 1
                break
        f.seek(start)
        tail = f.read()
        try:
            json.loads(tail.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError):
            f.truncate(start)
            return len(tail)
        f.write(b"\n")
        return 0
