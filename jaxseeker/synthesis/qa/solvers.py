"""Solvers: anything that answers a question, used for the difficulty / solvability filters and the stats.

A solver is a callable `SolverTask -> str`. The task carries the question text, its structured
constraints (when known) and the evidence the solver may read (entity ids; None means closed book).
Shipped here: `RuleSolver`, the embedded one, and `PromptSolver`, which turns any text-completion
function (an OpenAI-compatible client, the jaxseeker policy) into a solver.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable

from jaxseeker.synthesis.qa.render import answer_text
from jaxseeker.world import Query, World


@dataclasses.dataclass(frozen=True)
class SolverTask:
    """A question for a solver: text, constraints (optional) and readable evidence (None: closed book)."""

    question: str
    query: Query | None = None
    evidence: tuple[str, ...] | None = None


Solver = Callable[[SolverTask], str]


class RuleSolver:
    """The embedded solver: evaluates the constraints over the facts it can read and answers with the most
    linked candidate (a popular guess when the facts it knows leave several).

    What it can read: the task's evidence when given; otherwise its "memory" (the most linked
    `memory_share` of the world, as a closed-book model knows famous things), plus, when
    `search_k > 0`, the entities of the top search hits for the question and the named entities,
    expanded `hops` times through their links, at most `budget` entities (an agent with a search tool).
    """

    def __init__(
        self, world: World, *, memory_share: float = 0.02, search_k: int = 0, hops: int = 0, budget: int = 400
    ):
        self.world, self.search_k, self.hops, self.budget = world, search_k, hops, budget
        ranked = sorted(world.entities, key=lambda i: (-world.degree(i), i))
        self.memory = frozenset(ranked[: int(memory_share * len(ranked))])

    def readable(self, task: SolverTask) -> set[str]:
        """The entity ids the solver may use for this task."""
        if task.evidence is not None:
            return set(task.evidence)
        known = set(self.memory)
        if self.search_k <= 0:
            return known
        found = [
            e.id
            for h in self.world.corpus.search(task.question, k=self.search_k)
            if (e := self.world.entity_at(h.url)) is not None
        ]
        if task.query is not None:
            found += [a for v in task.query.vars if (a := v.anchor()) is not None]
        reached, frontier = set(found), list(dict.fromkeys(found))
        for _ in range(self.hops):
            nxt = []
            for i in frontier:
                for n in self.world.neighbours(i):
                    if n.id not in reached and len(reached) < self.budget:
                        reached.add(n.id)
                        nxt.append(n.id)
            frontier = nxt
        return known | reached

    def __call__(self, task: SolverTask) -> str:
        """The answer string, or "" when the readable facts give no candidate."""
        if task.query is None:
            return ""
        candidates = self.world.match(task.query, within=self.readable(task))
        if task.query.count:
            return str(len(candidates))
        if not candidates:
            return ""
        best = max(candidates, key=lambda i: (self.world.degree(i), i))
        return answer_text(self.world, task.query, best)


_ANSWER = re.compile(r"answer\s*:\s*(.+)", re.IGNORECASE)


class PromptSolver:
    """A solver from a text-completion function: the prompt has the question and the evidence pages."""

    def __init__(self, complete: Callable[[str], str], world: World, *, max_page_chars: int = 1500):
        self.complete, self.world, self.max_page_chars = complete, world, max_page_chars

    def prompt(self, task: SolverTask) -> str:
        """The prompt: evidence pages (if any), the question, and the requested answer line."""
        parts = []
        for i in task.evidence or ():
            page = self.world.page(self.world.url(i))
            if page is not None:
                parts.append(f"## {page.title}\n{page.text[: self.max_page_chars]}")
        head = "Use only these pages.\n\n" + "\n\n".join(parts) + "\n\n" if parts else "Answer from memory.\n\n"
        return f"{head}Question: {task.question}\nReply with one line: Answer: <short answer>"

    def __call__(self, task: SolverTask) -> str:
        """The text after the last `Answer:` in the completion (the whole reply when there is none)."""
        reply = self.complete(self.prompt(task))
        found = _ANSWER.findall(reply)
        return (found[-1] if found else reply).strip()


def chat_completion(
    base_url: str,
    model: str,
    *,
    api_key_env: str = "OPENAI_API_KEY",
    timeout: float = 60.0,
    max_tokens: int = 256,
    max_retries: int = 3,
) -> Callable[[str], str]:
    """A completion function over any OpenAI-compatible server (`POST {base_url}/chat/completions`) through
    `tools.LLMClient`: each attempt has a deadline of `timeout` s, the reply a size cap, failures `max_retries`
    retries with capped backoff, and the key (from `api_key_env`) never appears in an error (`tools.LLMError`)."""
    from jaxseeker.tools import LLMClient, LLMConfig

    client = LLMClient(
        LLMConfig(
            base_url=base_url,
            model=model,
            api_key_env=api_key_env,
            timeout_s=timeout,
            max_retries=max_retries,
            max_tokens=max_tokens,
        )
    )

    def complete(prompt: str) -> str:
        return client.complete([{"role": "user", "content": prompt}])

    return complete


def reference_solver(world: World) -> RuleSolver:
    """The embedded reference agent for the statistics: search top 5, one hop of links, 300 entities read."""
    return RuleSolver(world, search_k=5, hops=1, budget=300)
