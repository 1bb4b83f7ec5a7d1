"""Reading JSON and JSONL input with bounds, each bad line named FILE:LINE; below every stage, so any may use it.

Every JSONL reader of the project (questions, trajectories, SFT data, eval results, world pages, journals) goes
through `json_values`, which holds these bounds (docs/security.md, "Loaders"):

- a line longer than `MAX_LINE_BYTES` is refused before it is parsed, and skipped without being held in memory;
- arrays and objects nested deeper than `MAX_DEPTH` are refused where they are read, not later by a RecursionError
  in the code that walks them;
- `NaN`, `Infinity` and numbers that overflow a float (`1e400`) are refused: they are not JSON (RFC 8259), and
  an answer or a reward that is not a finite number poisons every mean taken over it (`allow_nan=True` reads
  them, for files jaxseeker writes itself where they mean something: a diverged run's `metrics.jsonl`);
- a value quoted in an error message is cut to `QUOTE_CHARS` characters (`quote`), so one bad value does not make
  an error of megabytes.
"""

from __future__ import annotations

import codecs
import json
import math
import reprlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from jaxseeker.errors import InputError

MAX_LINE_BYTES = 16 << 20  # far above a long agent trajectory (~1 MB at 100 turns of 2k-token observations)
MAX_DEPTH = 100  # far below where json's recursion fails (~1000), far above any record (questions nest 3 deep)
QUOTE_CHARS = 200  # the most characters of a value an error message quotes
_SKIP_CHUNK = 1 << 20  # bytes read at a time while skipping the rest of an over-long line


class JsonError(ValueError):
    """A JSON text that is refused: malformed, non-finite numbers, too deep or too long; `pos` is the character
    where it was found when known (for a multi-line document's line number)."""

    def __init__(self, reason: str, pos: int | None = None):
        super().__init__(reason)
        self.pos = pos


def _refuse_constant(name: str) -> Any:
    """`parse_constant` of the decoder: NaN, Infinity and -Infinity are not JSON."""
    raise JsonError(f"invalid JSON: {name} is not a JSON number (write null or a string)")


def _finite_float(text: str) -> float:
    """`parse_float` of the decoder: a number that overflows a float (read as inf) is refused."""
    value = float(text)
    if not math.isfinite(value):
        raise JsonError(f"invalid JSON: the number {quote(text)} overflows a float")
    return value


_DECODER = json.JSONDecoder(parse_constant=_refuse_constant, parse_float=_finite_float)
_NAN_DECODER = json.JSONDecoder()  # Python's reading: NaN, Infinity and -Infinity are floats
_WHITESPACE = json.decoder.WHITESPACE  # the JSON whitespace json.loads skips: space, tab, CR, LF


