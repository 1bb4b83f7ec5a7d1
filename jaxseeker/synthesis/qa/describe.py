"""Described entities (SailorFog's way of hiding a name): an entity said by its own facts, up to two levels deep.

`describe_entity` replaces the name (or the first-letter hint) of one variable by a description built from the
entity's own facts: one vague value of its own (`a city of tens of thousands`), or a neighbour that is itself said by
one vague value (`the birthplace of a player who debuted in the 1910s`: two levels); when none of those fits, its
whole profile or a neighbour's (every value at its sharpest vague grain, `profiles`), which clue selection then
prunes and blurs. A description is kept when the question stays unique and one search of its words does not list
the entity's page; of those, one that singles the entity out in the whole world on its own comes first. When no
description keeps the question unique the entity keeps its name; only when the name must go (one search of the
question finds the answer) does it get a first-letter hint (`hide_name`, counted in the record's obfuscations as
`name`).
"""

from __future__ import annotations

import dataclasses
import random

from jaxseeker.synthesis.qa.checks import found_by_one_search
from jaxseeker.synthesis.qa.clues import exact_of, unique, vague_options
from jaxseeker.synthesis.qa.obfuscate import hide_name, kind_preds, least_shared
from jaxseeker.synthesis.qa.record import Draft
from jaxseeker.synthesis.qa.render import render_question
from jaxseeker.world import Edge, Is, NameInitial, Neighbour, Query, Var, World

REGIONS = ("subdivision", "region")  # a named region narrows a described place without naming it
MAX_OPTIONS = 12  # descriptions of one kind tried per entity
HUB_DEGREE = 100  # a profile is never said through a neighbour with more links (`SailorFogConfig.hub_degree`)
ALONE_TRIES = 3  # fitting descriptions tried for one that singles the entity out on its own (a costly match each)


