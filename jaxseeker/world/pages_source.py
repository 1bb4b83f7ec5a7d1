"""The `pages` source: a user's JSONL corpus `{url, title, text, links}` as a link graph and a BM25 index.

Lines are read one at a time (streamed), each checked; a bad line raises ValueError naming FILE:LINE.
Every page becomes an entity of type `page` (named by its title); a link to a page of the corpus
becomes a `links_to` relation (links leaving the corpus stay on the page but make no edge).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from jaxseeker.world.corpus import Page
from jaxseeker.world.entities import Entity, Relation
from jaxseeker.world.graph import World

_REQUIRED = {"url": str, "title": str, "text": str}


def _check(obj: object, where: str) -> Page:
    if not isinstance(obj, dict):
        raise ValueError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    for key, kind in _REQUIRED.items():
        if key not in obj:
            raise ValueError(f"{where}: missing key {key!r}")
        if not isinstance(obj[key], kind):
            raise ValueError(f"{where}: key {key!r} must be a string, got {type(obj[key]).__name__}")
    links = obj.get("links", [])
    if not isinstance(links, list) or not all(isinstance(u, str) for u in links):
        raise ValueError(f"{where}: key 'links' must be a list of url strings")
    if not obj["url"]:
        raise ValueError(f"{where}: key 'url' is empty")
    return Page(url=obj["url"], title=obj["title"], text=obj["text"], links=tuple(dict.fromkeys(links)))


def read_pages_jsonl(path: str | Path) -> Iterator[Page]:
    """Stream the pages of a JSONL file; blank lines are skipped, a malformed one names FILE:LINE."""
    for _, page in _numbered_pages(path):
        yield page


def _numbered_pages(path: str | Path) -> Iterator[tuple[int, Page]]:
    p = Path(path)
    with open(p, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as err:
                raise ValueError(f"{p}:{n}: invalid JSON: {err.msg} (column {err.colno})") from None
            yield n, _check(obj, f"{p}:{n}")


def pages_world(path: str | Path) -> World:
    """A world of `page` entities and `links_to` relations from a pages JSONL file."""
    pages: list[Page] = []
    ids: dict[str, str] = {}
    for n, page in _numbered_pages(path):
        if page.url in ids:
            raise ValueError(f"{path}:{n}: duplicate url {page.url!r}")
        ids[page.url] = f"p{len(pages):07d}"
        pages.append(page)
    entities = [Entity(ids[p.url], "page", p.title or p.url, url=p.url) for p in pages]
    relations = [Relation(ids[p.url], "links_to", ids[u]) for p in pages for u in p.links if u in ids and u != p.url]
    return World(entities, relations, pages, info={"source": "pages", "path": str(Path(path).resolve())})
