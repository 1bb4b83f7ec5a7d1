"""The search index of a `pages` world: BM25 (bm25s) in shards on disk, searched as one index.

Why shards. `bm25s.BM25.index` needs every document's token ids as Python lists at once (about
8 bytes a token plus a list per page, then score arrays of the same length), so one index over
millions of pages does not fit in a bounded memory. The build therefore tokenises and indexes
`shard_chars` characters of pages at a time, saves the shard with `BM25.save` and lets it go; a
search opens each shard with `BM25.load(mmap=True, load_vocab=False)` (its score matrix stays on
disk), scores the pages that hold a query token, and merges the shards' hits by score.

Why the scores of different shards compare. bm25s stores, for each token and page, the lucene
score idf(df, N) · tf / (tf + k1 · (1 - b + b · len / avg_len)) with the shard's own df and N. A
token's df in a shard is the length of its column in the shard's CSC matrix, so a search sums those
over the shards and rescales each shard's column by idf(df, N) / idf(df_shard, N_shard): the idf
becomes the whole corpus's, as if one index had been built. Only the average page length stays per
shard, which is close to the corpus's for shards of thousands of pages.

Why token hashes. bm25s keeps a shard's vocabulary as one dict that `load` reads whole; each shard
also saves its tokens as sorted 64-bit hashes beside their columns (memory-mapped, binary-searched),
so opening the index reads no vocabulary and costs no memory per token or page.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

STOPWORDS = "en"
KEYS, COLUMNS = "token_keys.npy", "token_columns.npy"


def token_key(token: str) -> int:
    """A stable 64-bit hash of a token (collisions among a shard's tokens are vanishingly unlikely)."""
    return int.from_bytes(hashlib.blake2b(token.encode("utf-8"), digest_size=8).digest(), "little")


def idf(df: np.ndarray | int, n: int) -> np.ndarray:
    """bm25s's lucene idf: log(1 + (N - df + 0.5) / (df + 0.5))."""
    return np.log1p((n - np.asarray(df, dtype=np.float64) + 0.5) / (np.asarray(df, dtype=np.float64) + 0.5))


def tokenize(texts: Sequence[str], *, ids: bool) -> Any:
    """bm25s's tokenisation (lower case, words of 2+ characters, English stopwords out): token ids with the
    vocabulary (`ids`) or lists of token strings."""
    import bm25s  # heavy import (see Corpus): only when a shard is built or a query tokenised

    return bm25s.tokenize(list(texts), stopwords=STOPWORDS, return_ids=ids, show_progress=False)


class IndexWriter:
    """Builds the shards: `add` one page text at a time (in id order), `close` returns the shard list."""

    def __init__(self, directory: str | Path, *, shard_chars: int):
        if shard_chars <= 0:
            raise ValueError(f"shard_chars must be positive, got {shard_chars}")
        self.directory, self.shard_chars = Path(directory), shard_chars
        self.shards: list[dict[str, Any]] = []
        self._texts: list[str] = []
        self._chars = 0
        self._start = 0

    def add(self, text: str) -> None:
        """Queue the text of the next page; a full shard is indexed and saved."""
        self._texts.append(text)
        self._chars += len(text)
        if self._chars >= self.shard_chars:
            self._flush()

    def close(self) -> list[dict[str, Any]]:
        """Index the last shard; [{dir, start, count, indexed}] for every shard."""
        if self._texts:
            self._flush()
        return self.shards

    def _flush(self) -> None:
        import bm25s

        name = f"bm25/{len(self.shards):05d}"
        tokens = tokenize(self._texts, ids=True)
        indexed = bool(tokens.vocab)  # a shard of pages without a single token has no index
        if indexed:
            retriever = bm25s.BM25(method="lucene")
            retriever.index(tokens, show_progress=False)
            retriever.save(self.directory / name, show_progress=False)
            vocab = {t: c for t, c in retriever.vocab_dict.items() if t}  # "" is bm25s's empty-query token
            keys = np.fromiter((token_key(t) for t in vocab), dtype=np.uint64, count=len(vocab))
            columns = np.fromiter(vocab.values(), dtype=np.int32, count=len(vocab))
            order = np.argsort(keys)
            np.save(self.directory / name / KEYS, keys[order])
            np.save(self.directory / name / COLUMNS, columns[order])
        self.shards.append({"dir": name, "start": self._start, "count": len(self._texts), "indexed": indexed})
        self._start += len(self._texts)
        self._texts, self._chars = [], 0


class _Shard:
    """One loaded shard: the memory-mapped CSC score matrix (tokens are columns) and its token table."""

    def __init__(self, directory: Path, start: int):
        import bm25s

        retriever = bm25s.BM25.load(directory, mmap=True, load_vocab=False)
        self.start = start
        self.num_docs = int(retriever.scores["num_docs"])
        # np.asarray: plain views of the memory maps (indexing an np.memmap costs microseconds per call)
        self.data = np.asarray(retriever.scores["data"])  # [nnz] float32 scores
        self.indices = np.asarray(retriever.scores["indices"])  # [nnz] page within the shard
        self.indptr = np.asarray(retriever.scores["indptr"])  # [vocab + 1]
        self.keys = np.asarray(np.load(directory / KEYS, mmap_mode="r"))  # [vocab] sorted token hashes
        self.columns = np.asarray(np.load(directory / COLUMNS, mmap_mode="r"))  # [vocab]

    def columns_of(self, keys: np.ndarray) -> np.ndarray:
        """The column of each query token (-1 when the shard lacks it)."""  # [tokens]
        if len(self.keys) == 0:
            return np.full(len(keys), -1)
        pos = np.minimum(np.searchsorted(self.keys, keys), len(self.keys) - 1)
        return np.where(self.keys[pos] == keys, self.columns[pos], -1)

    def df(self, columns: np.ndarray) -> np.ndarray:
        """How many of the shard's pages hold each token (0 for column -1)."""  # [tokens]
        safe = np.maximum(columns, 0)
        return np.where(columns >= 0, self.indptr[safe + 1] - self.indptr[safe], 0)

    def top(self, columns: np.ndarray, weights: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The `k` best (page id, score) of the shard: the sum over tokens of weight · the token's column."""
        parts = [
            (self.indices[self.indptr[c] : self.indptr[c + 1]], w * self.data[self.indptr[c] : self.indptr[c + 1]])
            for c, w in zip(columns.tolist(), weights.tolist())
            if c >= 0
        ]
        if not parts:
            return np.zeros(0, np.int64), np.zeros(0)
        pages, inverse = np.unique(np.concatenate([p for p, _ in parts]), return_inverse=True)  # [touched]
        scores = np.bincount(inverse, weights=np.concatenate([s for _, s in parts]))  # [touched]
        if len(scores) > k:
            keep = np.argpartition(-scores, k - 1)[:k]
            pages, scores = pages[keep], scores[keep]
        return pages.astype(np.int64) + self.start, scores


class ShardedIndex:
    """Searches every shard of a `pages` world as one BM25 index (shards are opened on the first search)."""

    def __init__(self, directory: str | Path, shards: Sequence[dict[str, Any]], num_docs: int):
        self.directory, self.num_docs = Path(directory), num_docs
        self._specs = list(shards)
        self._shards: list[_Shard] | None = None
        self._lock = threading.Lock()

    def _open(self) -> list[_Shard]:
        with self._lock:
            if self._shards is None:
                self._shards = [_Shard(self.directory / s["dir"], s["start"]) for s in self._specs if s["indexed"]]
            return self._shards

    def search(self, query: str, k: int) -> list[tuple[int, float]]:
        """The `k` best (page id, score) for `query`, best first (ties by id); only pages sharing a token."""
        tokens = tokenize([query], ids=False)[0]
        if not tokens or k <= 0:
            return []
        keys = np.array([token_key(t) for t in tokens], dtype=np.uint64)  # [tokens], repeats count twice as in bm25s
        shards = self._open()
        columns = [s.columns_of(keys) for s in shards]
        dfs = [s.df(c) for s, c in zip(shards, columns)]
        corpus_idf = idf(np.sum(dfs, axis=0), self.num_docs) if shards else np.zeros(0)  # [tokens]
        ids, scores = [], []
        for shard, cols, df in zip(shards, columns, dfs):
            weights = np.where(df > 0, corpus_idf / idf(np.maximum(df, 1), shard.num_docs), 0.0)  # [tokens]
            p, s = shard.top(cols, weights, k)
            ids.append(p)
            scores.append(s)
        if not ids:
            return []
        all_ids, all_scores = np.concatenate(ids), np.concatenate(scores)
        order = np.lexsort((all_ids, -all_scores))[:k]
        return [(int(all_ids[i]), float(all_scores[i])) for i in order if all_scores[i] > 0]
