"""The `search` tool and its back-ends: local BM25 over a Corpus, or a Serper-compatible HTTP API."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

from jaxseeker.tools import http
from jaxseeker.tools.address import redirect_guard
from jaxseeker.tools.base import Tool, ToolError
from jaxseeker.tools.keys import read_key
from jaxseeker.world.corpus import Corpus, Hit

SEARCH_PARAMETERS = {
    "type": "object",
    "properties": {
        "query": {
            "type": "array",
            "items": {"type": "string"},
            "minItems": 1,
            "description": "One or more search queries; each gets its own results.",
        }
    },
    "required": ["query"],
}


class SearchBackend(Protocol):
    """Anything that answers one query with ranked hits (raising ToolError or http.HttpError on failure)."""

    def search(self, query: str, k: int) -> list[Hit]:
        """Top-`k` hits for `query`."""
        ...


class LocalSearch:
    """BM25 search over an embedded Corpus; with `title_first`, the pages titled with the query come first."""

    def __init__(self, corpus: Corpus, *, title_first: bool = False):
        if title_first and not getattr(corpus, "title_index", False):
            raise ValueError(
                f"tools.title_first: {type(corpus).__name__} keeps no title index (a pages world's "
                "sharded index); set tools.title_first: false"
            )
        self.corpus, self.title_first = corpus, title_first

    def __repr__(self) -> str:
        return f"LocalSearch({len(self.corpus)} pages{', title first' if self.title_first else ''})"

    def search(self, query: str, k: int) -> list[Hit]:
        """Top-`k` pages of the corpus by BM25 (`Corpus.search`)."""
        return self.corpus.search(query, k, title_first=self.title_first)


class SerperSearch:
    """A Serper-compatible API: POST {base_url}/search {"q", "num"} with header X-API-KEY → {"organic": [...]}."""

    def __init__(
        self,
        base_url: str = "https://google.serper.dev",
        key_env: str = "SERPER_API_KEY",
        config: http.HttpConfig = http.HttpConfig(),
    ):
        self.url = base_url.rstrip("/") + "/search"
        self.key_env = key_env
        read_key(key_env)  # now: a bad key fails at start-up, and `redact` knows it
        self.config = config
        self._client = http.client(redirect_guard(self.url))

    def __repr__(self) -> str:
        return f"SerperSearch(url={self.url!r}, key_env={self.key_env!r})"

    def search(self, query: str, k: int) -> list[Hit]:
        """Top-`k` organic results for `query`; ToolError / HttpError naming the fault on failure."""
        key = read_key(self.key_env)
        if key is None:
            raise ToolError(f"search needs an API key in the environment variable {self.key_env}")
        headers = {"X-API-KEY": key, "Content-Type": "application/json"}
        reply = http.request(
            self._client, "POST", self.url, self.config, headers=headers, json_body={"q": query, "num": k}
        )
        payload = reply.json(self.url)
        organic = payload.get("organic", []) if isinstance(payload, dict) else None
        if not isinstance(organic, list):
            raise ToolError(f"unexpected reply from {self.url}: no 'organic' list")
        hits = []
        for rank, item in enumerate(organic[:k]):
            if isinstance(item, dict) and item.get("link"):
                hits.append(
                    Hit(str(item["link"]), str(item.get("title", "")), str(item.get("snippet", "")), float(k - rank))
                )
        return hits


def format_hits(query: str, hits: list[Hit]) -> str:
    """The observation for one query: a header, then "[i] title\\nurl\\nsnippet" per hit."""
    if not hits:
        return f"No results for '{query}'. Try a shorter or different query."
    lines = [f"Search results for '{query}':"]
    for i, hit in enumerate(hits, start=1):
        lines.append(f"\n[{i}] {hit.title}\n{hit.url}\n{hit.snippet}")
    return "\n".join(lines)


def run_queries(backend: SearchBackend, queries: list[str], k: int, max_workers: int = 4) -> str:
    """Every query's results, joined by a separator; a failing query shows its error in place (ToolError if all do)."""

    def one(query: str) -> tuple[str, bool]:
        if not query.strip():
            return "Empty query: write some words to search for.", False
        try:
            return format_hits(query, backend.search(query, k)), True
        except (ToolError, http.HttpError) as exc:
            return f"Search for '{query}' failed: {exc}", False

    with ThreadPoolExecutor(max_workers=max(1, min(max_workers, len(queries)))) as pool:
        parts = list(pool.map(one, queries))
    text = "\n=======\n".join(p for p, _ in parts)
    if not any(ok for _, ok in parts):
        raise ToolError(text)
    return text


def search_tool(backend: SearchBackend, *, top_k: int = 5, max_queries: int = 8) -> Tool:
    """The `search` tool over `backend`: `query` (string or list of strings) → top-`top_k` hits per query."""

    def fn(args: dict[str, Any]) -> str:
        queries = args["query"]
        if len(queries) > max_queries:
            raise ToolError(f"at most {max_queries} queries per call, got {len(queries)}")
        return run_queries(backend, queries, top_k)

    description = "Search the web. Give one or more queries; returns the top results (title, url, snippet) for each."
    return Tool("search", description, SEARCH_PARAMETERS, fn)
