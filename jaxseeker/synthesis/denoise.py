"""OpenSeeker denoised synthesis (arXiv 2603.15594): the teacher acts on summaries of old observations.

The teacher's context is the question, every observation but the last replaced by a short summary,
and the last observation raw; the rollout loop keeps the raw messages, so the saved trajectory holds
every raw observation and the student learns on raw history. Summaries are cached by observation
text. Offline, `extractive_summary` keeps titles, urls and the page's first sentences; online,
`llm_summarizer` asks an OpenAI-compatible model.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from jaxseeker.agent.episode import Question
from jaxseeker.agent.prompts import format_observation
from jaxseeker.data.records import is_observation
from jaxseeker.synthesis import reader
from jaxseeker.synthesis.teachers import TextTeacher
from jaxseeker.synthesis.turn_engine import TurnWriter
from jaxseeker.tools import LLMClient
from jaxseeker.tools.extract import split_sentences

Summarizer = Callable[[str, str], str]  # (observation message, question) -> its summary
SUMMARY_MARK = "[summary] "


def _summarize_body(body: str, sentences: int) -> str:
    searches = reader.parse_search(body) if body.startswith(("Search results for", "No results for")) else []
    if searches:
        return " ".join(
            f"search '{s.query}': " + ("; ".join(f"[{h.rank}] {h.title} {h.url}" for h in s.hits) or "no results")
            for s in searches
        )
    pages = reader.parse_visit(body)
    if pages:
        return " ".join(f"visited {p.title} ({p.url}): " + " ".join(split_sentences(p.text)[:sentences]) for p in pages)
    return " ".join(body.split())[:200]


def extractive_summary(observation: str, question: str = "", *, sentences: int = 2) -> str:
    """An offline summary of an observation message: hit titles and urls; a page's title, url, first sentences."""
    return " | ".join(_summarize_body(b, sentences) for b in reader.tool_responses(observation))


SUMMARY_PROMPT = """Summarise this result of a web-search agent's tool call in at most three sentences. Keep every \
name, url, date and number that could matter for the agent's question.

Question: {question}

Tool result:
{observation}"""


def llm_summarizer(client: LLMClient, *, max_tokens: int = 200) -> Summarizer:
    """A Summarizer asking an OpenAI-compatible model (the question says what matters)."""

    def summarize(observation: str, question: str) -> str:
        prompt = SUMMARY_PROMPT.format(question=question or "(not given)", observation=observation)
        return client.complete([{"role": "user", "content": prompt}], max_tokens=max_tokens).strip()

    return summarize


def denoised_context(messages: Sequence[dict[str, str]], summarize: Summarizer) -> list[dict[str, str]]:
    """The teacher's view: every observation but the last replaced by its summary (in a `<tool_response>`)."""
    last = max((i for i, m in enumerate(messages) if is_observation(m)), default=-1)
    question = next((m["content"] for m in messages if m["role"] == "user" and not is_observation(m)), "")
    out = []
    for i, m in enumerate(messages):
        if i != last and is_observation(m):
            summary = summarize(m["content"], question)
            m = {"role": m["role"], "content": format_observation([SUMMARY_MARK + summary])}
        out.append(dict(m))
    return out


class DenoisedTeacher(TextTeacher):
    """A text teacher that writes every turn from the denoised context (the loop still keeps raw messages).

    `contexts`, when a list, receives every context the inner teacher was shown (for inspection and tests).
    """

    def __init__(
        self,
        inner: TextTeacher,
        summarize: Summarizer = extractive_summary,
        contexts: list[list[dict[str, str]]] | None = None,
    ):
        self.inner, self.summarize, self.contexts = inner, summarize, contexts
        self.name = f"{inner.name}+denoised"
        self.workers, self.slots = inner.workers, inner.slots
        self._cache: dict[str, str] = {}

    def _summary(self, observation: str, question: str) -> str:
        key = question + "\x00" + observation
        if key not in self._cache:
            self._cache[key] = self.summarize(observation, question)
        return self._cache[key]

    def writer(self, questions: Sequence[Question], seed: int) -> TurnWriter:
        """The inner teacher's writer, shown the denoised context."""
        inner = self.inner.writer(questions, seed)

        def write(messages: list[dict[str, str]], request_id: str) -> str:
            context = denoised_context(messages, self._summary)
            if self.contexts is not None:
                self.contexts.append(context)
            return inner(context, request_id)

        write.release = getattr(inner, "release", None)  # type: ignore[attr-defined]
        return write