def _own_values(world: World, entity_id: str, skip: set[str], rng: random.Random) -> list:
    """One vague predicate per attribute of the entity not in `skip` (its vaguest that reads vague), shuffled."""
    e = world.entity(entity_id)
    attrs = sorted(a for a in list(e.dates) + list(e.numbers) if a not in skip)
    rng.shuffle(attrs)
    found = []
    for a in attrs:
        options = vague_options(exact_of(e, a), world, e.id, rng)
        if options:
            found.append(options[len(options) // 2])  # a middle grain: vague, yet it narrows
    return found


def _sharp_values(world: World, entity_id: str, skip: set[str], rng: random.Random) -> tuple:
    """Every attribute of the entity not in `skip` at its sharpest grain that still reads vague (`born in the early
    1890s`, `1.8 to 1.9 metres tall`): a profile that singles out most people; clue selection then drops and blurs
    what uniqueness does not need."""
    e = world.entity(entity_id)
    found = []
    for a in sorted(a for a in list(e.dates) + list(e.numbers) if a not in skip):
        options = vague_options(exact_of(e, a), world, e.id, rng)
        if options:
            found.append(options[-1])
    return tuple(found)


def profiles(d: Draft, world: World, i: int, rng: random.Random) -> list[tuple[Var, Var | None, Neighbour | None]]:
    """The last resort of `descriptions`: variable `i` said by all its own values at their sharpest vague grain, then
    through each neighbour (least shared first) said by all of its own."""
    e = world.entity(d.binding[i])
    var = d.query.vars[i]
    keep = tuple(p for p in var.preds if not isinstance(p, (Is, NameInitial)))
    base = keep + tuple(p for p in kind_preds(e) if p not in keep)
    asked = {d.query.answer_attr} if i == d.query.target else set()
    own = _sharp_values(world, e.id, {getattr(p, "attr", None) for p in keep} | asked, rng)
    found = [(Var(var.type, base + own), None, None)] if own else []
    for n in least_shared(world, e.id, set(d.binding), 4, rng):
        if world.degree(n.id) > HUB_DEGREE:  # a team of a thousand players: matching through it is slow, and vague
            continue
        ne = world.entity(n.id)
        theirs = _sharp_values(world, n.id, set(), rng)
        if theirs:
            found.append((Var(var.type, base + own), Var(ne.type, kind_preds(ne) + theirs), n))
    return found


def descriptions(d: Draft, world: World, i: int, rng: random.Random) -> list[tuple[Var, Var | None, Neighbour | None]]:
    """Ways to say variable `i` without its name: (its new variable, a described neighbour's variable or None, the
    neighbour link), one-level and two-level ones interleaved at random, then a named neighbour (`the birthplace of
    Hank Mason`), then two facts: two own values, or an own value and a described or named neighbour, then the
    entity's or a neighbour's whole profile (`profiles`)."""
    e = world.entity(d.binding[i])
    var = d.query.vars[i]
    keep = tuple(p for p in var.preds if not isinstance(p, (Is, NameInitial)))
    base = keep + tuple(p for p in kind_preds(e) if p not in keep)
    have = {getattr(p, "attr", None) for p in keep}
    asked = {d.query.answer_attr} if i == d.query.target else set()
    own = [(Var(var.type, base + (p,)), None, None) for p in _own_values(world, e.id, have | asked, rng)]
    deep, links = [], least_shared(world, e.id, set(d.binding), 4, rng)
    for n in links:
        values = _own_values(world, n.id, set(), rng)[:2]
        ne = world.entity(n.id)
        deep += [(Var(var.type, base), Var(ne.type, kind_preds(ne) + (p,)), n) for p in values]
    options = own + deep
    rng.shuffle(options)
    regions = [n for n in world.neighbours(e.id) if n.direction == "out" and n.id not in d.binding]
    regions = [n for n in regions if world.entity(n.id).type in REGIONS][:1]  # `a city in Minnesota of …`
    named = [(Var(var.type, base), Var(world.entity(n.id).type, (Is(n.id),)), n) for n in links + regions]
    # then more facts at once: two own values, an own value with a described or a named neighbour
    more = [(Var(var.type, a[0].preds + b[0].preds[-1:]), None, None) for a, b in zip(own, own[1:])]
    for extra in own[:2]:
        more += [(Var(var.type, v.preds + extra[0].preds[-1:]), o, n) for v, o, n in deep[:3] + named[-2:]]
    return options[:MAX_OPTIONS] + named[:1] + more[:MAX_OPTIONS] + profiles(d, world, i, rng)


def with_description(d: Draft, i: int, var: Var, other: Var | None, link: Neighbour | None) -> Draft:
    """The draft with variable `i` said as `var`, plus the described neighbour `other` joined by `link`."""
    q = d.query.with_var(i, var)
    binding = d.binding
    if other is not None and link is not None:
        j = len(q.vars)
        q = q.add_var(other, Edge(i, link.rel, j) if link.direction == "out" else Edge(j, link.rel, i))
        binding = binding + (link.id,)
    return dataclasses.replace(d, query=q, binding=binding, obfuscations=d.obfuscations + ("describe",), question=None)


def alone(world: World, entity_id: str, var: Var, other: Var | None, link: Neighbour | None) -> bool:
    """True when the description on its own singles out the entity in the whole world."""
    if other is None or link is None:
        q = Query((var,))
    else:
        q = Query((var, other), (Edge(0, link.rel, 1) if link.direction == "out" else Edge(1, link.rel, 0),))
    return world.match(q, limit=2) == [entity_id]


def searchable(world: World, entity_id: str, var: Var, other: Var | None, link: Neighbour | None) -> bool:
    """True when one search of the description's words (as the realiser says it) lists the entity's page."""
    if other is None or link is None:
        q = Query((var,))
    else:
        q = Query((var, other), (Edge(0, link.rel, 1) if link.direction == "out" else Edge(1, link.rel, 0),))
    return found_by_one_search(world, render_question(world, q, natural=True), entity_id)


def describe_entity(
    d: Draft, world: World, rng: random.Random, i: int, *, hint: bool = False, own_only: bool = False
) -> Draft:
    """Variable `i` described (see the module docstring); unchanged (named) when no description keeps the answer
    unique, or with `hint` (the name must go: one search of it finds the answer) hinted by a first letter.
    `own_only`: by its own facts alone, no neighbour (an entity that itself describes another: two levels at most)."""
    options = [o for o in descriptions(d, world, i, rng) if not (own_only and o[1] is not None)]
    fits = []
    for option in options:
        new = with_description(d, i, *option)
        if unique(world, new.query, new.truth) and not searchable(world, d.binding[i], *option):
            if alone(world, d.binding[i], *option):
                return new
            fits.append(new)
            if len(fits) == ALONE_TRIES:
                break
    if fits:
        return fits[0]
    if not hint:
        return d
    hinted = hide_name(d, world, rng, i)
    return hinted if hinted is not None and unique(world, hinted.query, hinted.truth) else d
