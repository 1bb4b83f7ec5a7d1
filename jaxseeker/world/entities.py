"""Typed entities and typed relations: the facts a world is made of."""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Mapping
from typing import Any


@dataclasses.dataclass(frozen=True)
class Entity:
    """A typed entity: numbers and dates (ISO `YYYY-MM-DD`) as attributes, labels as categories, its page url."""

    id: str
    type: str
    name: str
    numbers: Mapping[str, float] = dataclasses.field(default_factory=dict)
    dates: Mapping[str, str] = dataclasses.field(default_factory=dict)
    labels: Mapping[str, str] = dataclasses.field(default_factory=dict)
    url: str = ""

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "id": self.id,
            "type": self.type,
            "name": self.name,
            "numbers": dict(self.numbers),
            "dates": dict(self.dates),
            "labels": dict(self.labels),
            "url": self.url,
        }

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> Entity:
        """Inverse of `to_json`; a missing key raises KeyError naming it."""
        for key in ("id", "type", "name"):
            if key not in d:
                raise KeyError(f"entity is missing key {key!r}")
        return Entity(
            id=str(d["id"]),
            type=str(d["type"]),
            name=str(d["name"]),
            numbers=dict(d.get("numbers", {})),
            dates=dict(d.get("dates", {})),
            labels=dict(d.get("labels", {})),
            url=str(d.get("url", "")),
        )

    def attr(self, name: str) -> float | str | None:
        """The value of a number or date attribute, or None."""
        if name in self.numbers:
            return self.numbers[name]
        return self.dates.get(name)


@dataclasses.dataclass(frozen=True, order=True)
class Relation:
    """A directed typed edge `src --rel--> dst` between entity ids."""

    src: str
    rel: str
    dst: str

    def to_json(self) -> list[str]:
        """A JSON-ready triple."""
        return [self.src, self.rel, self.dst]

    @staticmethod
    def from_json(t: list[str]) -> Relation:
        """Inverse of `to_json`."""
        if not isinstance(t, list) or len(t) != 3:
            raise ValueError(f"relation must be a [src, rel, dst] triple, got {t!r}")
        return Relation(str(t[0]), str(t[1]), str(t[2]))


def iso_date(year: int, month: int = 1, day: int = 1) -> str:
    """An ISO date string `YYYY-MM-DD` (years below 1000 zero-padded, so strings sort as dates)."""
    return datetime.date(year, month, day).isoformat()


def date_parts(iso: str) -> tuple[int, int, int]:
    """(year, month, day) of an ISO date string."""
    d = datetime.date.fromisoformat(iso)
    return d.year, d.month, d.day
