"""Read tool observations the way an agent does: search hits, visited pages, and the facts their sentences state.

The embedded expert acts only on what these functions find in the observation text the tools
returned: hit titles and urls, page links, relation sentences ("X was founded by Y."), attribute
sentences ("X was born on 3 March 1962.") and the opening line ("X is a painter."). The sentence
shapes are the world's (`jaxseeker.world.schema`), the observation layout the tools' (`search`,
`visit`). Nothing here looks at the world itself.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import re

from jaxseeker.agent.prompts import TOOL_RESPONSE_CLOSE, TOOL_RESPONSE_OPEN
from jaxseeker.tools.extract import split_sentences
from jaxseeker.world.entities import iso_date
from jaxseeker.world.phrases import MONTHS
from jaxseeker.world.query import DateIn, Is, LabelIs, NameInitial, NumberIn
from jaxseeker.world.schema import ATTRIBUTES, RELATIONS

_BLOCK = re.compile(re.escape(TOOL_RESPONSE_OPEN) + r"\n?(.*?)\n?" + re.escape(TOOL_RESPONSE_CLOSE), re.DOTALL)
_SEPARATOR = "\n=======\n"
_HEADER = re.compile(r"\ASearch results for '(.*)':\n", re.DOTALL)
_HIT = re.compile(r"^\[(\d+)\] (.*)\n(\S+)\n(.*)$", re.MULTILINE)
_MORE = re.compile(r"\A(\d+) more\Z")
_COMMA = re.compile(r", (?![^()]*\))")  # a list's comma, not one inside a name's brackets (`Melle (Vakaga, CF)`)
_DATE = re.compile(r"(\d{1,2}) (" + "|".join(MONTHS) + r") (\d{1,4})")
_YEAR = re.compile(r"\Ain (\d{1,4})\Z")  # a year-precision date as pages say it (`world.pages.say_attribute`)
_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")


@dataclasses.dataclass(frozen=True)
class SeenHit:
    """One search result as shown: rank, title, url, snippet."""

    rank: int
    title: str
    url: str
    snippet: str


@dataclasses.dataclass(frozen=True)
class SeenSearch:
    """The results of one query (an empty `hits` for "No results" or a failed query)."""

    query: str
    hits: tuple[SeenHit, ...]


@dataclasses.dataclass(frozen=True)
class SeenPage:
    """A visited page as shown: title, url, the evidence text and the listed links (title → url); the text ends with
    one sentence a listed link ("T links to L."), so `related` reads a `links_to` hop as it reads any relation."""

    title: str
    url: str
    text: str
    links: dict[str, str]


def tool_responses(observation: str) -> list[str]:
    """The bodies of the `<tool_response>` blocks of an observation message (the whole text if it has none)."""
    bodies = _BLOCK.findall(observation)
    return bodies if bodies else [observation]


def parse_search(text: str) -> list[SeenSearch]:
    """Every query's results in one search observation (queries that failed or found nothing have no hits)."""
    found = []
    for part in text.split(_SEPARATOR):
        header = _HEADER.match(part)
        if header is None:
            query = re.search(r"'(.*)'", part)
            found.append(SeenSearch(query.group(1) if query else "", ()))
            continue
        hits = [
            SeenHit(int(m.group(1)), m.group(2).strip(), m.group(3).strip(), m.group(4).strip())
            for m in _HIT.finditer(part[header.end() :])
        ]
        found.append(SeenSearch(header.group(1), tuple(hits)))
    return found


def _section(text: str, start: str, ends: tuple[str, ...]) -> str | None:
    i = text.find(start)
    if i < 0:
        return None
    body = text[i + len(start) :]
    cut = min((j for end in ends if (j := body.find(end)) >= 0), default=len(body))
    return body[:cut].strip()


def parse_visit(text: str) -> list[SeenPage]:
    """Every page of one visit observation; pages that could not be visited are left out."""
    pages = []
    for part in text.split(_SEPARATOR):
        title = re.match(r"\APage: (.*)\nURL: (\S+)", part)
        if title is None:
            continue
        body = _section(part, "\nEvidence in page:\n", ("\n\nSummary:\n", "\n\nLinks on this page:\n"))
        if body is None:
            body = _section(part, "\nContent:\n", ("\n\nLinks on this page:\n",)) or ""
        links = {}
        listed = _section(part, "\n\nLinks on this page:\n", ("\n[…",)) or ""
        for line in listed.splitlines():
            if line.startswith("- ") and ": " in line:
                name, _, url = line[2:].rpartition(": ")
                links[name.strip()] = url.strip()
        name = title.group(1).strip()
        said = "".join(f"\n{name} {RELATIONS['links_to'].forward.format(link)}." for link in links)
        pages.append(SeenPage(name, title.group(2).strip(), body + said, links))
    return pages


