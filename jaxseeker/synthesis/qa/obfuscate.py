"""Obfuscation: loosen a constraint so the true answer still satisfies it but the surface is vaguer.

Value level: an exact date becomes a month, a year, "the early 1960s", "the mid-5th century"; an
exact number becomes "one to two million", "tens of thousands", "more than five hundred", "less than 1%";
a name becomes "a person whose surname starts with F". Query level (on a `Draft`, which knows the true assignment):
blur one value, hide a name, describe an entity by its neighbours, remove a clue. Each edit records
its kind in `Draft.obfuscations` (date, number, name, describe, place, remove).
"""

from __future__ import annotations

import calendar
import dataclasses
import functools
import math
import random

from jaxseeker.synthesis.qa.record import Draft
from jaxseeker.world import DateIn, Edge, Entity, Is, LabelIs, NameInitial, Neighbour, NumberIn, Query, Var, World
from jaxseeker.world.entities import date_parts, iso_date
from jaxseeker.world.schema import ATTRIBUTES, TYPES

DATE_GRAINS = ("day", "month", "year", "decade-part", "decade", "century-part", "century")
NUMBER_GRAINS = ("exact", "fine", "between", "above", "below", "magnitude")


def date_pred(attr: str, iso: str, grain: str) -> DateIn:
    """The range of grain `grain` (day ... century, or early/mid/late-decade/century) holding `iso`."""
    y, m, d = date_parts(iso)
    decade, c = y // 10 * 10, (y - 1) // 100
    if grain == "day":
        lo, hi = (y, m, d), (y, m, d)
    elif grain == "month":
        lo, hi = (y, m, 1), (y, m, calendar.monthrange(y, m)[1])
    elif grain == "year":
        lo, hi = (y, 1, 1), (y, 12, 31)
    elif grain == "decade-part":
        r = y % 10
        part, a, b = ("early", 0, 3) if r <= 3 else ("mid", 4, 6) if r <= 6 else ("late", 7, 9)
        grain = f"{part}-decade"
        lo, hi = (decade + a, 1, 1), (decade + b, 12, 31)
    elif grain == "decade":
        lo, hi = (decade, 1, 1), (decade + 9, 12, 31)
    elif grain == "century-part":
        k = (y - 1) % 100
        part, a, b = ("early", 1, 33) if k < 33 else ("mid", 34, 66) if k < 66 else ("late", 67, 100)
        grain = f"{part}-century"
        lo, hi = (c * 100 + a, 1, 1), (c * 100 + b, 12, 31)
    elif grain == "century":
        lo, hi = (c * 100 + 1, 1, 1), (c * 100 + 100, 12, 31)
    else:
        raise ValueError(f"unknown date grain {grain!r}; known: {DATE_GRAINS}")
    return DateIn(attr, iso_date(max(1, lo[0]), lo[1], lo[2]), iso_date(max(1, hi[0]), hi[1], hi[2]), grain)


