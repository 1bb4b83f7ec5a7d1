"""Pages and a BM25 index over them: what the local `search` and `visit` tools read."""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import Iterable, Sequence

import numpy as np


@dataclasses.dataclass(frozen=True)
class Page:
    """One page of a world: its address, title, body text and outgoing links (urls)."""

    url: str
    title: str
    text: str
    links: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class Hit:
    """One search result."""

    url: str
    title: str
    snippet: str
    score: float


_WORD = re.compile(r"\w+", re.UNICODE)


def title_key(text: str) -> str:
    """A title's or query's words, lowercase, punctuation dropped: "St. Louis" and "St Louis" → "st louis"."""
    return " ".join(_WORD.findall(text.lower()))


def snippet_of(text: str, n_words: int = 30) -> str:
    """The first `n_words` words of a page, as search results show it."""
    words = text.split()
    return " ".join(words[:n_words]) + (" …" if len(words) > n_words else "")


class Corpus:
    """Pages addressed by url with a BM25 index (bm25s) over title + text, and their titles' words."""

    title_index = True  # `search(…, title_first=True)` is available

    def __init__(self, pages: Iterable[Page], *, snippet_words: int = 30):
        self.pages: list[Page] = list(pages)
        self.by_url: dict[str, Page] = {p.url: p for p in self.pages}
        if len(self.by_url) != len(self.pages):
            raise ValueError("Corpus: duplicate page urls")
        self.snippet_words = snippet_words
        # Imported here, not at module level: importing bm25s runs a JAX computation, which would start the
        # XLA backend before a multi-host program can call `jax.distributed.initialize()`.
        import bm25s

        logging.getLogger("bm25s").setLevel(logging.WARNING)  # it sets DEBUG and logs every index build
        self._bm25s = bm25s
        self._retriever = bm25s.BM25()
        self._retriever.index(
            bm25s.tokenize([f"{p.title}\n{p.text}" for p in self.pages], stopwords="en", show_progress=False),
            show_progress=False,
        )
        self._titled: dict[str, list[int]] = {}  # a title's words (lowercase) → its pages
        for i, p in enumerate(self.pages):
            self._titled.setdefault(title_key(p.title), []).append(i)

    def __len__(self) -> int:
        return len(self.pages)

    def page(self, url: str) -> Page | None:
        """The page at `url`, or None."""
        return self.by_url.get(url)

    def search(self, query: str, k: int = 5, *, title_first: bool = False) -> list[Hit]:
        """Top-`k` pages for `query` by BM25 (fewer when fewer pages match any query word). `title_first`: the pages
        whose title is the query's words (`title_key`) come first, as a web search lists the page of the name it
        was asked for first, whatever page mentions the name more often."""
        if not _WORD.search(query) or not self.pages:
            return []
        if title_first:
            return self._search_title_first(query, k)
        tokens = self._bm25s.tokenize([query], stopwords="en", show_progress=False)
        if not tokens.ids or not tokens.ids[0]:
            return []
        k = min(k, len(self.pages))
        docs, scores = self._retriever.retrieve(tokens, k=k, show_progress=False)
        return self._hits(np.asarray(docs)[0], np.asarray(scores)[0])

    def _search_title_first(self, query: str, k: int) -> list[Hit]:
        """`search` with the pages titled `query` first, then the best of the rest by BM25."""
        tokens = self._bm25s.tokenize([query], stopwords="en", show_progress=False, return_ids=False)
        if not tokens or not tokens[0]:
            return []
        scores = self._retriever.get_scores(tokens[0])  # [pages]
        titled = sorted(self._titled.get(title_key(query), ()), key=lambda i: -scores[i])
        k = min(k, len(self.pages))
        top = np.argpartition(-scores, 2 * k - 1)[: 2 * k] if 2 * k < len(scores) else np.arange(len(scores))
        top = top[np.argsort(-scores[top], kind="stable")]  # the best 2k by BM25, best first
        ranked = (titled[:k] + [int(i) for i in top if int(i) not in titled])[:k]
        return self._hits(ranked, scores[ranked])

    def _hits(self, docs: Sequence[int], scores: Sequence[float]) -> list[Hit]:
        """Hits of the pages `docs` with their BM25 `scores`, those that match no query word left out."""
        hits = []
        for i, s in zip(docs, scores):
            if s <= 0:
                continue
            p = self.pages[int(i)]
            hits.append(Hit(p.url, p.title, snippet_of(p.text, self.snippet_words), float(s)))
        return hits

    def search_many(self, queries: Sequence[str], k: int = 5, *, title_first: bool = False) -> list[list[Hit]]:
        """`search` for each query."""
        return [self.search(q, k, title_first=title_first) for q in queries]
