"""A `pages` world opened from its directory: the read interface of `World`, served from disk.

Every page is an entity of type `page` (named by its title, else its url) with id `p0000042`; a link
between two pages of the corpus is a `links_to` relation. Nothing is loaded per page when the world
opens: entities and pages are read on demand (recent entities are cached), links come from
memory-mapped CSR arrays, and search runs over the on-disk BM25 shards (see `pages_index`).
"""

from __future__ import annotations

import collections.abc
import functools
import json
import shutil
from collections.abc import Callable, Collection, Iterable, Iterator
from pathlib import Path
from typing import Any

from jaxseeker.errors import InputError
from jaxseeker.world.corpus import Hit, Page, snippet_of
from jaxseeker.world.entities import Entity, Relation
from jaxseeker.world.graph import Neighbour, World
from jaxseeker.world.pages_index import ShardedIndex
from jaxseeker.world.pages_links import FILES as LINK_FILES
from jaxseeker.world.pages_links import LinkGraph
from jaxseeker.world.pages_store import DATABASE, OFFSETS, RECORDS, PageStore
from jaxseeker.world.query import DateIn, LabelIs, NameInitial, NumberIn, Pred, Query, match

STORE = "pages"  # world.json "store" of a pages world directory
LAYOUT = 1  # bump when the files change: cached worlds are then rebuilt
TYPE, REL = "page", "links_to"
_META = ("store", "layout", "pages", "links", "shards", "id_width")  # world.json keys that are not `info`


def is_pages_world_dir(directory: str | Path) -> bool:
    """True when `directory` holds a pages world written by `write_pages_world`."""
    d = Path(directory)
    try:
        meta = json.loads((d / "world.json").read_text())
    except (OSError, ValueError):
        return False
    files = (RECORDS, OFFSETS, DATABASE, *LINK_FILES)
    return isinstance(meta, dict) and meta.get("store") == STORE and all((d / f).is_file() for f in files)


def open_pages_world(directory: str | Path) -> PagesWorld:
    """The pages world saved in `directory`: its arrays are memory-mapped, no page is read."""
    d = Path(directory)
    meta = json.loads((d / "world.json").read_text())
    if meta.get("store") != STORE or meta.get("layout") != LAYOUT:
        raise InputError(
            f"{d / 'world.json'}: not a pages world of layout {LAYOUT} "
            f"(store {meta.get('store')!r}, layout {meta.get('layout')!r}); rebuild it"
        )
    return PagesWorld(d, meta)


class _Entities(collections.abc.Mapping):
    """Entity by id, read on demand; iterates ids in page order; `values` / `items` stream the page table."""

    def __init__(self, world: PagesWorld):
        self._world = world

    def __getitem__(self, id: str) -> Entity:
        i = self._world.index_of(id)
        if i is None:
            raise KeyError(id)
        return self._world.entity(id)

    def __contains__(self, id: object) -> bool:
        return isinstance(id, str) and self._world.index_of(id) is not None

    def __iter__(self) -> Iterator[str]:
        return map(self._world.id_at, range(len(self._world)))

    def __len__(self) -> int:
        return len(self._world)

    def values(self) -> collections.abc.ValuesView:
        """Every entity in id order, streamed."""
        return _StreamedValues(self)

    def items(self) -> collections.abc.ItemsView:
        """(id, entity) in id order, streamed."""
        return _StreamedItems(self)

    def stream(self) -> Iterator[Entity]:
        """Every entity in id order, read from the page table in batches."""
        w = self._world
        for i, url, title in w.store.heads():
            yield Entity(w.id_at(i), TYPE, title or url, url=url)


class _StreamedValues(collections.abc.ValuesView):
    def __iter__(self) -> Iterator[Entity]:
        return self._mapping.stream()


class _StreamedItems(collections.abc.ItemsView):
    def __iter__(self) -> Iterator[tuple[str, Entity]]:
        return ((e.id, e) for e in self._mapping.stream())


