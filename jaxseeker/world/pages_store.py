"""The page store of a `pages` world on disk: page records read by offset, url / title / initials in sqlite.

Files in the world directory:
  pages.records.jsonl  one JSON record {url, title, text, links} per page, in id order
  pages.offsets.u64    n + 1 byte offsets into the records (raw little-endian uint64, memory-mapped)
  pages.sqlite         table `pages(id, url UNIQUE, title, first, last)`: the url → id map, titles, name initials

Reading a page costs one `pread` and one `json.loads`; nothing is held in memory per page.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import weakref
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import numpy as np

from jaxseeker.world.corpus import Page

RECORDS = "pages.records.jsonl"
OFFSETS = "pages.offsets.u64"
DATABASE = "pages.sqlite"
_SQL_VARIABLES = 500  # urls per `IN (…)` look-up, below sqlite's limit on bound variables


class ArrayFile:
    """Appends 1-D arrays of one dtype to a raw file whose final length is not known in advance."""

    def __init__(self, path: str | Path, dtype: np.dtype | str):
        self.path, self.dtype, self.size = Path(path), np.dtype(dtype), 0
        self._file = open(self.path, "wb")

    def write(self, values: Sequence[int] | np.ndarray) -> None:
        """Append `values` (cast to the file's dtype)."""
        a = np.asarray(values, dtype=self.dtype)
        self._file.write(a.tobytes())
        self.size += a.size

    def close(self) -> None:
        """Flush and close the file."""
        self._file.close()


def read_array(path: str | Path, dtype: np.dtype | str) -> np.ndarray:
    """A read-only memory map of a raw array file (an empty array for an empty file), as a plain ndarray view
    (indexing an `np.memmap` itself costs microseconds per call)."""
    if os.path.getsize(path) == 0:
        return np.zeros(0, dtype=dtype)
    return np.asarray(np.memmap(path, dtype=dtype, mode="r"))


def initials(name: str) -> tuple[str, str]:
    """The upper-cased first letters of the first and the last word of `name` ("" when it has no word)."""
    words = name.split()
    return (words[0][:1].upper(), words[-1][:1].upper()) if words else ("", "")


class PageStoreWriter:
    """Writes the page store one page at a time; `add` refuses a url already stored."""

    def __init__(self, directory: str | Path, *, offsets_buffer: int = 8192):
        d = Path(directory)
        self._db = sqlite3.connect(d / DATABASE)
        for pragma in ("journal_mode=OFF", "synchronous=OFF", "cache_size=-65536"):  # cache: at most 64 MiB
            self._db.execute(f"PRAGMA {pragma}")
        self._db.execute(
            "CREATE TABLE pages (id INTEGER PRIMARY KEY, url TEXT NOT NULL UNIQUE, title TEXT NOT NULL, "
            "first TEXT NOT NULL, last TEXT NOT NULL)"
        )
        self._records = open(d / RECORDS, "wb")
        self._offsets = ArrayFile(d / OFFSETS, np.uint64)
        self._pending: list[int] = [0]
        self._buffer = offsets_buffer
        self._position = 0
        self.count = 0

    def add(self, page: Page) -> int | None:
        """Store `page` and return its id, or None when its url is already stored (nothing is written)."""
        first, last = initials(page.title or page.url)
        try:
            self._db.execute(
                "INSERT INTO pages VALUES (?, ?, ?, ?, ?)", (self.count, page.url, page.title, first, last)
            )
        except sqlite3.IntegrityError:
            return None
        record = {"url": page.url, "title": page.title, "text": page.text, "links": list(page.links)}
        line = json.dumps(record, ensure_ascii=False).encode("utf-8") + b"\n"
        self._records.write(line)
        self._position += len(line)
        self._pending.append(self._position)
        if len(self._pending) >= self._buffer:
            self._offsets.write(self._pending)
            self._pending.clear()
        self.count += 1
        return self.count - 1

    def ids_of(self, urls: Iterable[str]) -> dict[str, int]:
        """The ids of those `urls` that are stored."""
        found: dict[str, int] = {}
        unique = list(dict.fromkeys(urls))
        for start in range(0, len(unique), _SQL_VARIABLES):
            batch = unique[start : start + _SQL_VARIABLES]
            marks = ",".join("?" * len(batch))
            found.update(self._db.execute(f"SELECT url, id FROM pages WHERE url IN ({marks})", batch))
        return found

    def discard(self) -> None:
        """Close every file without finishing the store (after a failed build)."""
        self._offsets.close()
        self._records.close()
        self._db.close()

    def close(self) -> None:
        """Index the initials, commit and close every file."""
        self._offsets.write(self._pending)
        self._offsets.close()
        self._records.close()
        self._db.execute("CREATE INDEX pages_first ON pages (first, id)")
        self._db.execute("CREATE INDEX pages_last ON pages (last, id)")
        self._db.commit()
        self._db.close()


class PageStore:
    """Reads the page store: pages by id or url, titles, ids by name initial. Safe to share between threads."""

    def __init__(self, directory: str | Path):
        d = Path(directory).resolve()
        self._offsets = read_array(d / OFFSETS, np.uint64)
        self._fd = os.open(d / RECORDS, os.O_RDONLY)
        self._db = sqlite3.connect(f"{(d / DATABASE).as_uri()}?mode=ro", uri=True, check_same_thread=False)
        self._lock = threading.Lock()
        weakref.finalize(self, _close, self._fd, self._db)

    def __len__(self) -> int:
        return max(len(self._offsets) - 1, 0)

    def page(self, i: int) -> Page:
        """The page with id `i` (read from disk)."""
        start, end = int(self._offsets[i]), int(self._offsets[i + 1])
        record = json.loads(os.pread(self._fd, end - start, start))
        return Page(record["url"], record["title"], record["text"], tuple(record["links"]))

    def _one(self, sql: str, args: tuple) -> tuple | None:
        with self._lock:
            return self._db.execute(sql, args).fetchone()

    def id_of(self, url: str) -> int | None:
        """The id of the page at `url`, or None."""
        row = self._one("SELECT id FROM pages WHERE url = ?", (url,))
        return None if row is None else row[0]

    def head(self, i: int) -> tuple[str, str]:
        """(url, title) of page `i`; IndexError when there is none."""
        row = self._one("SELECT url, title FROM pages WHERE id = ?", (i,))
        if row is None:
            raise IndexError(f"no page with id {i}")
        return row

    def heads(self, batch: int = 10000) -> Iterator[tuple[int, str, str]]:
        """(id, url, title) of every page in id order, read `batch` rows at a time."""
        last = -1
        while True:
            with self._lock:
                rows = self._db.execute(
                    "SELECT id, url, title FROM pages WHERE id > ? ORDER BY id LIMIT ?", (last, batch)
                ).fetchall()
            if not rows:
                return
            yield from rows
            last = rows[-1][0]

    def with_initial(self, position: str, letter: str) -> list[int]:
        """Ids of the pages whose name's first (`position` "first") or last word starts with `letter`, in order."""
        column = {"first": "first", "last": "last"}.get(position)
        if column is None:
            raise ValueError(f"initial position must be 'first' or 'last', got {position!r}")
        with self._lock:
            rows = self._db.execute(f"SELECT id FROM pages WHERE {column} = ? ORDER BY id", (letter.upper(),))
            return [r[0] for r in rows]


def _close(fd: int, db: sqlite3.Connection) -> None:
    os.close(fd)
    db.close()
