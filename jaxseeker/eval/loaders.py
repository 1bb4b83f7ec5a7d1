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
import codecs
import csv
import hashlib
import io
import json
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from jaxseeker.errors import InputError
from jaxseeker.jsonl import JsonError, decode_value, json_values, loads, quote

QUESTION_KEYS = ("question", "query", "problem", "Question", "prompt")
ANSWER_KEYS = ("answer", "Answer", "Final answer", "final_answer", "answers")
ID_KEYS = ("id", "task_id", "question_id", "qid")
RENAMED_KEYS = {"Level": "level", "problem_topic": "topic"}

BROWSECOMP_ENCRYPTED = ("problem", "answer")
XBENCH_ENCRYPTED = ("prompt", "answer", "reference_steps")
_WHITESPACE = json.decoder.WHITESPACE  # JSON's whitespace: space, tab, CR, LF
MAX_FILE_BYTES = 256 << 20  # a CSV or JSON array file is read whole: far above any benchmark (GAIA's is < 1 MB)


class LoadError(InputError):
    """A question file that cannot be read; the message starts with `FILE:ROW: reason`."""


def load_questions(path: str | Path) -> list[dict[str, Any]]:
    """Read a benchmark file, picking the loader from its suffix and header; see the module doc."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".csv":
        rows = _csv_rows(path, _read_text(path))
    elif suffix == ".json" and _starts_with_bracket(path):
        rows = _json_array_rows(path, _read_text(path))
    elif suffix in (".jsonl", ".json"):
        rows = _jsonl_rows(path)
    else:
        raise LoadError(f"{path}: unsupported file type {suffix!r} (expected .jsonl, .json or .csv)")
    records: list[dict[str, Any]] = []
    first_row_of: dict[str, str] = {}
    for number, (where, row) in enumerate(rows, start=1):
        record = normalize_row(row, where=where, default_id=f"{path.stem}:{number}")
        if record["id"] in first_row_of:
            raise LoadError(f"{where}: duplicate id {quote(record['id'])} (first at {first_row_of[record['id']]})")
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
        raise LoadError(f"{where}: field {question_key!r} must be a non-empty string, got {quote(question)}")
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
        raise LoadError(f"{where}: answers nest at most two lists deep, got {quote(value)}")
    answers = list(dict.fromkeys(_answer_text(alias, where=where) for alias in flat))
    if not answers:
        raise LoadError(f"{where}: empty answer list")
    return answers[0] if len(answers) == 1 else answers


def _answer_text(value: Any, *, where: str) -> str:
    """One gold answer as stripped text (numbers are written out); empty or other types are errors."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        raise LoadError(f"{where}: answer must be a string or a list of strings, got {quote(value)}")
    if not value.strip():
        raise LoadError(f"{where}: empty answer")
    return value.strip()


def _read_text(path: Path) -> str:
    """The file as text (UTF-8, a BOM dropped, line ends kept), for the formats read whole (CSV, a JSON array);
    unreadable, non-UTF-8 or files over `MAX_FILE_BYTES` raise `LoadError`."""
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise LoadError(
                f"{path}: {size:,} bytes, over the limit of {MAX_FILE_BYTES:,} for a CSV or JSON array file "
                "(write it as JSONL, one question a line)"
            )
        data = path.read_bytes()
    except OSError as err:
        raise LoadError(f"{path}: cannot read ({err.strerror})") from err
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        raise LoadError(f"{path}:{line}: not UTF-8 text (byte 0x{data[err.start]:02x})") from err


def _starts_with_bracket(path: Path) -> bool:
    """Whether the file's first character other than a BOM or whitespace is `[` (a JSON array, not JSONL)."""
    try:
        with path.open("rb") as f:
            while chunk := f.read(1 << 16):
                head = chunk.removeprefix(codecs.BOM_UTF8).lstrip()
                if head:
                    return head.startswith(b"[")
    except OSError as err:
        raise LoadError(f"{path}: cannot read ({err.strerror})") from err
    return False


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """Every object of a JSONL file, read as question files are; a bad line raises `LoadError` `FILE:LINE: …`."""
    return [row for _, row in _jsonl_objects(Path(path))]


def _jsonl_objects(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for every non-blank line of a JSONL file, read by `jsonl.json_values` (its bounds on
    line size, nesting and numbers); lines end at line feeds only (JSON strings may hold U+2028 unescaped)."""
    try:
        first = True
        for number, row, reason in json_values(path):
            if reason is not None:
                if first and reason.startswith("invalid JSON") and _one_json_value(path):
                    raise LoadError(
                        f"{path}: one JSON value over several lines, not one question object a line "
                        "(JSONL); a .json file may also be an array of question objects"
                    )
                raise LoadError(f"{path}:{number}: {reason}")
            first = False
            if not isinstance(row, dict):
                raise LoadError(f"{path}:{number}: expected a JSON object, got {type(row).__name__}")
            _check_strings(row, f"{path}:{number}")
            yield number, row
    except OSError as err:
        raise LoadError(f"{path}: cannot read ({err.strerror})") from err


def _jsonl_rows(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """(`FILE:LINE`, object) for every question line of a JSONL file; one JSON value over several lines is named."""
    for number, row in _jsonl_objects(path):
        yield f"{path}:{number}", row


def _one_json_value(path: Path) -> bool:
    """Whether the whole file (of at most `MAX_FILE_BYTES`) parses as a single JSON value over several lines."""
    if path.stat().st_size > MAX_FILE_BYTES:
        return False
    try:
        text = path.read_bytes().decode("utf-8-sig")
        loads(text)
    except (UnicodeDecodeError, JsonError):
        return False
    return "\n" in text.strip()


def _json_array_rows(path: Path, text: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """(`FILE:item N`, object) for every element of a JSON array file, parsed one element at a time
    (`jsonl.decode_value`), so that a refused element is named by the line it starts on."""

    def line_of(pos: int | None) -> int:
        return text.count("\n", 0, pos or 0) + 1

    pos = _WHITESPACE.match(text, _WHITESPACE.match(text).end() + 1).end()  # past the `[` (`_starts_with_bracket`)
    number = 0
    while number or text[pos : pos + 1] != "]":  # `[]`, but not `[1,]`
        number += 1
        try:
            row, pos = decode_value(text, pos)
        except JsonError as err:
            raise LoadError(f"{path}:{line_of(err.pos)}: {err}") from None
        where = f"{path}:item {number}"
        if not isinstance(row, dict):
            raise LoadError(f"{where}: expected a JSON object, got {type(row).__name__}")
        _check_strings(row, where)
        yield where, row
        pos = _WHITESPACE.match(text, pos).end()
        if text[pos : pos + 1] == "]":
            break
        if text[pos : pos + 1] != ",":
            raise LoadError(f"{path}:{line_of(pos)}: invalid JSON: expected ',' or ']' after item {number}")
        pos += 1
    if text[_WHITESPACE.match(text, pos + 1).end() :]:
        raise LoadError(f"{path}:{line_of(pos + 1)}: invalid JSON: more text after the array")


def _check_strings(value: Any, where: str) -> None:
    """LoadError naming `where` when a string in `value` (keys included) holds a lone surrogate (`"\\ud800"` in
    JSON): Python reads it, but it cannot be written back as UTF-8, so the eval would fail at its first write."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as err:
            raise LoadError(
                f"{where}: a lone surrogate \\u{ord(value[err.start]):04x} at character {err.start + 1} "
                f"of the string starting {quote(value[:40])}"
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
            raise LoadError(f"{path}:1: column {quote(repeated)} appears twice in the header")
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
