"""Benchmark question files → question records `{id, question, answer, …}`.

One entry point, `load_questions(path)`, reads:
- JSONL / JSON (a JSON array, or JSONL under a `.json` name): plain `{question, answer}` rows,
  WebDancer samples (`query` / `problem` keys, answers as lists or lists of lists), GAIA
  (`task_id`, `Question`, `Final answer`, `Level`), WebWalkerQA (`Question`, `Answer`, `Info`);
- BrowseComp-style encrypted CSV (`problem, answer, problem_topic, canary`);
- xbench-style encrypted CSV (`id, prompt, answer, …, canary`);
- a plain CSV with a question and an answer column.

Every record has `id` (the source's id, else `STEM:N` for the file's N-th question), `question`
(str) and `answer` (a str, or a list of acceptable answers when the source gives several), plus the
source's other fields except the canary; `Level` becomes `level` and `problem_topic` becomes
`topic` (unless the row has that key too; the eval breaks results down by it when the row has no
`tag`). A bad row raises `LoadError` whose message starts with `FILE:ROW:` (the line for JSONL and
CSV, `item N` for a JSON array).
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import json
import re
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from jaxseeker.errors import InputError

QUESTION_KEYS = ("question", "query", "problem", "Question", "prompt")
ANSWER_KEYS = ("answer", "Answer", "Final answer", "final_answer", "answers")
ID_KEYS = ("id", "task_id", "question_id", "qid")
RENAMED_KEYS = {"Level": "level", "problem_topic": "topic"}

BROWSECOMP_ENCRYPTED = ("problem", "answer")
XBENCH_ENCRYPTED = ("prompt", "answer", "reference_steps")


class LoadError(InputError):
    """A question file that cannot be read; the message starts with `FILE:ROW: reason`."""


def load_questions(path: str | Path) -> list[dict[str, Any]]:
    """Read a benchmark file, picking the loader from its suffix and header; see the module doc."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".csv":
        rows = _csv_rows(path, _read_text(path))
    elif suffix in (".jsonl", ".json"):
        text = _read_text(path)
        is_array = suffix == ".json" and text.lstrip().startswith("[")
        rows = _json_array_rows(path, text) if is_array else _jsonl_rows(path, text)
    else:
        raise LoadError(f"{path}: unsupported file type {suffix!r} (expected .jsonl, .json or .csv)")
    records: list[dict[str, Any]] = []
    first_row_of: dict[str, str] = {}
    for number, (where, row) in enumerate(rows, start=1):
        record = normalize_row(row, where=where, default_id=f"{path.stem}:{number}")
        if record["id"] in first_row_of:
            raise LoadError(f"{where}: duplicate id {record['id']!r} (first at {first_row_of[record['id']]})")
        first_row_of[record["id"]] = where
        records.append(record)
    if not records:
        raise LoadError(f"{path}: no questions")
    return records


def normalize_row(row: Mapping[str, Any], *, where: str, default_id: str) -> dict[str, Any]:
    """One source row → `{id, question, answer, …other fields}`; `where` prefixes any error."""
    question_key = _first_present(row, QUESTION_KEYS)
    if question_key is None:
        raise LoadError(f"{where}: no question field (expected one of {', '.join(QUESTION_KEYS)})")
    question = row[question_key]
    if not isinstance(question, str) or not question.strip():
        raise LoadError(f"{where}: field {question_key!r} must be a non-empty string, got {question!r}")
    answer_key = _first_present(row, ANSWER_KEYS)
    if answer_key is None:
        raise LoadError(f"{where}: no answer field (expected one of {', '.join(ANSWER_KEYS)})")
    answer = _acceptable_answers(row[answer_key], where=f"{where}: field {answer_key!r}")
    id_key = _first_present(row, ID_KEYS)
    record_id = default_id if id_key is None or row[id_key] in ("", None) else str(row[id_key])
    record: dict[str, Any] = {"id": record_id, "question": question.strip(), "answer": answer}
    for key, value in row.items():
        if key in (question_key, answer_key, id_key, "canary"):
            continue
        name = RENAMED_KEYS.get(key)
        record[key if name is None or name in row else name] = value
    return record


def decrypt_browsecomp(ciphertext_b64: str, canary: str) -> str:
    """OpenAI simple-evals' BrowseComp `decrypt`: base64 → XOR with sha256(canary) repeated → UTF-8."""
    data = base64.b64decode(ciphertext_b64.strip(), validate=True)
    digest = hashlib.sha256(canary.encode("utf-8")).digest()
    return _xor(data, digest).decode("utf-8")


def decrypt_xbench(ciphertext_b64: str, canary: str) -> str:
    """xbench's `xor_decrypt`: base64 → XOR with the canary's UTF-8 bytes repeated → UTF-8."""
    data = base64.b64decode(ciphertext_b64.strip(), validate=True)
    return _xor(data, canary.encode("utf-8")).decode("utf-8")


