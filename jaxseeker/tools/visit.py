"""The `visit` tool and its page readers (the local page store, a Jina-compatible reader); pages reduced to the goal."""

from __future__ import annotations

import dataclasses
import re
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

from jaxseeker.tools import http
from jaxseeker.tools.address import checked_url, redirect_guard
from jaxseeker.tools.base import Tool, ToolError
from jaxseeker.tools.extract import llm_extract, overlap_extract, truncate
from jaxseeker.tools.keys import read_key
from jaxseeker.tools.llm_client import LLMClient, LLMError
from jaxseeker.world.corpus import Corpus

VISIT_PARAMETERS = {
    "type": "object",
    "properties": {
        "url": {
            "type": "array",
            "items": {"type": "string"},
            "minItems": 1,
            "description": "The URL(s) to visit: one string or a list.",
        },
        "goal": {"type": "string", "description": "What information you want from the page(s)."},
    },
    "required": ["url", "goal"],
}


@dataclasses.dataclass(frozen=True)
class Fetched:
    """A page as a reader returns it: text (maybe cut at the byte cap) and (title, url) links."""

    url: str
    title: str
    text: str
    links: tuple[tuple[str, str], ...] = ()
    truncated: bool = False


class PageReader(Protocol):
    """Anything that fetches a page by url (raising ToolError or http.HttpError on failure)."""

    def read(self, url: str) -> Fetched:
        """The page at `url`."""
        ...


class LocalPages:
    """Pages of an embedded Corpus by url (no network)."""

    def __init__(self, corpus: Corpus):
        self.corpus = corpus

    def __repr__(self) -> str:
        return f"LocalPages({len(self.corpus)} pages)"

    def read(self, url: str) -> Fetched:
        """The corpus page at `url`; ToolError when there is none."""
        page = self.corpus.page(url.strip())
        if page is None:
            raise ToolError(f"no page at {url!r} (check the url against the search results)")
        links = tuple((getattr(self.corpus.page(u), "title", ""), u) for u in page.links)
        return Fetched(page.url, page.title, page.text, links)


_JINA_TITLE = re.compile(r"\ATitle:\s*(.*)\n")


class JinaReader:
    """A Jina-compatible reader: GET {base_url}/{percent-encoded url} with an optional Bearer key → the page as text."""

    def __init__(
        self,
        base_url: str = "https://r.jina.ai",
        key_env: str = "JINA_API_KEY",
        config: http.HttpConfig = http.HttpConfig(),
        *,
        allow_private: bool = False,
    ):
        self.base_url = base_url.rstrip("/")
        self.key_env = key_env
        read_key(key_env)  # now: a bad key fails at start-up, and `redact` knows it
        self.config = config
        self.allow_private = allow_private
        self._client = http.client(redirect_guard(self.base_url, allow_private=allow_private))

    def __repr__(self) -> str:
        return f"JinaReader(base_url={self.base_url!r}, key_env={self.key_env!r}, allow_private={self.allow_private})"

    def read(self, url: str) -> Fetched:
        """The page at `url` through the reader, its body cut at `config.max_bytes`; ToolError / HttpError on faults.

        The reader is sent the URL that was checked (`checked_url`), percent-encoded whole into one path segment: no
        dot segment or "?" of the target can reach the reader's own paths ("{base}/../admin"), and the HTTP client
        has nothing to normalise. A Jina reader decodes the segment back into the URL."""
        url = checked_url(url, allow_private=self.allow_private)
        headers = {"X-Return-Format": "markdown"}
        key = read_key(self.key_env)
        if key:
            headers["Authorization"] = f"Bearer {key}"
        target = f"{self.base_url}/{urllib.parse.quote(url, safe='')}"
        reply = http.request(self._client, "GET", target, self.config, headers=headers)
        text = reply.text()
        if not text.strip():
            raise ToolError(f"the reader returned an empty page for {url!r}")
        title = _JINA_TITLE.match(text)
        return Fetched(url, title.group(1).strip() if title else "", text, truncated=reply.truncated)


@dataclasses.dataclass(frozen=True)
class VisitOptions:
    """How pages become observations."""

    page_chars: int = 8000  # budget of one page's observation
    goal_extraction: bool = True  # offline: keep the passages sharing most words with the goal
    goal_passages: int = 0  # offline: keep at most this many of them, even when the page fits; 0: fill page_chars
    llm_input_chars: int = 100_000  # page text sent to the LLM extractor
    max_links: int = 20  # links listed under a page
    max_urls: int = 5  # urls one visit call may take


def describe_page(page: Fetched, goal: str, options: VisitOptions, llm: LLMClient | None) -> str:
    """The observation for one page: LLM evidence + summary, or offline evidence; raw text when the LLM fails."""
    cut = " (the page was cut at the download limit)" if page.truncated else ""
    header = f"Page: {page.title}\nURL: {page.url}{cut}\nGoal: {goal}\n"
    if llm is not None:
        try:
            found = llm_extract(llm, page.text, goal, max_input_chars=options.llm_input_chars)
        except LLMError as exc:
            start = truncate(page.text, options.page_chars)
            body = f"\n[the summariser failed: {exc}; the start of the page follows]\n{start}"
        else:
            evidence = truncate(found.evidence, options.page_chars)
            body = f"\nEvidence in page:\n{evidence}\n\nSummary:\n{truncate(found.summary, options.page_chars // 4)}"
    elif options.goal_extraction:
        body = f"\nEvidence in page:\n{overlap_extract(page.text, goal, options.page_chars, options.goal_passages)}"
    else:
        body = f"\nContent:\n{truncate(page.text, options.page_chars)}"
    if page.links and options.max_links > 0:
        shown = page.links[: options.max_links]
        more = f"\n[… {len(page.links) - len(shown)} more links]" if len(page.links) > len(shown) else ""
        body += "\n\nLinks on this page:\n" + "\n".join(f"- {t}: {u}" if t else f"- {u}" for t, u in shown) + more
    return header + body


def visit_tool(reader: PageReader, *, options: VisitOptions = VisitOptions(), llm: LLMClient | None = None) -> Tool:
    """The `visit` tool: `url` (string or list) and `goal` → per page, evidence (and a summary when `llm` is given)."""

    def one(url: str, goal: str) -> tuple[str, bool]:
        try:
            return describe_page(reader.read(url), goal, options, llm), True
        except (ToolError, http.HttpError) as exc:
            return f"Could not visit {url!r}: {exc}", False

    def fn(args: dict[str, Any]) -> str:
        urls, goal = args["url"], args["goal"]
        if len(urls) > options.max_urls:
            raise ToolError(f"at most {options.max_urls} urls per call, got {len(urls)}")
        with ThreadPoolExecutor(max_workers=len(urls)) as pool:
            parts = list(pool.map(lambda u: one(u, goal), urls))
        text = "\n=======\n".join(p for p, _ in parts)
        if not any(ok for _, ok in parts):
            raise ToolError(text)
        return text

    description = (
        "Visit web page(s) and return the evidence they hold for a goal. Give the url(s) and what you are looking for."
    )
    return Tool("visit", description, VISIT_PARAMETERS, fn)
