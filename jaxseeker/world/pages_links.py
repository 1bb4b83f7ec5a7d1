"""The link graph of a `pages` world on disk: outgoing and incoming links in CSR form, memory-mapped.

Files in the world directory (raw little-endian arrays):
  links.out.indptr.i64  n + 1 row starts;  links.out.ids.i32  targets of each page, ascending, no repeats
  links.in.indptr.i64   n + 1 row starts;  links.in.ids.i32   sources of each page, ascending

The forward rows are written page by page while the links are resolved; the reverse rows are then
filled by a counting sort over chunks of edges, with the counters themselves memory-mapped, so the
memory a build holds does not grow with the number of pages or links.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import numpy as np

from jaxseeker.world.pages_store import ArrayFile, read_array

OUT_INDPTR, OUT_IDS = "links.out.indptr.i64", "links.out.ids.i32"
IN_INDPTR, IN_IDS = "links.in.indptr.i64", "links.in.ids.i32"
FILES = (OUT_INDPTR, OUT_IDS, IN_INDPTR, IN_IDS)
PAGES_PER_BATCH = 4096  # pages whose links are resolved together
EDGES_PER_CHUNK = 1 << 20  # edges per counting-sort chunk


def write_link_graph(
    directory: str | Path,
    links: Iterable[list[str]],
    resolve: Callable[[list[str]], dict[str, int]],
) -> int:
    """Write both CSR graphs from each page's link urls (in page-id order); `resolve` maps urls to page ids
    (urls it does not know leave the corpus and make no edge; a page's link to itself makes none). The edge count."""
    d = Path(directory)
    indptr, ids = ArrayFile(d / OUT_INDPTR, np.int64), ArrayFile(d / OUT_IDS, np.int32)
    indptr.write([0])
    batch: list[list[str]] = []
    page = 0

    def flush() -> None:
        nonlocal page
        found = resolve([u for urls in batch for u in urls])
        starts = []
        for urls in batch:
            targets = sorted({found[u] for u in urls if u in found} - {page})
            ids.write(targets)
            starts.append(ids.size)
            page += 1
        indptr.write(starts)
        batch.clear()

    for urls in links:
        batch.append(urls)
        if len(batch) >= PAGES_PER_BATCH:
            flush()
    flush()
    indptr.close()
    ids.close()
    _write_reverse(d, page)
    return ids.size


def _memmap(path: Path, dtype: type, size: int) -> np.ndarray:
    """A zero-filled writable memory map of `size` items (an empty file for size 0)."""
    if size == 0:
        path.write_bytes(b"")
        return np.zeros(0, dtype=dtype)
    return np.memmap(path, dtype=dtype, mode="w+", shape=(size,))


def _write_reverse(d: Path, n: int) -> None:
    """Fill links.in.* from links.out.* by a counting sort, chunk by chunk of edges."""
    out_ptr, out_ids = read_array(d / OUT_INDPTR, np.int64), read_array(d / OUT_IDS, np.int32)
    in_ptr = _memmap(d / IN_INDPTR, np.int64, n + 1)
    in_ids = _memmap(d / IN_IDS, np.int32, len(out_ids))
    for start in range(0, len(out_ids), EDGES_PER_CHUNK):
        np.add.at(in_ptr[1:], out_ids[start : start + EDGES_PER_CHUNK], 1)  # in-degrees
    np.cumsum(in_ptr, out=in_ptr)
    cursor_path = d / "links.in.cursor.tmp"
    cursor = _memmap(cursor_path, np.int64, n)
    cursor[:] = in_ptr[:-1]
    for rows in _row_chunks(out_ptr):
        lo, hi = rows.start, rows.stop
        a, b = int(out_ptr[lo]), int(out_ptr[hi])
        dst = np.asarray(out_ids[a:b])
        src = np.repeat(np.arange(lo, hi, dtype=np.int32), np.diff(out_ptr[lo : hi + 1]))  # [edges]
        order = np.argsort(dst, kind="stable")  # keeps the sources of one target ascending
        dst, src = dst[order], src[order]
        starts = np.flatnonzero(np.r_[True, dst[1:] != dst[:-1]]) if len(dst) else np.zeros(0, np.int64)
        counts = np.diff(np.r_[starts, len(dst)])
        rank = np.arange(len(dst)) - np.repeat(starts, counts)  # place of each edge among its target's edges
        in_ids[cursor[dst] + rank] = src
        cursor[dst[starts]] += counts
    for a in (in_ptr, in_ids, cursor):
        if isinstance(a, np.memmap):
            a.flush()
    del cursor
    cursor_path.unlink()


def _row_chunks(indptr: np.ndarray) -> Iterator[range]:
    """Consecutive row ranges holding about `EDGES_PER_CHUNK` edges each (at least one row)."""
    n, lo = len(indptr) - 1, 0
    while lo < n:
        hi = int(np.searchsorted(indptr, indptr[lo] + EDGES_PER_CHUNK, side="right")) - 1
        hi = min(max(hi, lo + 1), n)
        yield range(lo, hi)
        lo = hi


class LinkGraph:
    """Reads the CSR link graph (memory-mapped): a page's targets and sources as arrays of page ids."""

    def __init__(self, directory: str | Path):
        d = Path(directory)
        self._out_ptr, self._out = read_array(d / OUT_INDPTR, np.int64), read_array(d / OUT_IDS, np.int32)
        self._in_ptr, self._in = read_array(d / IN_INDPTR, np.int64), read_array(d / IN_IDS, np.int32)

    def __len__(self) -> int:
        """The number of edges."""
        return len(self._out)

    def targets(self, i: int) -> np.ndarray:
        """Ids page `i` links to, ascending."""  # [out_degree]
        return self._out[self._out_ptr[i] : self._out_ptr[i + 1]]

    def sources(self, i: int) -> np.ndarray:
        """Ids of the pages linking to page `i`, ascending."""  # [in_degree]
        return self._in[self._in_ptr[i] : self._in_ptr[i + 1]]

    def degree(self, i: int) -> int:
        """Links out of plus links into page `i`."""
        return int(self._out_ptr[i + 1] - self._out_ptr[i] + self._in_ptr[i + 1] - self._in_ptr[i])

    def has(self, i: int, j: int) -> bool:
        """True when page `i` links to page `j`."""
        row = self.targets(i)
        k = int(np.searchsorted(row, j))
        return k < len(row) and int(row[k]) == j

    def edge(self, k: int) -> tuple[int, int]:
        """The `k`-th edge (source, target) in (source, target) order."""
        return int(np.searchsorted(self._out_ptr, k, side="right")) - 1, int(self._out[k])

    def edges(self) -> Iterator[tuple[int, int]]:
        """Every edge (source, target) in order, read a chunk at a time."""
        for rows in _row_chunks(self._out_ptr):
            a, b = int(self._out_ptr[rows.start]), int(self._out_ptr[rows.stop])
            src = np.repeat(np.arange(rows.start, rows.stop), np.diff(self._out_ptr[rows.start : rows.stop + 1]))
            yield from zip(src.tolist(), np.asarray(self._out[a:b]).tolist())
