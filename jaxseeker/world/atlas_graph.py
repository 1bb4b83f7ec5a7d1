"""The graph the atlas sources fill: nodes with candidate names, a set of edges, then uniquely named entities."""

from __future__ import annotations

import dataclasses
import datetime
import math
import unicodedata

from jaxseeker.world.entities import Entity, Relation


def fold(name: str) -> str:
    """Case-, accent- and spacing-insensitive form of a name."""
    if name.isascii():
        return " ".join(name.casefold().split())
    plain = "".join(c for c in unicodedata.normalize("NFKD", name.casefold()) if not unicodedata.combining(c))
    return " ".join(plain.split())


def km(lat1: float, lon1: float, lat2: float, lon2: float) -> float:
    """Great-circle distance in kilometres."""
    p1, p2 = math.radians(lat1), math.radians(lat2)
    a = math.sin((p2 - p1) / 2) ** 2 + math.cos(p1) * math.cos(p2) * math.sin(math.radians(lon2 - lon1) / 2) ** 2
    return 6371.0 * 2 * math.asin(math.sqrt(min(1.0, a)))


def iso_or_none(year: int | None, month: int | None = 1, day: int | None = 1) -> str | None:
    """`YYYY-MM-DD`, or None when a part is missing or the date does not exist."""
    if year is None or month is None or day is None:
        return None
    try:
        return datetime.date(int(year), int(month), int(day)).isoformat()
    except ValueError:
        return None


@dataclasses.dataclass
class Node:
    """An entity being built: candidate names (preferred first, then qualified fallbacks) and attributes."""

    id: str
    type: str
    names: list[str]
    numbers: dict = dataclasses.field(default_factory=dict)
    dates: dict = dataclasses.field(default_factory=dict)
    labels: dict = dataclasses.field(default_factory=dict)


class GraphBuilder:
    """Nodes by id (the first definition wins) and a set of typed edges."""

    def __init__(self):
        self.nodes: dict[str, Node] = {}
        self.edges: set[Relation] = set()

    def node(self, id: str, type: str, names: list[str], **fields) -> Node:
        """The node `id`, created with these names and fields unless it exists."""
        if id not in self.nodes:
            self.nodes[id] = Node(id, type, [" ".join(n.split()) for n in names], **fields)
        return self.nodes[id]

    def link(self, src: str, rel: str, dst: str) -> None:
        """Add the edge `src --rel--> dst`."""
        self.edges.add(Relation(src, rel, dst))

    def relations(self) -> list[Relation]:
        """The edges, sorted."""
        return sorted(self.edges, key=lambda r: (r.src, r.rel, r.dst))

    def entities(self) -> list[Entity]:
        """Entities with unique names: the first free candidate, countries first, then the most populous, then
        by id."""
        taken: set[str] = set()
        order = sorted(
            self.nodes.values(), key=lambda n: (n.type != "country", -(n.numbers.get("population") or 0), n.id)
        )
        named = {}
        for n in order:
            name = next((c for c in n.names if fold(c) not in taken), None)
            if name is None:
                name = f"{n.names[-1]} [{n.id}]"
            taken.add(fold(name))
            named[n.id] = Entity(
                n.id,
                n.type,
                name,
                numbers={k: v for k, v in n.numbers.items() if v is not None},
                dates={k: v for k, v in n.dates.items() if v is not None},
                labels=n.labels,
            )
        return [named[i] for i in sorted(named)]
