"""How a searcher starts a question that names nothing, and the SailorFog drafts it can start.

Pages state exact dates (`… was born on 3 March 1891.`), so a described entity's date clues of a few years (`born
in the mid-1920s`, `died early in the 2010s`) are searched as years: first the whole profile in one query, every
year of each clue listed (`baseball player born 1924 1925 1926 died 2014 2015 2016`), then the sharpest clue one
year a query with the others' years listed (`hunt_queries`), a few queries a call, in an order that does not
depend on the answer. `hunt_start` is the variable whose searches list its page soonest (what the embedded expert
hunts); a nameless SailorFog draft no search can start gets the date clues of one described entity sharpened to the
part of their decade, when that lets the searches find it (`make_huntable`).
"""

from __future__ import annotations

import dataclasses
import functools
import random
from collections.abc import Callable

from jaxseeker.synthesis.qa.checks import SEARCH_K
from jaxseeker.synthesis.qa.clues import prune, unique
from jaxseeker.synthesis.qa.obfuscate import date_pred
from jaxseeker.synthesis.qa.record import Draft
from jaxseeker.synthesis.qa.render import noun
from jaxseeker.world import DateIn, NumberIn, Query, Var, World, date_parts
from jaxseeker.world.phrases import MONTHS, say_number
from jaxseeker.world.schema import ATTRIBUTES

MAX_SPAN = 10  # a date clue of fewer years than this is searched as its years
PER_CALL, CALLS = 3, 8  # queries a search call, calls at most (the embedded expert's `hunt_queries`, `hunt_calls`)
COARSE = ("decade", "century-part", "century")  # date grains `make_huntable` sharpens to the part of a decade
_STOP = frozenset(["a", "an", "the", "of", "at", "for", "is", "was", "has", "have", "in", "on", "its"])


def verb_words(attr: str) -> str:
    """The words of an attribute's page sentence a query keeps: `born`, `made major-league debut`."""
    return " ".join(w for w in ATTRIBUTES[attr].verb.replace("{}", " ").split() if w not in _STOP)


def _years(p: object) -> list[int]:
    """The years of a date clue of fewer than `MAX_SPAN` years, said at a year's grain or coarser ([] otherwise)."""
    if not isinstance(p, DateIn) or p.grain in ("day", "month"):
        return []
    lo, hi = date_parts(p.lo)[0], date_parts(p.hi)[0]
    return list(range(lo, hi + 1)) if hi - lo < MAX_SPAN else []


def _exact(p: object) -> str:
    """An exact value's words (`born 3 March 1891`, `lies elevation 353`), or ""."""
    if isinstance(p, DateIn) and p.grain in ("day", "month"):
        y, m, d = date_parts(p.lo)
        return f"{verb_words(p.attr)} {f'{d} ' if p.grain == 'day' else ''}{MONTHS[m - 1]} {y}"
    if isinstance(p, NumberIn) and p.grain == "exact":
        return f"{verb_words(p.attr)} {say_number(p.lo)}"
    return ""


def hunt_queries(v: Var, most: int = PER_CALL * CALLS) -> list[str]:
    """The searches of an unnamed variable's clues, at most `most`: the whole profile in one query (each date clue of
    a few years as all its years, exact values as they are); then, when a clue has several years, the sharpest one a
    year a query with the others as before; then every pair of years of the sharpest two; [] when it has no such
    clue."""
    fixed = [w for p in v.preds if (w := _exact(p))]
    dated = [(p, ys) for p in v.preds if (ys := _years(p))]
    if not dated and not fixed:
        return []

    def query(chosen: dict[int, int]) -> str:
        said = [
            f"{verb_words(p.attr)} {' '.join(map(str, [chosen[k]] if k in chosen else ys))}"
            for k, (p, ys) in enumerate(dated)
        ]
        return " ".join([noun(v), *said, *fixed])

    ranked = sorted(range(len(dated)), key=lambda k: len(dated[k][1]))  # the sharpest clue first
    found = [query({})]
    if ranked and len(dated[ranked[0]][1]) > 1:
        found += [query({ranked[0]: y}) for y in dated[ranked[0]][1]]
    if len(ranked) > 1 and len(dated[ranked[1]][1]) > 1:
        a, b = ranked[:2]
        found += [query({a: x, b: y}) for x in dated[a][1] for y in dated[b][1]]
    return list(dict.fromkeys(found))[:most]


def hunt_start(q: Query, listed: Callable[[int, str], bool], most: int = PER_CALL * CALLS) -> tuple | None:
    """(the call that first lists it, variable, its queries) of the variable that leads to the answer and whose
    searches (`hunt_queries`, `PER_CALL` a call) list its page soonest (`listed(variable, query)`), the first on a
    tie; None when no search lists any."""
    best = None
    for i, v in enumerate(q.vars):
        queries = hunt_queries(v, most)
        if not queries or not _reaches(q, i):
            continue
        k = next((k for k, text in enumerate(queries) if listed(i, text)), None)
        if k is not None and (best is None or k // PER_CALL < best[0]):
            best = (k // PER_CALL, i, queries)
    return best


def searched(world: World, binding: tuple[str, ...]) -> Callable[[int, str], bool]:
    """`listed` of `hunt_start` for a draft: one search (the local search tool's top five) lists the variable's page."""

    def listed(i: int, text: str) -> bool:
        url = world.url(binding[i])
        return any(h.url == url for h in world.corpus.search(text, k=SEARCH_K))

    return listed


def _reaches(q: Query, i: int) -> bool:
    """True when edges join variable `i` to the answer."""
    seen, frontier = {i}, [i]
    while frontier:
        a = frontier.pop()
        for e in q.edges:
            for x, y in ((e.src, e.dst), (e.dst, e.src)):
                if x == a and y not in seen:
                    seen.add(y)
                    frontier.append(y)
    return q.target in seen


def _can_start(world: World, d: Draft) -> bool:
    return hunt_start(d.query, searched(world, d.binding)) is not None


def make_huntable(d: Draft, world: World, rng: random.Random) -> Draft | None:
    """A nameless draft a searcher can start (`hunt_start`): unchanged when one can; else, for one described entity
    at a time, its date clues of a decade or more sharpened to the part of their decade (`born in the mid-1920s`), or
    else its whole profile of dates said so, then the clues the sharper ones make redundant dropped as long as the
    searches still find it; None when no entity's dates make the draft huntable."""
    listed = searched(world, d.binding)
    if hunt_start(d.query, listed) is not None:
        return d
    order = list(range(len(d.query.vars)))
    rng.shuffle(order)
    for i in order:
        var, e = d.query.vars[i], world.entity(d.binding[i])
        asked = d.query.answer_attr if i == d.query.target else None
        sharper = tuple(
            date_pred(p.attr, e.dates[p.attr], "decade-part")
            if isinstance(p, DateIn) and p.grain in COARSE and p.attr != asked and p.attr in e.dates
            else p
            for p in var.preds
        )
        said = {p.attr for p in sharper if isinstance(p, DateIn)}
        profile = sharper + tuple(
            date_pred(a, iso, "decade-part") for a, iso in sorted(e.dates.items()) if iso and a not in said | {asked}
        )
        for preds in dict.fromkeys((sharper, profile)):
            if preds == var.preds:
                continue
            sharp = dataclasses.replace(d, query=d.query.with_var(i, Var(var.type, preds)), question=None)
            if unique(world, sharp.query, sharp.truth) and hunt_start(sharp.query, listed) is not None:
                return prune(sharp, world, rng, cut=True, guard=functools.partial(_can_start, world))
    return None
