"""The embedded expert's plan: from a QA record's evidence (its constraints and their true entities) to a route.

A route starts at a named entity of the question (the one with the shortest way to the answer) and
follows the constraint edges to the answer variable, one hop per page. The plan also says, for any
variable, which clues can be checked on a candidate's page and how the question phrases them.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Mapping
from typing import Any

from jaxseeker.synthesis.qa.render import (
    article,
    join,
    noun,
    plural,
    pred_phrase,
)
from jaxseeker.world import DateIn, Is, LabelIs, NumberIn, Query, Var, date_parts
from jaxseeker.world.phrases import MONTHS, say_number
from jaxseeker.world.schema import ATTRIBUTES, RELATIONS


@dataclasses.dataclass(frozen=True)
class Hop:
    """One step of the route: from variable `src` to `dst` by relation `rel` (`forward`: `src` is the edge's source)."""

    rel: str
    forward: bool
    src: int
    dst: int


@dataclasses.dataclass(frozen=True)
class Plan:
    """The constraints, the true entity id of each variable, the named variable to start from (None: no name
    is given) and the hops from it to the answer variable."""

    query: Query
    binding: tuple[str, ...]
    start: int | None
    hops: tuple[Hop, ...]

    @property
    def anchors(self) -> list[int]:
        """Variables the question names."""
        return [i for i, v in enumerate(self.query.vars) if v.anchor() is not None]


def evidence_of(meta: Mapping[str, Any]) -> tuple[Query, tuple[str, ...]]:
    """(constraints, true entity per variable) of a QA record's `meta`; ValueError naming the missing key."""
    inner = meta.get("meta", meta)
    if not isinstance(inner, Mapping) or "query" not in inner or "entities" not in inner:
        raise ValueError(
            "the expert needs a QA record with meta.query and meta.entities (from `jaxseeker synth RECIPE`), "
            f"got keys {sorted(inner) if isinstance(inner, Mapping) else type(inner).__name__}"
        )
    query = Query.from_json(inner["query"])
    binding = tuple(str(i) for i in inner["entities"])
    if len(binding) != len(query.vars):
        raise ValueError(f"meta.entities has {len(binding)} ids for {len(query.vars)} variables")
    return query, binding


def _route(q: Query, start: int) -> list[Hop] | None:
    """The shortest hops from `start` to the target (undirected over the edges), or None when unreachable."""
    back: dict[int, Hop | None] = {start: None}
    queue = collections.deque([start])
    while queue:
        i = queue.popleft()
        if i == q.target:
            break
        for e in q.edges:
            for a, b, forward in ((e.src, e.dst, True), (e.dst, e.src, False)):
                if a == i and b not in back:
                    back[b] = Hop(e.rel, forward, a, b)
                    queue.append(b)
    if q.target not in back:
        return None
    hops, i = [], q.target
    while back[i] is not None:
        hops.append(back[i])
        i = back[i].src
    return hops[::-1]


def route_from(query: Query, start: int) -> tuple[Hop, ...] | None:
    """The hops from variable `start` to the answer variable (None when no edges join them)."""
    hops = _route(query, start)
    return None if hops is None else tuple(hops)


def make_plan(meta: Mapping[str, Any]) -> Plan:
    """The route of a QA record: from the named variable closest to the answer (ties: the first)."""
    query, binding = evidence_of(meta)
    best: tuple[int, list[Hop]] | None = None
    for i, v in enumerate(query.vars):
        if v.anchor() is None:
            continue
        hops = _route(query, i)
        if hops is not None and (best is None or len(hops) < len(best[1])):
            best = (i, hops)
    if best is None:
        return Plan(query, binding, None, ())
    return Plan(query, binding, best[0], tuple(best[1]))


@dataclasses.dataclass(frozen=True)
class Clue:
    """Something a candidate's page can show: a predicate, or a relation to a named entity (`other`), or to any
    of several entities a page listed (`among`)."""

    phrase: str
    pred: object | None = None
    rel: str | None = None
    forward: bool = True
    other: str | None = None
    among: frozenset[str] = frozenset()


def clue_phrase(v: Var, p: object) -> str | None:
    """The clue phrase of a predicate; the kind label (said as the noun in the question) as `is a painter`."""
    if isinstance(p, LabelIs) and pred_phrase(v, p) is None:
        return f"is {article(p.value)}"
    return pred_phrase(v, p)


def clues(plan: Plan, var: int, names: Mapping[int, str], skip: str | None = None) -> list[Clue]:
    """What the question says about variable `var` that its page can confirm: its predicates (anchors aside)
    and its relations to entities the question names (`names`: variable → name), except to `skip`."""
    v: Var = plan.query.vars[var]
    found = [Clue(phrase, pred=p) for p in v.preds if not isinstance(p, Is) and (phrase := clue_phrase(v, p))]
    for e in plan.query.edges:
        for a, b, forward in ((e.src, e.dst, True), (e.dst, e.src, False)):
            if a == var and b in names and b != var and names[b] != skip:
                spec = RELATIONS[e.rel]
                phrase = (spec.forward if forward else spec.backward).format(names[b])
                found.append(Clue(phrase, rel=e.rel, forward=forward, other=names[b]))
    return found


def need(found: list[Clue]) -> str:
    """The clues as one verb phrase: `was born in 1932 and is a member of X`."""
    return join([c.phrase for c in found])


def _tidy(text: str) -> str:
    return " ".join(text.split())


def hop_goal(plan: Plan, hop: Hop, here: str) -> str:
    """The visit goal of a hop, worded as `here`'s page says it: `the person Theifal Press was founded by`,
    `Theifal Press published which work`."""
    v = plan.query.vars[hop.dst]
    spec = RELATIONS[hop.rel]
    if hop.forward:
        return _tidy(f"the {noun(v) if spec.functional else plural(v)} {here} {spec.forward.format('')}")
    return _tidy(f"{here} {spec.backward.format('which ' + noun(v))}")


# Each goal shares a word with its attribute's page sentence (ATTRIBUTES), so an offline word-overlap extract finds it.
_NUMBER_GOALS = {
    "population": "the population of {}",
    "area_km2": "the area of {}",
    "forest_pct": "the forest cover of {}",
    "elevation_m": "the elevation of {}",
    "employees": "the number of employees of {}",
    "pages": "the number of pages of {}",
    "duration_min": "how long {} runs for",
    "height_cm": "how tall {} is",
    "attendance": "the attendance of {}",
    "coastline_km": "the coastline of {}",
    "length_km": "how long {} is",
    "weight_kg": "the listed weight of {}",
}


def answer_goal(attr: str, here: str) -> str:
    """The visit goal of the answer attribute: `when X was born`, `the population of X`."""
    spec = ATTRIBUTES[attr]
    if spec.kind == "date":
        return _tidy(f"when {here} {spec.verb.format('')}")
    return _NUMBER_GOALS.get(attr, "the " + attr.replace("_", " ") + " of {}").format(here)


MAX_YEARS = 10  # a date clue spanning fewer years is searched as the list of its years

_STOP = frozenset(["a", "an", "the", "of", "at", "for", "is", "was", "has", "have", "in", "on"])


def search_words(v: Var) -> str | None:
    """A query for an unnamed variable from its sharp clues (`publisher founded June 2024`, `poet born 1950 1951 …`),
    or None when it has none."""
    words = []
    for p in v.preds:
        if isinstance(p, DateIn) and p.grain in ("day", "month"):
            y, m, d = date_parts(p.lo)
            value = f"{d} {MONTHS[m - 1]} {y}" if p.grain == "day" else f"{MONTHS[m - 1]} {y}"
        elif isinstance(p, DateIn) and date_parts(p.hi)[0] - date_parts(p.lo)[0] < MAX_YEARS:
            value = " ".join(str(y) for y in range(date_parts(p.lo)[0], date_parts(p.hi)[0] + 1))
        elif isinstance(p, NumberIn) and p.grain == "exact":
            value = say_number(p.lo)
        else:
            continue
        verb = [w for w in ATTRIBUTES[p.attr].verb.replace("{}", " ").split() if w not in _STOP]
        words.append(" ".join([*verb, value]))
    return f"{noun(v)} {' '.join(words)}" if words else None
