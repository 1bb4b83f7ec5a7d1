"""A synthesised question, the draft it is made from, and JSONL input / output."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from jaxseeker.errors import InputError
from jaxseeker.jsonl import json_lines
from jaxseeker.world import Query


@dataclasses.dataclass(frozen=True)
class QARecord:
    """One question: text, answer, recipe tag, level (1 one hop, 2 chain, 3 coupled + obfuscated), evidence."""

    question: str
    answer: str
    tag: str
    level: int
    meta: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict with the five keys."""
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class Draft:
    """A question before the shared checks: its constraints, the true assignment of every variable, its phrasing."""

    query: Query
    binding: tuple[str, ...]
    tag: str
    obfuscations: tuple[str, ...] = ()
    question: str | None = None
    style: int = 0
    natural: bool = False  # described entities, only informative clues, natural text (`clues`, `render`)
    declarative: bool = False  # an entity question said as a description in sentences ending in the question
    meta: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def truth(self) -> str:
        """The entity id bound to the answer variable."""
        return self.binding[self.query.target]


def write_jsonl(records: Iterable[QARecord], path: str | Path) -> int:
    """Write records one JSON object a line; returns how many."""
    n = 0
    with open(path, "w", encoding="utf-8") as f:
        for r in records:
            f.write(json.dumps(r.to_json(), ensure_ascii=False) + "\n")
            n += 1
    return n


def read_jsonl(path: str | Path) -> Iterator[QARecord]:
    """Read records written by `write_jsonl`; a bad line raises InputError naming FILE:LINE."""
    for n, d in json_lines(path):
        try:
            yield QARecord(str(d["question"]), str(d["answer"]), str(d["tag"]), int(d["level"]), dict(d["meta"]))
        except (KeyError, TypeError, ValueError) as err:
            keys = "question, answer, tag, level, meta"
            raise InputError(f"{path}:{n}: bad QA record ({err!r}); keys: {keys}") from None