def number_pred(attr: str, value: float, grain: str) -> NumberIn:
    """The range of grain `grain` holding `value`: exact; a bracket of its leading digit (`between`: 20,000 to
    30,000) or two leading digits (`fine`: 23,000 to 24,000), or one end of the leading-digit bracket (`above`,
    `below`); its order of magnitude (`magnitude`: 10,000 to 100,000)."""
    if grain == "exact":
        return NumberIn(attr, value, value, "exact")
    if value < 1:
        return NumberIn(attr, None, 1, "below")
    unit = 10 ** math.floor(math.log10(value))
    if grain == "magnitude":
        return NumberIn(attr, unit, unit * 10, "magnitude")
    if grain == "fine" and unit >= 10:
        k = math.floor(value / (unit // 10))
        return NumberIn(attr, k * unit // 10, (k + 1) * unit // 10, "fine")
    k = math.floor(value / unit)
    lo, hi = k * unit, (k + 1) * unit
    if grain in ("between", "fine"):
        return NumberIn(attr, lo, hi, "between")
    if grain == "above":
        return NumberIn(attr, lo, None, "above")
    if grain == "below":
        return NumberIn(attr, None, hi, "below")
    raise ValueError(f"unknown number grain {grain!r}; known: {NUMBER_GRAINS}")


def date_precision(attr: str) -> str:
    """The grain a date attribute is known to: "day", or "year" for year-only facts (see `AttrSpec`)."""
    spec = ATTRIBUTES.get(attr)
    return spec.precision if spec is not None else "day"


def exact_pred(e: Entity, attr: str) -> DateIn | NumberIn:
    """The exact predicate for one attribute of `e` (a date at the grain it is known to)."""
    if attr in e.dates:
        return date_pred(attr, e.dates[attr], date_precision(attr))
    return number_pred(attr, e.numbers[attr], "exact")


def _date_rank(grain: str) -> int:
    for unit in ("decade", "century"):
        if grain.endswith("-" + unit):
            return DATE_GRAINS.index(unit + "-part")
    return DATE_GRAINS.index(grain)


def blur_value(p: DateIn | NumberIn, e: Entity, rng: random.Random) -> DateIn | NumberIn | None:
    """A looser predicate on the same attribute that `e` still satisfies (None if none is looser)."""
    if isinstance(p, DateIn):
        year = date_parts(e.dates[p.attr])[0]
        modern = ("month", "year", "decade-part", "decade") if year >= 1800 else ("decade", "century-part", "century")
        options = [g for g in modern if DATE_GRAINS.index(g) > _date_rank(p.grain)]
        return date_pred(p.attr, e.dates[p.attr], rng.choice(options)) if options else None
    if p.grain != "exact":
        return None
    return number_pred(p.attr, e.numbers[p.attr], rng.choice(("between", "between", "above", "below")))


def name_hint(e: Entity) -> tuple:
    """Predicates that hint at `e` without naming it: its kind label and an initial of its name."""
    spec = TYPES.get(e.type)
    preds: list = []
    if spec and spec.kind_label and spec.kind_label in e.labels:
        preds.append(LabelIs(spec.kind_label, e.labels[spec.kind_label]))
    words = e.name.split()
    position = "last" if e.type == "person" else "first"
    word = words[-1] if position == "last" else words[0]
    preds.append(NameInitial(position, word[0].upper()))
    return tuple(preds)


def kind_preds(e: Entity) -> tuple:
    """The entity's kind label as a predicate (its noun: `baseball player`), when its type has one."""
    spec = TYPES.get(e.type)
    if spec and spec.kind_label and spec.kind_label in e.labels:
        return (LabelIs(spec.kind_label, e.labels[spec.kind_label]),)
    return ()


def _with(d: Draft, query: Query, binding: tuple[str, ...], kind: str) -> Draft:
    return dataclasses.replace(d, query=query, binding=binding, obfuscations=d.obfuscations + (kind,), question=None)


def blur_one_value(d: Draft, world: World, rng: random.Random) -> Draft | None:
    """Blur one exact date or number in the draft (kind `date` or `number`)."""
    spots = [
        (i, k) for i, v in enumerate(d.query.vars) for k, p in enumerate(v.preds) if isinstance(p, (DateIn, NumberIn))
    ]
    rng.shuffle(spots)
    for i, k in spots:
        var = d.query.vars[i]
        looser = blur_value(var.preds[k], world.entity(d.binding[i]), rng)
        if looser is not None:
            preds = var.preds[:k] + (looser,) + var.preds[k + 1 :]
            kind = "date" if isinstance(looser, DateIn) else "number"
            return _with(d, d.query.with_var(i, dataclasses.replace(var, preds=preds)), d.binding, kind)
    return None


def anchored(d: Draft) -> list[int]:
    """Indices of the variables that name their entity."""
    return [i for i, v in enumerate(d.query.vars) if v.anchor() is not None]


def hide_name(d: Draft, world: World, rng: random.Random, i: int | None = None) -> Draft | None:
    """Replace a named entity by its kind and an initial (kind `name`)."""
    options = anchored(d) if i is None else [i]
    if not options:
        return None
    i = rng.choice(options)
    var = d.query.vars[i]
    others = tuple(p for p in var.preds if not isinstance(p, Is))
    new = Var(var.type, others + name_hint(world.entity(d.binding[i])))
    return _with(d, d.query.with_var(i, new), d.binding, "name")


@functools.lru_cache(maxsize=4096)
def neighbours_by_fan(world: World, id: str) -> tuple[tuple[Neighbour, ...], ...]:
    """The neighbours of `id` grouped by fan (how many entities share that neighbour through the same
    relation), fewest first: the most distinctive facts about `id` come first."""
    groups: dict[int, list[Neighbour]] = {}
    for n in world.neighbours(id):
        fan = len(world.sources(n.id, n.rel) if n.direction == "out" else world.targets(n.id, n.rel))
        groups.setdefault(fan, []).append(n)
    return tuple(tuple(groups[f]) for f in sorted(groups))


def least_shared(world: World, id: str, avoid: set[str], k: int, rng: random.Random) -> list[Neighbour]:
    """Up to `k` neighbours of `id` outside `avoid`, fewest-fan first, ties in random order (a hub's group
    of thousands is sampled, never scanned)."""
    found: list[Neighbour] = []
    for group in neighbours_by_fan(world, id):
        want = k - len(found)
        sample = rng.sample(group, min(len(group), want + len(avoid)))
        found += [n for n in sample if n.id not in avoid][:want]
        if len(found) >= k:
            break
    return found


def describe(d: Draft, world: World, rng: random.Random, i: int | None = None, k: int = 1) -> Draft | None:
    """Replace a named entity by a description from `k` of its neighbours (kind `place` for places, else `describe`):
    the least shared ones, so the description stays distinctive."""
    options = anchored(d) if i is None else [i]
    if not options:
        return None
    i = rng.choice(options)
    e = world.entity(d.binding[i])
    nearest = least_shared(world, e.id, set(d.binding), max(k, 3), rng)
    if not nearest:
        return None
    picked: list[Neighbour] = []
    for n in nearest:
        if len(picked) < k and n.id not in {p.id for p in picked}:
            picked.append(n)
    var = d.query.vars[i]
    q = d.query.with_var(i, Var(var.type, tuple(p for p in var.preds if not isinstance(p, Is)) + kind_preds(e)))
    binding = d.binding
    for n in picked:
        j = len(q.vars)
        edge = Edge(i, n.rel, j) if n.direction == "out" else Edge(j, n.rel, i)
        q = q.add_var(Var(world.entity(n.id).type, (Is(n.id),)), edge)
        binding = binding + (n.id,)
    return _with(d, q, binding, "place" if e.type in ("city", "country") else "describe")


def drop_var(q: Query, binding: tuple[str, ...], i: int) -> tuple[Query, tuple[str, ...]]:
    """The query without variable `i` and its edges (indices after `i` shift down)."""
    if i == q.target:
        raise ValueError("cannot drop the answer variable")

    def shift(v: int) -> int:
        return v - (v > i)

    vars_ = q.vars[:i] + q.vars[i + 1 :]
    edges = tuple(Edge(shift(e.src), e.rel, shift(e.dst)) for e in q.edges if i not in (e.src, e.dst))
    return dataclasses.replace(q, vars=vars_, edges=edges, target=shift(q.target)), binding[:i] + binding[i + 1 :]


def remove_clue(d: Draft, rng: random.Random) -> Draft | None:
    """Remove one salient clue: a leaf variable (with its edge) or one attribute / name predicate (kind `remove`)."""
    q = d.query
    leaves = [i for i in range(len(q.vars)) if i != q.target and q.degree(i) == 1 and len(q.vars) > 2]
    preds = [
        (i, k)
        for i, v in enumerate(q.vars)
        for k, p in enumerate(v.preds)
        if isinstance(p, (DateIn, NumberIn, NameInitial)) and (q.edges or len(v.preds) > 1)
    ]
    choices = [("leaf", i, -1) for i in leaves] + [("pred", i, k) for i, k in preds]
    if not choices:
        return None
    what, i, k = rng.choice(choices)
    if what == "leaf":
        nq, binding = drop_var(q, d.binding, i)
        return _with(d, nq, binding, "remove")
    var = q.vars[i]
    return _with(d, q.with_var(i, Var(var.type, var.preds[:k] + var.preds[k + 1 :])), d.binding, "remove")


def add_attribute(d: Draft, world: World, rng: random.Random, i: int, blur: bool) -> Draft | None:
    """Add one attribute of variable `i`'s entity it does not constrain yet (blurred when `blur`)."""
    e = world.entity(d.binding[i])
    var = d.query.vars[i]
    have = {p.attr for p in var.preds if isinstance(p, (DateIn, NumberIn))}
    free = sorted(a for a in list(e.dates) + list(e.numbers) if a not in have and a != d.query.answer_attr)
    if not free:
        return None
    p = exact_pred(e, rng.choice(free))
    kind = None
    if blur:
        looser = blur_value(p, e, rng)
        if looser is not None:
            p, kind = looser, ("date" if isinstance(looser, DateIn) else "number")
    q = d.query.with_var(i, dataclasses.replace(var, preds=var.preds + (p,)))
    if kind is None:
        return dataclasses.replace(d, query=q, question=None)
    return _with(d, q, d.binding, kind)


def is_unique(d: Draft, world: World) -> bool:
    """True when the draft's constraints single out its true answer in the whole world."""
    return world.match(d.query, limit=2) == [d.truth]


def tighten(d: Draft, world: World, rng: random.Random, steps: int = 4) -> Draft | None:
    """Add (mostly blurred) attributes, hidden entities first, then restore names, until the draft is unique;
    None if it stays ambiguous."""
    for _ in range(steps):
        if is_unique(d, world):
            return d
        q = d.query
        others = [i for i in range(len(q.vars)) if i != q.target and q.vars[i].anchor() is None]
        rng.shuffle(others)
        for i in others + [q.target]:
            wider = add_attribute(d, world, rng, i, blur=rng.random() < 0.7)
            if wider is not None:
                d = wider
                break
        else:
            if not others:
                return None
            i = rng.choice(others)
            var = q.vars[i]
            d = dataclasses.replace(d, query=q.with_var(i, Var(var.type, (Is(d.binding[i]),) + var.preds)))
    return d if is_unique(d, world) else None
