"""The `pages` source: a user's JSONL corpus `{url, title, text, links}` as a link graph and a BM25 index on disk.

The build streams the file once, a line at a time: each page is checked, appended to the page store
(`pages_store`), and queued for the BM25 shard being built (`pages_index`); its link urls go to a
scratch file. A second pass over that scratch file resolves the urls to page ids and writes the link
graph (`pages_links`). Memory stays bounded whatever the corpus size: one BM25 shard, one batch of
links and sqlite's page cache (the url → id map lives in sqlite on disk).

A bad line (not JSON, not an object, a missing or mistyped key, an empty or repeated url) fails the
build with `FILE:LINE: reason`, or with `skip_bad_lines=True` is skipped and counted (world info
`bad_lines`, the first few in `bad_line_examples`). A link to a url outside the corpus stays on the
page but makes no edge.
"""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from jaxseeker.errors import InputError
from jaxseeker.jsonl import json_values
from jaxseeker.world.corpus import Page
from jaxseeker.world.pages_index import IndexWriter
from jaxseeker.world.pages_links import write_link_graph
from jaxseeker.world.pages_on_disk import LAYOUT, STORE, PagesWorld, open_pages_world
from jaxseeker.world.pages_store import PageStoreWriter

SHARD_CHARS = 32_000_000  # characters of page text per BM25 shard; indexing one takes ~9 bytes of RSS per character
EXAMPLES = 20  # bad lines kept in the world info (and logged)
_REQUIRED = ("url", "title", "text")
_LINKS_SCRATCH = "links.scratch.jsonl"

log = logging.getLogger(__name__)


def _check(obj: object) -> Page:
    """The page of a parsed line; ValueError with the reason when it is malformed."""
    if not isinstance(obj, dict):
        raise ValueError(f"expected a JSON object, got {type(obj).__name__}")
    for key in _REQUIRED:
        if key not in obj:
            raise ValueError(f"missing key {key!r}")
        if not isinstance(obj[key], str):
            raise ValueError(f"key {key!r} must be a string, got {type(obj[key]).__name__}")
    links = obj.get("links", [])
    if not isinstance(links, list) or not all(isinstance(u, str) for u in links):
        raise ValueError("key 'links' must be a list of url strings")
    if not obj["url"]:
        raise ValueError("key 'url' is empty")
    return Page(url=obj["url"], title=obj["title"], text=obj["text"], links=tuple(dict.fromkeys(links)))


def numbered_pages(path: str | Path) -> Iterator[tuple[int, Page | str]]:
    """(line number, page) for each non-blank line of a JSONL file, or (line number, reason) for a bad one (read by
    `jsonl.json_values`, with its bounds on line size and nesting)."""
    for n, obj, reason in json_values(path):
        if reason is not None:
            yield n, reason
            continue
        try:
            yield n, _check(obj)
        except ValueError as err:
            yield n, str(err)


def read_pages_jsonl(path: str | Path) -> Iterator[Page]:
    """Stream the pages of a JSONL file; blank lines are skipped, a malformed one raises InputError naming FILE:LINE."""
    for n, item in numbered_pages(path):
        if isinstance(item, str):
            raise InputError(f"{path}:{n}: {item}")
        yield item


def write_pages_world(
    path: str | Path,
    directory: str | Path,
    *,
    skip_bad_lines: bool = False,
    shard_chars: int = SHARD_CHARS,
    info: dict[str, Any] | None = None,
) -> Path:
    """Build the pages world of the JSONL file `path` into `directory` (new or empty); the directory."""
    src, d = Path(path).resolve(), Path(directory)
    if not src.is_file():
        raise FileNotFoundError(f"pages file not found: {src}")
    d.mkdir(parents=True, exist_ok=True)
    if any(d.iterdir()):
        raise FileExistsError(f"{d} is not empty: a pages world is built into a new or empty directory")
    store = PageStoreWriter(d)
    try:
        n_bad, bad, shards, n_links = _stream(src, d, store, skip_bad_lines=skip_bad_lines, shard_chars=shard_chars)
    except BaseException:
        store.discard()
        raise
    store.close()
    if n_bad:
        log.warning("skipped %d bad line(s) of %s", n_bad, src)
    meta = {
        "source": "pages",
        "path": str(src),
        **(info or {}),
        "bad_lines": n_bad,
        "bad_line_examples": bad,
        "store": STORE,
        "layout": LAYOUT,
        "pages": store.count,
        "links": n_links,
        "shards": shards,
        "id_width": max(7, len(str(max(store.count - 1, 0)))),
    }
    (d / "world.json").write_text(json.dumps(meta, indent=1, sort_keys=True))
    return d


def _stream(
    src: Path, d: Path, store: PageStoreWriter, *, skip_bad_lines: bool, shard_chars: int
) -> tuple[int, list[str], list[dict[str, Any]], int]:
    """Both passes: pages into the store and the BM25 shards (links to a scratch file), then the link graph.
    (bad lines, the first `EXAMPLES` of them, shards, links)."""
    index = IndexWriter(d, shard_chars=shard_chars)
    n_bad, bad = 0, []
    with open(d / _LINKS_SCRATCH, "w", encoding="utf-8") as scratch:
        for n, item in numbered_pages(src):
            if isinstance(item, Page) and store.add(item) is None:
                item = f"duplicate url {item.url!r}"
            if isinstance(item, str):
                where = f"{src}:{n}: {item}"
                if not skip_bad_lines:
                    raise InputError(
                        f"{where} (build with skip_bad_lines=True, or `world build --skip-bad-lines`, "
                        "to skip bad lines)"
                    )
                n_bad += 1
                if len(bad) < EXAMPLES:
                    bad.append(where)
                    log.warning("skipped %s", where)
                continue
            index.add(f"{item.title}\n{item.text}")
            scratch.write(json.dumps(list(item.links), ensure_ascii=False) + "\n")
    shards = index.close()
    with open(d / _LINKS_SCRATCH, encoding="utf-8") as scratch:
        n_links = write_link_graph(d, (json.loads(line) for line in scratch), store.ids_of)
    (d / _LINKS_SCRATCH).unlink()
    return n_bad, bad, shards, n_links


def pages_world(
    path: str | Path,
    directory: str | Path | None = None,
    *,
    skip_bad_lines: bool = False,
    shard_chars: int = SHARD_CHARS,
) -> PagesWorld:
    """A world of `page` entities and `links_to` relations from a pages JSONL file, built into `directory`
    (default: a temporary directory removed with the world) and opened from there."""
    temporary = directory is None
    d = Path(tempfile.mkdtemp(prefix="jaxseeker-pages-")) if temporary else Path(directory)
    try:
        write_pages_world(path, d, skip_bad_lines=skip_bad_lines, shard_chars=shard_chars)
    except BaseException:
        if temporary:
            shutil.rmtree(d, ignore_errors=True)
        raise
    world = open_pages_world(d)
    if temporary:
        weakref.finalize(world, shutil.rmtree, d, ignore_errors=True)
    return world