class _Sequence(collections.abc.Sequence):
    """A read-only sequence of `size` items made by `item(index)` (slices give lists), iterated by `iterate()`
    when given (a sequential read instead of one look-up per item)."""

    def __init__(self, size: int, item: Callable[[int], Any], iterate: Callable[[], Iterator[Any]] | None = None):
        self._size, self._item, self._iterate = size, item, iterate

    def __len__(self) -> int:
        return self._size

    def __iter__(self) -> Iterator[Any]:
        return self._iterate() if self._iterate is not None else (self._item(i) for i in range(self._size))

    def __getitem__(self, k: int | slice) -> Any:
        if isinstance(k, slice):
            return [self._item(i) for i in range(*k.indices(self._size))]
        if k < 0:
            k += self._size
        if not 0 <= k < self._size:
            raise IndexError(f"index {k} out of range for {self._size} items")
        return self._item(k)


class PagesCorpus:
    """The search and page-reading side of a pages world, with the interface of `Corpus`."""

    title_index = False  # no `search(…, title_first=True)`: the sharded index keeps no title index

    def __init__(self, store: PageStore, index: ShardedIndex, *, snippet_words: int = 30):
        self.store, self.index, self.snippet_words = store, index, snippet_words
        self.pages: collections.abc.Sequence[Page] = _Sequence(len(store), store.page)

    def __len__(self) -> int:
        return len(self.store)

    def page(self, url: str) -> Page | None:
        """The page at `url`, or None."""
        i = self.store.id_of(url)
        return None if i is None else self.store.page(i)

    def search(self, query: str, k: int = 5, *, title_first: bool = False) -> list[Hit]:
        """Top-`k` pages for `query` by BM25 over every shard (fewer when fewer pages hold a query word).
        `title_first` (`Corpus.search`'s) needs a title index this sharded store does not keep: an error."""
        if title_first:
            raise ValueError(
                "title_first search (tools.title_first) is not available for a pages world: its sharded "
                "index keeps no title index; set tools.title_first: false"
            )
        hits = []
        for i, score in self.index.search(query, k):
            p = self.store.page(i)
            hits.append(Hit(p.url, p.title, snippet_of(p.text, self.snippet_words), score))
        return hits

    def search_many(self, queries: Iterable[str], k: int = 5, *, title_first: bool = False) -> list[list[Hit]]:
        """`search` for each query."""
        return [self.search(q, k, title_first=title_first) for q in queries]


