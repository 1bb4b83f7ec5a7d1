"""How the embedded expert acts: one tool call per turn, and a memory of the hits, links and pages it has seen.

An agent program is a generator: it yields the text of each assistant turn and receives the
observation message that the rollout loop sends back. `Actor` holds what the agent has read so far
(urls by title from hits and links, pages by title) and the primitive moves built on the tools.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Generator, Sequence
from typing import Any

from jaxseeker.synthesis import reader, thoughts

Turns = Generator[str, str, Any]  # yields assistant turns, receives the observation that follows each


def turn_text(thought: str, *, call: tuple[str, dict] | None = None, answer: str | None = None) -> str:
    """An assistant turn: `<think>…</think>` then one tool call or the answer."""
    head = f"<think>{' '.join(thought.split())}</think>\n"
    if call is not None:
        body = json.dumps({"name": call[0], "arguments": call[1]}, ensure_ascii=False)
        return f"{head}<tool_call>\n{body}\n</tool_call>"
    return f"{head}<answer>{answer}</answer>"


def join(*parts: str) -> str:
    """Sentences joined by single spaces (empty parts dropped)."""
    return " ".join(p.strip() for p in parts if p and p.strip())


class Actor:
    """The tool moves of an agent program, with a memory of what the observations showed."""

    def __init__(
        self,
        rng: random.Random,
        link_rate: float,
        snippet_rate: float = 0.0,
        slip_rate: float = 0.0,
        slips: Callable[[str], Sequence[str]] | None = None,
    ):
        self.rng, self.link_rate, self.snippet_rate = rng, link_rate, snippet_rate
        self.slip_rate, self.slips = slip_rate, slips
        self.untrained: list[str] = []  # turns written as a policy's mistake, to keep out of the SFT loss
        self.urls: dict[str, str] = {}
        self.pages: dict[str, reader.SeenPage] = {}
        self.hits: dict[str, reader.SeenHit] = {}

    def act(self, thought: str, tool: str, arguments: dict, *, trained: bool = True) -> Turns:
        """One tool call; returns the bodies of the observation's tool responses. `trained=False`: the turn is a
        mistake shown for the recovery after it (listed in `untrained`)."""
        text = turn_text(thought, call=(tool, arguments))
        if not trained:
            self.untrained.append(text)
        observation = yield text
        return reader.tool_responses(observation)

    def search(self, thought: str, queries: list[str], *, trained: bool = True) -> Turns:
        """A search call; remembers the hits and their urls."""
        bodies = yield from self.act(thought, "search", {"query": queries}, trained=trained)
        results = reader.parse_search(bodies[0])
        for result in results:
            for hit in result.hits:
                self.urls.setdefault(hit.title, hit.url)
                self.hits.setdefault(hit.title, hit)
        return results

    def visit(self, thought: str, urls: list[str], goal: str) -> Turns:
        """A visit call; remembers the pages and their links."""
        bodies = yield from self.act(thought, "visit", {"url": urls, "goal": goal})
        pages = reader.parse_visit(bodies[0])
        for page in pages:
            self.pages[page.title] = page
            for title, url in page.links.items():
                self.urls.setdefault(title, url)
        return pages

    def open(
        self,
        name: str,
        goal: str,
        lead: str,
        *,
        noun: str = "",
        brief: bool = False,
        enough: Callable[[str], bool] | None = None,
    ) -> Turns:
        """The page of `name`: by a link seen before, else from a search hit titled `name` (one retry with
        `noun` added); None when the tools do not show it. `brief`: `lead` already says what is done.
        `enough(snippet)`: the hit's snippet already holds what is needed, so (at `snippet_rate`) it stands in
        for the page and no visit is made."""
        if name in self.pages:
            return self.pages[name]
        if name in self.urls and self.rng.random() < self.link_rate:
            action = "" if brief else thoughts.open_link(self.rng, name, goal)
            pages = yield from self.visit(join(lead, action), [self.urls[name]], goal)
            return next((p for p in pages if p.title == name), None)
        action = "" if brief and lead else thoughts.search_name(self.rng, name)
        lead = yield from self.slip(name, join(lead, action))
        results = yield from self.search(lead, [name])
        hit = next((h for r in results for h in r.hits if h.title == name), None)
        if hit is None:
            results = yield from self.search(thoughts.retry_search(self.rng, name), [f"{name} {noun}".strip()])
            hit = next((h for r in results for h in r.hits if h.title == name), None)
            if hit is None:
                return None
        if (page := self.from_snippet(hit, enough)) is not None:
            return page
        pages = yield from self.visit(thoughts.open_hit(self.rng, name, hit.rank, goal), [hit.url], goal)
        return next((p for p in pages if p.title == name), None)

    def from_snippet(self, hit: reader.SeenHit, enough: Callable[[str], bool] | None) -> reader.SeenPage | None:
        """At `snippet_rate`, the hit's snippet standing in for its page when `enough(snippet)`; else None."""
        if enough is None or not self.snippet_rate or not enough(hit.snippet) or self.rng.random() >= self.snippet_rate:
            return None
        return reader.SeenPage(hit.title, hit.url, hit.snippet, {})

    def slip(self, name: str, thought: str) -> Turns:
        """At `slip_rate`: the small policy's commonest mistake and its recovery. The thought names `name`, the query
        miscopies it (another name from `slips`, untrained), and the next thought sees the results are about
        something else; returns the thought for the right search (`thought` itself when there is no slip)."""
        options = list(self.slips(name)) if self.slips is not None and self.slip_rate else []
        if not options or self.rng.random() >= self.slip_rate:
            return thought
        wrong = self.rng.choice(options)
        results = yield from self.search(thought, [wrong], trained=False)
        return thoughts.slipped(self.rng, name, wrong, [h.title for r in results for h in r.hits])

    def open_many(self, names: list[str], goal: str, lead: str) -> Turns:
        """The pages of several names in one visit (urls from what was seen, else one search for them all)."""
        missing = [n for n in names if n not in self.urls]
        if missing:
            yield from self.search(join(lead, thoughts.find_pages(self.rng, missing)), missing)
            lead = ""
        urls = [self.urls[n] for n in names if n in self.urls]
        if not urls:
            return {}
        pages = yield from self.visit(join(lead, thoughts.open_pages(self.rng, names)), urls, goal)
        return {p.title: p for p in pages}