def _xor(data: bytes, key: bytes) -> bytes:
    """`data` XOR `key` repeated to `len(data)` bytes."""
    return bytes(byte ^ key[i % len(key)] for i, byte in enumerate(data))


def _first_present(row: Mapping[str, Any], keys: tuple[str, ...]) -> str | None:
    """The first of `keys` that the row has (with any value), or None."""
    return next((key for key in keys if key in row), None)


def _acceptable_answers(value: Any, *, where: str) -> str | list[str]:
    """A gold answer as a str, or a list of distinct acceptable answers (lists of lists flattened)."""
    if not isinstance(value, list):
        return _answer_text(value, where=where)
    flat = [alias for item in value for alias in (item if isinstance(item, list) else [item])]
    if any(isinstance(alias, list) for alias in flat):
        raise LoadError(f"{where}: answers nest at most two lists deep, got {value!r}")
    answers = list(dict.fromkeys(_answer_text(alias, where=where) for alias in flat))
    if not answers:
        raise LoadError(f"{where}: empty answer list")
    return answers[0] if len(answers) == 1 else answers


def _answer_text(value: Any, *, where: str) -> str:
    """One gold answer as stripped text (numbers are written out); empty or other types are errors."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        raise LoadError(f"{where}: answer must be a string or a list of strings, got {value!r}")
    if not value.strip():
        raise LoadError(f"{where}: empty answer")
    return value.strip()


def _read_text(path: Path) -> str:
    """The file as text (UTF-8, a BOM dropped, line ends kept); unreadable or non-UTF-8 files raise `LoadError`."""
    try:
        data = path.read_bytes()
    except OSError as err:
        raise LoadError(f"{path}: cannot read ({err.strerror})") from err
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        raise LoadError(f"{path}:{line}: not UTF-8 text (byte 0x{data[err.start]:02x})") from err


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """Every object of a JSONL file, read as question files are; a bad line raises `LoadError` `FILE:LINE: …`."""
    path = Path(path)
    return [row for _, row in _jsonl_objects(path, _read_text(path))]


def _jsonl_objects(path: Path, text: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for every non-blank line of `text`, read from `path`; lines end at line feeds only
    (JSON strings may hold U+2028 or U+0085 unescaped, where `str.splitlines` would also cut)."""
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            raise LoadError(f"{path}:{number}: invalid JSON: {err.msg} at column {err.colno}") from err
        except (ValueError, RecursionError) as err:  # an integer over 4300 digits, arrays nested too deeply
            raise LoadError(f"{path}:{number}: {_beyond_limits(err)}") from None
        if not isinstance(row, dict):
            raise LoadError(f"{path}:{number}: expected a JSON object, got {type(row).__name__}")
        _check_strings(row, f"{path}:{number}")
        yield number, row