def _deeper_than(value: Any, max_depth: int) -> bool:
    """Whether arrays or objects nest in `value` more than `max_depth` levels (a scalar is depth 0); iterative, so
    a deep value cannot exhaust the stack here."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item
        if depth > max_depth:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


def decode_value(text: str, start: int = 0, *, max_depth: int = MAX_DEPTH, allow_nan: bool = False) -> tuple[Any, int]:
    """The JSON value that starts at `text[start:]` (after whitespace) and the index just after it; raises
    `JsonError` with a one-line reason for a malformed, too deeply nested or (unless `allow_nan`) non-finite value."""
    start = _WHITESPACE.match(text, start).end()
    try:
        value, end = (_NAN_DECODER if allow_nan else _DECODER).raw_decode(text, start)
    except json.JSONDecodeError as e:
        raise JsonError(f"invalid JSON: {e.msg} (column {e.colno})", e.pos) from None
    except RecursionError:
        raise JsonError(f"invalid JSON: arrays or objects nested deeper than {max_depth}", start) from None
    except JsonError as e:
        raise JsonError(str(e), start) from None
    except ValueError as e:  # an integer over 4300 digits (Python's int-to-str limit)
        digits = str(e).partition("has ")[2].partition(" digits")[0]
        reason = f"an integer of {digits} digits (at most 4300 are read)" if digits.isdigit() else quote(str(e))
        raise JsonError(f"invalid JSON: {reason}", start) from None
    if isinstance(value, (dict, list)) and _deeper_than(value, max_depth):
        raise JsonError(f"invalid JSON: arrays or objects nested deeper than {max_depth}", start)
    return value, end


def loads(text: str, *, max_depth: int = MAX_DEPTH, allow_nan: bool = False) -> Any:
    """`json.loads` with the bounds of this module: raises `JsonError` with a one-line reason."""
    value, end = decode_value(text, max_depth=max_depth, allow_nan=allow_nan)
    end = _WHITESPACE.match(text, end).end()
    if end != len(text):
        extra = json.JSONDecodeError("Extra data", text, end)  # for its column
        raise JsonError(f"invalid JSON: {extra.msg} (column {extra.colno})", end)
    return value


_QUOTER = reprlib.Repr()  # the standard library's bounded repr: long strings, lists, dicts and nesting are elided
_QUOTER.maxstring = _QUOTER.maxother = QUOTE_CHARS
_QUOTER.maxlevel, _QUOTER.maxlist, _QUOTER.maxdict, _QUOTER.maxlong = 3, 8, 8, 40


def quote(value: Any, limit: int = QUOTE_CHARS) -> str:
    """`repr(value)` for an error message, cut to about `limit` characters (with its length when it was a long
    string), computed without building the full repr of a huge value."""
    text = _QUOTER.repr(value)
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    if isinstance(value, str) and len(value) > limit:
        text += f" ({len(value):,} characters)"
    return text


def _over_long(f: Any, head: bytes) -> int:
    """The length in bytes (line feed not counted) of a line that starts with `head`, read on to its end a chunk at
    a time and dropped, so the file's next read starts at the next line."""
    size = len(head)
    while not head.endswith(b"\n"):
        head = f.readline(_SKIP_CHUNK)
        if not head:
            return size
        size += len(head)
    return size - 1


def json_values(
    path: str | Path, *, max_line_bytes: int = MAX_LINE_BYTES, max_depth: int = MAX_DEPTH, allow_nan: bool = False
) -> Iterator[tuple[int, Any, str | None]]:
    """(line number, value, None) for every non-blank line of a JSONL file, or (line number, None, reason) for one
    that is not UTF-8, not JSON, too long or too deep. Lines end at ``\\n`` only (``\\r`` is JSON whitespace); a
    leading BOM is dropped. A line over `max_line_bytes` is skipped without being held."""
    if Path(path).is_dir():
        raise InputError(f"{path}: is a directory, not a JSONL file")
    with open(path, "rb") as f:
        line_no = 0
        while raw := f.readline(max_line_bytes + 1):  # + 1: the line feed of a line of exactly the limit
            line_no += 1
            if len(raw) > max_line_bytes and not raw.endswith(b"\n"):
                size = _over_long(f, raw)
                yield line_no, None, f"a line of {size:,} bytes, over the limit of {max_line_bytes:,} (max_line_bytes)"
                continue
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
                yield line_no, loads(line, max_depth=max_depth, allow_nan=allow_nan), None
            except JsonError as e:
                yield line_no, None, str(e)


def json_lines(
    path: str | Path, *, max_line_bytes: int = MAX_LINE_BYTES, max_depth: int = MAX_DEPTH, allow_nan: bool = False
) -> Iterator[tuple[int, Any]]:
    """(line number, parsed object) for every non-blank line of a JSONL file; a line that `json_values` refuses
    raises ``InputError`` naming FILE:LINE."""
    for line_no, obj, reason in json_values(
        path, max_line_bytes=max_line_bytes, max_depth=max_depth, allow_nan=allow_nan
    ):
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
