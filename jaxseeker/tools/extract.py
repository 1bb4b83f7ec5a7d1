"""Reduce a page to what a visit goal needs: offline by word overlap, or by an LLM (rational / evidence / summary)."""

from __future__ import annotations

import dataclasses
import re
import threading

import json_repair
import Stemmer

from jaxseeker.tools.keys import cut
from jaxseeker.tools.llm_client import LLMClient, LLMConfig, LLMError

_WORD = re.compile(r"\w+", re.UNICODE)
# A sentence ends at '.', '!' or '?' before a space, except after an initial or a "St." / "Ste." / "Mt.": names
# such as "P. J. Walters" and "St. Louis" stay whole (a sentence that ends in an initial is joined to the next).
_SENTENCE_END = re.compile(r"(?<=[.!?])(?<!\b[A-Z]\.)(?<!\bSt\.)(?<!\bSte\.)(?<!\bMt\.)\s+")
_THREAD = threading.local()  # a PyStemmer Stemmer is not thread-safe; visits run in a thread pool
_STOPWORDS = frozenset(
    """a an and are as at be by for from has have in is it its of on or that the this to was were what when where which
    who whom whose why how with find page information about""".split()
)

# The extractor prompt of WebSailor / WebDancer's visit tool (arXiv 2507.02592), in our words.
EXTRACTOR_PROMPT = """Read the webpage content below and extract what serves the user's goal.

## Webpage content
{content}

## User goal
{goal}

## Guidelines
1. Rational: find the parts of the page (sections, tables, figures) that bear directly on the goal.
2. Evidence: copy the relevant information, keeping the original wording and context as fully as possible; \
miss nothing important, several paragraphs are fine.
3. Summary: a short paragraph, logically ordered, that says how the information answers the goal.

Reply with one JSON object with the fields "rational", "evidence" and "summary"."""


@dataclasses.dataclass(frozen=True)
class Extract:
    """What a visit reports about one page for one goal."""

    evidence: str
    summary: str
    rational: str = ""


def truncate(text: str, max_chars: int) -> str:
    """`text` cut to `max_chars` characters (keys redacted before the cut: `keys.cut`), with a marker saying how much
    was cut."""
    if len(text) <= max_chars:
        return text
    return cut(text, max_chars) + f"\n[… {len(text) - max_chars} more characters cut]"


def _content_words(text: str) -> set[str]:
    """The text's words less stopwords, Snowball-stemmed: a goal's `serves` meets a page's `served`."""
    if not hasattr(_THREAD, "stemmer"):
        _THREAD.stemmer = Stemmer.Stemmer("english")
    return set(_THREAD.stemmer.stemWords([w for w in _WORD.findall(text.lower()) if w not in _STOPWORDS]))


def split_sentences(text: str) -> list[str]:
    """The sentences of `text`, initials and "St." kept inside their names (`_SENTENCE_END`)."""
    return [s.strip() for s in _SENTENCE_END.split(text) if s.strip()]


def _word_pairs(text: str) -> set[tuple[str, str]]:
    """The text's adjacent word pairs, lower-cased, stopwords kept: "died in" tells "X died in Y." from
    "X died on …"."""
    words = _WORD.findall(text.lower())
    return set(zip(words, words[1:]))


def _passages(text: str) -> list[str]:
    paragraphs = [p.strip() for p in re.split(r"\n\s*\n", text) if p.strip()]
    if len(paragraphs) > 1:
        return paragraphs
    return split_sentences(text)


def overlap_extract(text: str, goal: str, max_chars: int, max_passages: int = 0) -> str:
    """The passages (paragraphs, else sentences) sharing most words with `goal` (ties: most adjacent word pairs, then
    the first), in page order, within `max_chars`;
    with `max_passages` > 0 at most that many, the best first, even when the whole page would fit (a focused
    extract, as an LLM extractor gives)."""
    goal_words = _content_words(goal)
    passages = _passages(text)
    if not goal_words or (len(text) <= max_chars and max_passages <= 0):
        return truncate(text, max_chars)
    overlap = [len(goal_words & _content_words(p)) for p in passages]
    if max(overlap, default=0) == 0:
        return truncate(text, max_chars)
    goal_pairs = _word_pairs(goal)
    pairs = [len(goal_pairs & _word_pairs(p)) for p in passages]
    kept: list[int] = []
    used = 0
    for i in sorted(range(len(passages)), key=lambda i: (-overlap[i], -pairs[i], i)):
        if overlap[i] == 0 or 0 < max_passages <= len(kept):
            break
        if used + len(passages[i]) + 2 > max_chars:
            if not kept:
                kept.append(i)
                used = max_chars
            continue
        kept.append(i)
        used += len(passages[i]) + 2
    return truncate("\n\n".join(passages[i] for i in sorted(kept)), max_chars)


def parse_extract(reply: str) -> Extract | None:
    """The extractor's JSON reply (fenced or near-JSON, repaired) as an Extract; None without evidence or summary."""
    body = reply.strip()
    fenced = re.search(r"```(?:json)?\s*(.*?)```", body, re.DOTALL)
    if fenced:
        body = fenced.group(1)
    start = body.find("{")
    if start < 0:
        return None
    try:
        data = json_repair.loads(body[start:])
    except Exception:  # noqa: BLE001 - json_repair may fail on pathological input; that is "no extract"
        return None
    if not isinstance(data, dict):
        return None
    fields = {k: data.get(k) for k in ("evidence", "summary", "rational")}
    text = {k: v if isinstance(v, str) else ("" if v is None else str(v)) for k, v in fields.items()}
    if not text["evidence"].strip() and not text["summary"].strip():
        return None
    return Extract(evidence=text["evidence"], summary=text["summary"], rational=text["rational"])


EXTRACT_MAX_TOKENS = 2048  # the extractor's reply cap where the summariser's config sets none


def reply_cap(summarizer: LLMConfig | None) -> int:
    """The extractor's reply cap: the summariser's `max_tokens`, else `EXTRACT_MAX_TOKENS` (`plan` sizes by it too)."""
    return (summarizer.max_tokens if summarizer else None) or EXTRACT_MAX_TOKENS


def llm_extract(llm: LLMClient, content: str, goal: str, *, max_input_chars: int) -> Extract:
    """Ask `llm` for the goal-relevant evidence and a summary of `content`, in at most `reply_cap` tokens; LLMError
    when it fails or gives no JSON."""
    prompt = EXTRACTOR_PROMPT.format(content=truncate(content, max_input_chars), goal=goal)
    reply = llm.complete([{"role": "user", "content": prompt}], max_tokens=reply_cap(llm.config))
    extract = parse_extract(reply)
    if extract is None:
        raise LLMError(
            f"extractor reply from {llm.url} has no JSON evidence/summary: {cut(reply, 120)!r}", url=llm.url, status=200
        )
    return extract
