"""A world: typed entities, typed relations, one page per entity and a BM25 corpus over the pages."""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Collection, Iterable, Mapping
from typing import Any, NamedTuple

from jaxseeker.world.corpus import Corpus, Page
from jaxseeker.world.entities import Entity, Relation
from jaxseeker.world.pages import entity_url, write_pages
from jaxseeker.world.query import DateIn, NameInitial, NumberIn, Pred, Query, match


class Neighbour(NamedTuple):
    """One edge seen from an entity: the relation, `out` (entity is src) or `in`, and the other id."""

    rel: str
    direction: str
    id: str


class World:
    """Entities and relations with lookup indexes, pages (written from the facts unless given) and a corpus."""

    def __init__(
        self,
        entities: Iterable[Entity],
        relations: Iterable[Relation],
        pages: Iterable[Page] | None = None,
        *,
        info: Mapping[str, Any] | None = None,
    ):
        self.info: dict[str, Any] = dict(info or {})
        host = f"{self.info.get('source', 'world')}.jaxseeker.local"
        self.entities: dict[str, Entity] = {}
        for e in entities:
            if e.id in self.entities:
                raise ValueError(f"duplicate entity id {e.id!r}")
            self.entities[e.id] = e if e.url else dataclasses.replace(e, url=entity_url(host, e.name))
        self.relations: list[Relation] = sorted(set(relations), key=lambda r: (r.src, r.rel, r.dst))  # = Relation order
        for r in self.relations:
            for end in (r.src, r.dst):
                if end not in self.entities:
                    raise ValueError(f"relation {r.to_json()} names unknown entity {end!r}")
        self._by_type: dict[str, list[str]] = {}
        for i, e in self.entities.items():
            self._by_type.setdefault(e.type, []).append(i)
        out: dict[tuple[str, str], list[str]] = {}
        inn: dict[tuple[str, str], list[str]] = {}
        self._adj: dict[str, list[Neighbour]] = {i: [] for i in self.entities}
        for r in self.relations:
            out.setdefault((r.src, r.rel), []).append(r.dst)
            inn.setdefault((r.dst, r.rel), []).append(r.src)
            self._adj[r.src].append(Neighbour(r.rel, "out", r.dst))
            self._adj[r.dst].append(Neighbour(r.rel, "in", r.src))
        self._edges = {(r.src, r.rel, r.dst) for r in self.relations}
        self._out = {k: tuple(v) for k, v in out.items()}
        self._in = {k: tuple(v) for k, v in inn.items()}
        self._by_url = {e.url: i for i, e in self.entities.items()}
        if len(self._by_url) != len(self.entities):
            raise ValueError("two entities share a page url")
        self.pages: list[Page] = list(pages) if pages is not None else write_pages(self.entities, self.relations)
        self._page_by_url = {p.url: p for p in self.pages}
        self._corpus: Corpus | None = None
        self._value_index: dict[tuple[str, str], tuple[list, list[str]]] = {}
        self._initial_index: dict[str, dict[tuple[str, str], list[str]]] = {}

    def __len__(self) -> int:
        return len(self.entities)

    @property
    def corpus(self) -> Corpus:
        """The BM25 corpus over the pages (built on first use)."""
        if self._corpus is None:
            self._corpus = Corpus(self.pages)
        return self._corpus

    def entity(self, id: str) -> Entity:
        """The entity with this id; KeyError names it when absent."""
        try:
            return self.entities[id]
        except KeyError:
            raise KeyError(f"no entity with id {id!r}") from None

    def ids_of_type(self, type: str | None) -> Collection[str]:
        """Ids of every entity of `type` (all entities for None), in build order."""
        if type is None:
            return self.entities.keys()
        return self._by_type.get(type, [])

    def types(self) -> list[str]:
        """The entity types present, sorted."""
        return sorted(self._by_type)

    def relation_types(self) -> list[str]:
        """The relation types present, sorted."""
        return sorted({r.rel for r in self.relations})

    def targets(self, src: str, rel: str) -> tuple[str, ...]:
        """Ids `y` with `src --rel--> y`."""
        return self._out.get((src, rel), ())

    def sources(self, dst: str, rel: str) -> tuple[str, ...]:
        """Ids `x` with `x --rel--> dst`."""
        return self._in.get((dst, rel), ())

    def has_edge(self, src: str, rel: str, dst: str) -> bool:
        """True when `src --rel--> dst` is a fact."""
        return (src, rel, dst) in self._edges

    def neighbours(self, id: str, rel: str | None = None) -> list[Neighbour]:
        """Every edge touching `id` (optionally of one relation), outgoing first in relation order."""
        adj = self._adj[id]
        return [n for n in adj if rel is None or n.rel == rel]

    def degree(self, id: str) -> int:
        """How many edges touch `id`."""
        return len(self._adj[id])

    def url(self, id: str) -> str:
        """The page url of entity `id`."""
        return self.entity(id).url

    def entity_at(self, url: str) -> Entity | None:
        """The entity whose page is at `url`, or None."""
        i = self._by_url.get(url)
        return None if i is None else self.entities[i]

    def page(self, url: str) -> Page | None:
        """The page at `url`, or None."""
        return self._page_by_url.get(url)

    def candidates(self, type: str | None, pred: Pred) -> Collection[str] | None:
        """Ids of `type` that may satisfy `pred`, from a sorted index (built on first use); None: no index."""
        if type is None:
            return None
        if isinstance(pred, (DateIn, NumberIn)):
            key = (type, pred.attr)
            if key not in self._value_index:
                table = self.entities
                pairs = sorted((v, i) for i in self.ids_of_type(type) if (v := table[i].attr(pred.attr)) is not None)
                self._value_index[key] = ([v for v, _ in pairs], [i for _, i in pairs])
            values, ids = self._value_index[key]
            lo = 0 if pred.lo is None else bisect.bisect_left(values, pred.lo)
            hi = len(values) if pred.hi is None else bisect.bisect_right(values, pred.hi)
            return ids[lo:hi]
        if isinstance(pred, NameInitial):
            if type not in self._initial_index:
                index: dict[tuple[str, str], list[str]] = {}
                for i in self.ids_of_type(type):
                    words = self.entities[i].name.split()
                    if words:
                        index.setdefault(("first", words[0][:1].upper()), []).append(i)
                        index.setdefault(("last", words[-1][:1].upper()), []).append(i)
                self._initial_index[type] = index
            return self._initial_index[type].get((pred.position, pred.letter.upper()), [])
        return None

    def match(self, query: Query, within: Collection[str] | None = None, limit: int | None = None) -> list[str]:
        """Sorted ids of every entity the query's target can be bound to (see `query.match`)."""
        return match(self, query, within, limit)

    def subgraph(self, ids: Iterable[str]) -> World:
        """The world restricted to `ids` and the relations among them (pages rewritten from those facts)."""
        keep = {i for i in ids}
        return World(
            [self.entities[i] for i in self.entities if i in keep],
            [r for r in self.relations if r.src in keep and r.dst in keep],
            info={**self.info, "subgraph_of": self.info.get("key", "")},
        )