def _jsonl_rows(path: Path, text: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """(`FILE:LINE`, object) for every question line of a JSONL file; one JSON value over several lines is named."""
    if "\n" in text.strip() and _one_json_value(text):  # then its first line is not JSON on its own
        raise LoadError(
            f"{path}: one JSON value over several lines, not one question object a line "
            "(JSONL); a .json file may also be an array of question objects"
        )
    for number, row in _jsonl_objects(path, text):
        yield f"{path}:{number}", row


def _one_json_value(text: str) -> bool:
    """Whether the whole text parses as a single JSON value."""
    try:
        json.loads(text)
    except (ValueError, RecursionError):  # JSONDecodeError is a ValueError
        return False
    return True


def _json_array_rows(path: Path, text: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """(`FILE:item N`, object) for every element of a JSON array file."""
    try:
        items = json.loads(text)
    except json.JSONDecodeError as err:
        raise LoadError(f"{path}:{err.lineno}: invalid JSON: {err.msg} at column {err.colno}") from err
    except (ValueError, RecursionError) as err:
        raise LoadError(f"{path}:{_line_beyond_limits(text, err)}: {_beyond_limits(err)}") from None
    for number, row in enumerate(items, start=1):
        where = f"{path}:item {number}"
        if not isinstance(row, dict):
            raise LoadError(f"{where}: expected a JSON object, got {type(row).__name__}")
        _check_strings(row, where)
        yield where, row


_LONG_INTEGER = re.compile(r"\d{4301}")
_MAX_DEPTH = 500  # far below where json's recursion fails, far above any question record


def _beyond_limits(err: Exception) -> str:
    """The reason a JSON text that parses by the grammar was refused: a huge integer or a too deep nesting."""
    if isinstance(err, RecursionError):
        return "invalid JSON: arrays or objects nested too deeply"
    digits = re.search(r"has (\d+) digits", str(err))
    return (
        f"invalid JSON: an integer of {digits.group(1)} digits (at most 4300 are read)"
        if digits
        else f"invalid JSON: {err}"
    )


def _line_beyond_limits(text: str, err: Exception) -> int:
    """The line of `text` where the integer too long or the nesting too deep (that `err` reports) starts."""
    if not isinstance(err, RecursionError):
        found = _LONG_INTEGER.search(text)
        return text.count("\n", 0, found.start()) + 1 if found else 1
    depth, in_string, escaped = 0, False, False
    for i, char in enumerate(text):
        if in_string:
            escaped, in_string = (not escaped and char == "\\"), in_string and (escaped or char != '"')
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > _MAX_DEPTH:
                return text.count("\n", 0, i) + 1
        elif char in "]}":
            depth -= 1
    return 1


def _check_strings(value: Any, where: str) -> None:
    """LoadError naming `where` when a string in `value` (keys included) holds a lone surrogate (`"\\ud800"` in
    JSON): Python reads it, but it cannot be written back as UTF-8, so the eval would fail at its first write."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as err:
            raise LoadError(
                f"{where}: a lone surrogate \\u{ord(value[err.start]):04x} at character {err.start + 1} "
                f"of the string starting {value[:40]!r}"
            ) from None
    elif isinstance(value, dict):
        for key, item in value.items():
            _check_strings(key, where)
            _check_strings(item, where)
    elif isinstance(value, list):
        for item in value:
            _check_strings(item, where)


def _csv_rows(path: Path, text: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """(`FILE:LINE`, row) for every CSV row, decrypted when the header marks an encrypted benchmark."""
    reader = csv.DictReader(io.StringIO(text, newline=""))
    try:
        header = [name.strip() for name in reader.fieldnames or []]  # `question, answer` names `answer`
        reader.fieldnames = header
        repeated = next((name for i, name in enumerate(header) if name in header[:i]), None)
        if repeated is not None:
            raise LoadError(f"{path}:1: column {repeated!r} appears twice in the header")
        decrypt, fields = _csv_scheme(header)
        keyless = () if decrypt is not None else _csv_scheme([*header, "canary"])[1]  # had it a canary
        for row in reader:
            where = f"{path}:{reader.line_num}"
            if None in row:
                raise LoadError(f"{where}: {len(header) + len(row[None])} fields, the header has {len(header)}")
            if any(value is None for value in row.values()):
                raise LoadError(f"{where}: fewer fields than the header's {len(header)}")
            if decrypt is not None:
                row = _decrypt_row(row, decrypt, fields, where=where)
            elif keyless and all(_is_base64(row[field]) for field in keyless[:2]):
                raise LoadError(
                    f"{where}: field {keyless[0]!r} looks encrypted (base64) but the file has no "
                    "'canary' column (the decryption key)"
                )
            yield where, row
    except csv.Error as err:
        raise LoadError(f"{path}:{reader.reader.line_num}: {err}") from err


def _csv_scheme(header: list[str]) -> tuple[Callable[[str, str], str] | None, tuple[str, ...]]:
    """The decryption (and its fields) that a CSV header announces; (None, ()) for a plain CSV.

    A header that would announce one but for its `canary` column is read as plain, unless its question
    and answer are base64 (ciphertext without its key, an error).
    """
    columns = set(header)
    if "canary" in columns and {"problem", "answer"} <= columns:
        return decrypt_browsecomp, BROWSECOMP_ENCRYPTED
    if "canary" in columns and {"prompt", "answer"} <= columns:
        return decrypt_xbench, XBENCH_ENCRYPTED
    return None, ()


def _is_base64(value: str) -> bool:
    """Whether `value` is non-empty strict base64 once stripped, as the encrypted benchmark fields are."""
    try:
        return bool(base64.b64decode(value.strip(), validate=True))
    except ValueError:  # binascii.Error, or a non-ASCII character
        return False


def _decrypt_row(
    row: dict[str, str], decrypt: Callable[[str, str], str], fields: tuple[str, ...], *, where: str
) -> dict[str, str]:
    """A copy of `row` with its encrypted `fields` decrypted by the row's own canary."""
    canary = row["canary"]
    if not canary.strip():
        raise LoadError(f"{where}: empty canary (the decryption key)")
    plain = dict(row)
    for field in fields:
        if not row.get(field):
            continue
        try:
            plain[field] = decrypt(row[field], canary)
        except UnicodeDecodeError as err:
            raise LoadError(f"{where}: field {field!r} does not decrypt to UTF-8 with this row's canary") from err
        except ValueError as err:  # binascii.Error, or a non-ASCII character
            raise LoadError(f"{where}: field {field!r} is not valid base64 ({err})") from err
    return plain