class PagesWorld:
    """A pages world read from disk; offers what tools, the matcher and the synthesisers use of a `World`."""

    def __init__(self, directory: str | Path, meta: dict[str, Any]):
        self.directory = Path(directory)
        self.info: dict[str, Any] = {k: v for k, v in meta.items() if k not in _META}
        self.store = PageStore(self.directory)
        self.links = LinkGraph(self.directory)
        self._n, self._width = int(meta["pages"]), int(meta["id_width"])
        self._id_format = f"p%0{self._width}d"
        if len(self.store) != self._n:
            raise ValueError(f"{self.directory / OFFSETS}: {len(self.store)} pages, world.json says {self._n}")
        self.entities: collections.abc.Mapping[str, Entity] = _Entities(self)
        self.relations: collections.abc.Sequence[Relation] = _Sequence(
            len(self.links), self._relation, self._stream_relations
        )
        self.corpus = PagesCorpus(self.store, ShardedIndex(self.directory, meta["shards"], self._n))
        self.pages: collections.abc.Sequence[Page] = self.corpus.pages
        self._entity = functools.lru_cache(maxsize=1 << 16)(self._read_entity)  # by id: the matcher asks often

    def __len__(self) -> int:
        return self._n

    def __repr__(self) -> str:
        return f"PagesWorld({str(self.directory)!r}, {self._n} pages, {len(self.links)} links)"

    # ids ------------------------------------------------------------------------------------------
    def id_at(self, i: int) -> str:
        """The entity id of page `i`."""
        return self._id_format % i

    def index_of(self, id: str) -> int | None:
        """The page number of entity `id`, or None when no page has that id."""
        if len(id) != self._width + 1 or id[0] != "p" or not id[1:].isdigit():
            return None
        i = int(id[1:])
        return i if i < self._n else None

    def _index(self, id: str) -> int:
        i = self.index_of(id)
        if i is None:
            raise KeyError(f"no entity with id {id!r}")
        return i

    def _ids(self, pages: list[int]) -> tuple[str, ...]:
        return tuple(map(self._id_format.__mod__, pages))

    # entities -------------------------------------------------------------------------------------
    def _read_entity(self, id: str) -> Entity:
        url, title = self.store.head(self._index(id))
        return Entity(id, TYPE, title or url, url=url)

    def _relation(self, k: int) -> Relation:
        src, dst = self.links.edge(k)
        return Relation(self.id_at(src), REL, self.id_at(dst))

    def _stream_relations(self) -> Iterator[Relation]:
        return (Relation(self.id_at(s), REL, self.id_at(t)) for s, t in self.links.edges())

    def entity(self, id: str) -> Entity:
        """The entity with this id; KeyError names it when absent."""
        return self._entity(id)

    def ids_of_type(self, type: str | None) -> Collection[str]:
        """Ids of every entity of `type` (all pages for None or "page"), in page order."""
        return self.entities.keys() if type in (None, TYPE) else []

    def types(self) -> list[str]:
        """The entity types present."""
        return [TYPE] if self._n else []

    def relation_types(self) -> list[str]:
        """The relation types present."""
        return [REL] if len(self.links) else []

    def url(self, id: str) -> str:
        """The page url of entity `id`."""
        return self.entity(id).url

    def entity_at(self, url: str) -> Entity | None:
        """The entity whose page is at `url`, or None."""
        i = self.store.id_of(url)
        return None if i is None else self._entity(self.id_at(i))

    def page(self, url: str) -> Page | None:
        """The page at `url`, or None."""
        return self.corpus.page(url)

    # links ----------------------------------------------------------------------------------------
    def targets(self, src: str, rel: str) -> tuple[str, ...]:
        """Ids `y` with `src --rel--> y`."""
        i = self.index_of(src)
        return () if i is None or rel != REL else self._ids(self.links.targets(i).tolist())

    def sources(self, dst: str, rel: str) -> tuple[str, ...]:
        """Ids `x` with `x --rel--> dst`."""
        i = self.index_of(dst)
        return () if i is None or rel != REL else self._ids(self.links.sources(i).tolist())

    def has_edge(self, src: str, rel: str, dst: str) -> bool:
        """True when `src --rel--> dst` is a link."""
        i, j = self.index_of(src), self.index_of(dst)
        return rel == REL and i is not None and j is not None and self.links.has(i, j)

    def neighbours(self, id: str, rel: str | None = None) -> list[Neighbour]:
        """Every link touching `id`: outgoing first, then incoming, each by page order."""
        i = self._index(id)
        if rel not in (None, REL):
            return []
        return [Neighbour(REL, "out", j) for j in self._ids(self.links.targets(i).tolist())] + [
            Neighbour(REL, "in", j) for j in self._ids(self.links.sources(i).tolist())
        ]

    def degree(self, id: str) -> int:
        """How many links touch `id`."""
        return self.links.degree(self._index(id))

    # queries --------------------------------------------------------------------------------------
    def candidates(self, type: str | None, pred: Pred) -> Collection[str] | None:
        """Ids of `type` that may satisfy `pred` (pages have no dates, numbers or labels; initials come from an
        index)."""
        if type is None:
            return None
        if type != TYPE or isinstance(pred, (DateIn, NumberIn, LabelIs)):
            return []
        if isinstance(pred, NameInitial):
            return [self.id_at(i) for i in self.store.with_initial(pred.position, pred.letter)]
        return None

    def match(self, query: Query, within: Collection[str] | None = None, limit: int | None = None) -> list[str]:
        """Sorted ids of every entity the query's target can be bound to (see `query.match`)."""
        return match(self, query, within, limit)

    def subgraph(self, ids: Iterable[str]) -> World:
        """An in-memory `World` of these pages (their own texts) and the links among them."""
        keep = sorted({self._index(i) for i in ids})
        names = {self.id_at(i) for i in keep}
        entities = [self._entity(i) for i in sorted(names)]
        relations = [Relation(s, REL, t) for s in sorted(names) for t in self.targets(s, REL) if t in names]
        pages = [self.store.page(i) for i in keep]
        return World(entities, relations, pages, info={**self.info, "subgraph_of": self.info.get("key", "")})

    def copy_to(self, directory: str | Path) -> Path:
        """Copy the world's files into `directory` (created), which then opens as this world."""
        return Path(shutil.copytree(self.directory, directory, dirs_exist_ok=True))