@functools.lru_cache(maxsize=8192)
def _template_regex(subject: str, template: str) -> re.Pattern:
    before, _, after = template.partition("{}")
    return re.compile(r"\A" + re.escape(f"{subject} {before}") + r"(.+?)" + re.escape(after.rstrip()) + r"\.\Z")


def split_names(listed: str) -> tuple[list[str], int]:
    """`A, B and C` → ([A, B, C], 0); `A, B and 7 more` → ([A, B], 7); `A (X, Y), B and C` → ([A (X, Y), B, C], 0)."""
    head, sep, last = listed.rpartition(" and ")
    parts = [p.strip() for p in _COMMA.split(head)] if sep else []
    more = _MORE.match(last.strip())
    if more:
        return parts, int(more.group(1))
    return [*parts, last.strip()], 0


def related(text: str, subject: str, rel: str, forward: bool) -> tuple[list[str], int, list[str]]:
    """Names the page says `subject` is joined to by `rel` (forward: subject is the source), how many more
    the page leaves unnamed, and the sentences that say so."""
    spec = RELATIONS[rel]
    pattern = _template_regex(subject, spec.forward if forward else spec.backward)
    names, more, said = [], 0, []
    for sentence in split_sentences(text):
        m = pattern.match(sentence)
        if m is None:
            continue
        said.append(sentence)
        if forward and spec.forward != spec.backward:  # a symmetric phrase ("borders") may list several
            names.append(m.group(1).strip())
        else:
            listed, n = split_names(m.group(1))
            names.extend(listed)
            more += n
    return names, more, said


def read_date(text: str, precision: str = "day") -> str | None:
    """The ISO date of the first `3 March 1962` in `text` (at `precision` "year", of `in 1962`: 1 January), or None."""
    m = _DATE.search(text)
    if m is None:
        year = _YEAR.match(text.strip()) if precision == "year" else None
        return None if year is None or int(year.group(1)) < 1 else iso_date(int(year.group(1)))
    day, month, year = int(m.group(1)), MONTHS.index(m.group(2)) + 1, int(m.group(3))
    try:
        return datetime.date(year, month, day).isoformat()
    except ValueError:
        return None


def read_number(text: str) -> float | None:
    """The first number of `text` (thousands separators allowed), or None."""
    m = _NUMBER.search(text)
    return None if m is None else float(m.group(0).replace(",", ""))


def attribute(text: str, subject: str, attr: str) -> tuple[float | str | None, str | None]:
    """(value, sentence) of attribute `attr` of `subject` stated on the page: an ISO date or a number."""
    spec = ATTRIBUTES[attr]
    pattern = _template_regex(subject, spec.verb)
    for sentence in split_sentences(text):
        m = pattern.match(sentence)
        if m is None:
            continue
        value = read_date(m.group(1), spec.precision) if spec.kind == "date" else read_number(m.group(1))
        if value is not None:
            return value, sentence
    return None, None


def kind_of(text: str, subject: str) -> tuple[str | None, str | None]:
    """(noun, sentence) of the page's opening line `X is a painter.`, or (None, None)."""
    pattern = re.compile(r"\A" + re.escape(subject) + r" is an? (.+?)\.\Z")
    for sentence in split_sentences(text):
        m = pattern.match(sentence)
        if m:
            return m.group(1), sentence
    return None, None


def answer_value(value: float | str, attr: str) -> str:
    """An attribute value as an answer: the year of a date, a number without separators or unit."""
    if ATTRIBUTES[attr].kind == "date":
        return str(int(str(value)[:-6]))
    number = float(value)
    return str(int(number)) if number.is_integer() else str(number)


def check_pred(pred: object, name: str, text: str) -> tuple[bool | None, str]:
    """Does the page of `name` show that `pred` holds? (True / False / None when the page does not say; the
    sentence or reason that decided)."""
    if isinstance(pred, NameInitial):
        words = name.split()
        word = words[0] if pred.position == "first" else words[-1]
        return word[:1].upper() == pred.letter.upper(), f"the name is {name}"
    if isinstance(pred, LabelIs):
        noun, sentence = kind_of(text, name)
        if noun is None:
            return None, ""
        return noun == pred.value, sentence or ""
    if isinstance(pred, DateIn | NumberIn):
        value, sentence = attribute(text, name, pred.attr)
        if value is None:
            return None, ""
        return pred.holds(_Probe(pred.attr, value)), sentence or ""
    if isinstance(pred, Is):
        return None, ""
    return None, ""


class _Probe:
    """A stand-in entity carrying one observed value, so a predicate's own `holds` can judge it."""

    def __init__(self, attr: str, value: float | str):
        self.dates = {attr: value} if isinstance(value, str) else {}
        self.numbers = {attr: value} if not isinstance(value, str) else {}
