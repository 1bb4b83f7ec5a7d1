"""Clue selection: the fewest constraints that keep the answer unique, each as vague as uniqueness allows.

`select` runs on a unique draft (the world's matcher decides every step, so the structured query stays the
source of truth):
1. every unnamed variable gets its kind (`baseball player`, not `person`): a true fact that makes the noun;
2. a name hidden behind its initial (`a team whose name begins with “C”`) is described by one of its own facts
   instead when one keeps the answer unique (`a team that first took the field in the 1880s`);
3. prune: predicates and, with `cut`, whole branches of clues (a named leaf, or a described entity with all that
   describes it) are dropped one at a time, what takes the most words first; a drop is kept when the answer stays
   unique, the question keeps its shape (`keeps`: its level, its hops up to two, a handle to search for) and no
   bare leaf is left (`a baseball team` with nothing said of it);
4. blur: each remaining date or number becomes the vaguest range of the truth that keeps the answer unique:
   an order of magnitude, one end of a leading-digit bracket, the bracket, two leading digits, then the exact
   value; a century, its early / mid / late part, a decade, its part, a year, a month, the day. A range that
   would still read as an exact figure (`between 120 and 130 metres`) or that nearly every entity of the type
   satisfies is skipped, and the shape is kept as in 3;
5. trade: a value that still reads exact (`born in 1865`) becomes a vague one plus one more fact, vague as well
   (`born in the 1860s`, `debuted in the 1880s`), when that pair keeps the answer unique;
6. a question left with nothing to search for (no name, no date to the decade, no exact number) gets a date to
   its decade: a searcher, and the embedded expert, needs somewhere to start.
"""

from __future__ import annotations

import dataclasses
import functools
import random
from collections.abc import Callable

from jaxseeker.synthesis.qa.checks import answer_part, hops, level_of, obfuscations_of, simplify
from jaxseeker.synthesis.qa.lexicon_attributes import attribute_forms
from jaxseeker.synthesis.qa.obfuscate import date_precision, date_pred, drop_var, least_shared, number_pred
from jaxseeker.synthesis.qa.phrasing import kind_key
from jaxseeker.synthesis.qa.record import Draft
from jaxseeker.synthesis.qa.values import reads_exact, say_quantity
from jaxseeker.world import DateIn, Edge, Is, LabelIs, NameInitial, Neighbour, NumberIn, Query, Var, World
from jaxseeker.world.entities import date_parts

DATE_ORDER = ("century", "century-part", "decade", "decade-part", "year", "month", "day")  # vaguest first
CYCLE_FIRST = 1000  # a natural draft tries its cycle edges first (implied containment is the commonest padding)
VACUOUS = 0.9  # a range that most entities of the type satisfy says next to nothing (`less than 2 metres tall`)


def unique(world: World, q: Query, truth: str) -> bool:
    """True when `truth` and nothing else satisfies `q`."""
    return world.match(q, limit=2) == [truth]


def share(world: World, type_: str | None, p: DateIn | NumberIn) -> float:
    """The share of the entities of `type_` with the attribute that satisfy `p` (from the world's value index)."""
    everything = DateIn(p.attr, "", "~", "century") if isinstance(p, DateIn) else NumberIn(p.attr, None, None, "above")
    found, total = world.candidates(type_, p), world.candidates(type_, everything)
    if found is None or not total:
        return 0.0
    return len(found) / len(total)


def value_options(p: DateIn | NumberIn, world: World, entity_id: str, rng: random.Random) -> list[DateIn | NumberIn]:
    """Ranges of the same attribute that the entity satisfies, vaguest first, ending with the exact value; none
    that reads as an exact figure or that nearly every entity of the type satisfies."""
    e = world.entity(entity_id)
    if isinstance(p, DateIn):
        grains = DATE_ORDER[: DATE_ORDER.index(date_precision(p.attr)) + 1]
        options = [date_pred(p.attr, e.dates[p.attr], g) for g in grains]
    else:
        value, forms = e.numbers[p.attr], attribute_forms(p.attr)
        grains = (["magnitude"] if forms.magnitude and value >= 100 else []) + rng.sample(["above", "below"], 2)
        options = []
        for g in [*grains, "between", "fine", "exact"]:
            option = number_pred(p.attr, value, g)
            said = say_quantity(option, forms.word, forms.symbol, scale=forms.scale)
            if g == "exact" or not reads_exact(said):
                options.append(option)
    exact = options[-1]
    return list(dict.fromkeys(o for o in options if o == exact or share(world, e.type, o) <= VACUOUS))


def with_kinds(d: Draft, world: World) -> Draft:
    """Every unnamed variable with its entity's kind label (its noun), when it has one and lacks it."""
    q = d.query
    for i, var in enumerate(q.vars):
        key = kind_key(var)
        value = world.entity(d.binding[i]).labels.get(key) if key else None
        if var.anchor() is None and value and not any(isinstance(p, LabelIs) and p.key == key for p in var.preds):
            q = q.with_var(i, Var(var.type, var.preds + (LabelIs(key, value),)))
    return dataclasses.replace(d, query=q)


def bare(q: Query, i: int) -> bool:
    """True for an unnamed leaf (not the answer) with nothing said of it but its kind: a vacuous clue."""
    v = q.vars[i]
    return (
        i != q.target
        and v.anchor() is None
        and q.degree(i) <= 1
        and not any(_rank(p) is not None or (isinstance(p, LabelIs) and p.key != kind_key(v)) for p in v.preds)
    )


def describe_hidden(d: Draft, world: World, rng: random.Random) -> Draft:
    """Each name initial replaced by the vaguest fact of the same entity that keeps the answer unique, if any."""
    for i, var in enumerate(d.query.vars):
        initials = [p for p in var.preds if isinstance(p, NameInitial)]
        if not initials:
            continue
        e = world.entity(d.binding[i])
        have = {p.attr for p in var.preds if isinstance(p, (DateIn, NumberIn))}
        asked = d.query.answer_attr if i == d.query.target else None
        attrs = sorted(a for a in list(e.dates) + list(e.numbers) if a not in have and a != asked)
        rng.shuffle(attrs)
        rest = tuple(p for p in var.preds if not isinstance(p, NameInitial))
        for attr in attrs:
            found = next(
                (
                    q
                    for option in vague_options(exact_of(e, attr), world, e.id, rng)
                    if unique(world, q := d.query.with_var(i, Var(var.type, rest + (option,))), d.truth)
                ),
                None,
            )
            if found is not None:
                d = dataclasses.replace(d, query=found)
                break
    return d


def _rank(p: object) -> int | None:
    """What kind of clue a predicate is: 0 a name initial, 1 an exact value, 2 another value; None for no clue of its
    own (an anchor, a kind label)."""
    if isinstance(p, NameInitial):
        return 0
    if isinstance(p, NumberIn):
        return 1 if p.grain == "exact" else 2
    if isinstance(p, DateIn):
        return 1 if p.grain in ("day", "month") else 2
    return None


Shape = tuple[int, int, bool]  # (level, hops, has a handle)


def handle(q: Query) -> bool:
    """True when the question gives a searcher somewhere to start: a named entity, a date to the decade or finer,
    or an exact number (what `synthesis.plan.search_words` can search for)."""
    for i, v in enumerate(q.vars):
        for p in v.preds:
            if (isinstance(p, Is) and i != q.target) or (isinstance(p, NumberIn) and p.grain == "exact"):
                return True
            if isinstance(p, DateIn) and date_parts(p.hi)[0] - date_parts(p.lo)[0] < 10:
                return True
    return False


def shape(d: Draft) -> Shape:
    """The draft's level as its record will have it (1 one hop, 2 chain, 3 coupled and obfuscated), its hops, and
    whether it has a handle."""
    q = simplify(d).query
    return level_of(q, obfuscations_of(q, d.obfuscations)), hops(q), handle(q)


def keeps(start: Shape, d: Draft) -> bool:
    """True when an edit leaves the draft at least as hard as it started (level, and hops up to two) and leaves it
    a handle if it had one: clue selection shortens a question, it never turns it into another kind. A natural
    draft keeps nothing: a clue the others imply is no hop and no handle, whatever shape it gave."""
    if d.natural:
        return True
    level, n_hops, has_handle = shape(d)
    return level >= start[0] and n_hops >= min(start[1], 2) and (has_handle or not start[2])


def without_edge(d: Draft, k: int) -> Draft:
    """The draft without edge `k` and the variables only it joined to the answer."""
    q = d.query
    return answer_part(d, q.vars, q.edges[:k] + q.edges[k + 1 :])


def _words(p: object) -> int:
    """About how many words a predicate takes to say; an exact value counts more, to go first."""
    if isinstance(p, NameInitial):
        return 6
    return 8 + 3 * (_rank(p) == 1)


def _said(d: Draft) -> int:
    return sum(_words(p) for v in d.query.vars for p in v.preds if _rank(p) is not None)


def removals(d: Draft, cut: bool) -> list[tuple[int, tuple, Draft]]:
    """(words saved, a key that names the removal across drafts, the draft without it): each predicate, and with
    `cut` each branch of clues (an edge and all it alone joins to the answer); none that leaves a bare leaf. A natural
    draft also drops an edge that joins nothing new (a cycle's: `in a country that contains that same city`), first."""
    q, found = d.query, []
    for i, v in enumerate(q.vars):
        for p in v.preds:
            if _rank(p) is None:
                continue
            new = dataclasses.replace(d, query=q.with_var(i, Var(v.type, tuple(x for x in v.preds if x != p))))
            if not bare(new.query, i):
                found.append((_words(p), (d.binding[i], p), new))
    for k, e in enumerate(q.edges if cut else ()):
        new = without_edge(d, k)
        gone = len(q.vars) - len(new.query.vars)
        if (gone or d.natural) and not any(bare(new.query, j) for j in range(len(new.query.vars))):
            saved = 4 * gone + _said(d) - _said(new) if gone else CYCLE_FIRST  # a cycle's edge cuts nothing
            found.append((saved, (d.binding[e.src], e.rel, d.binding[e.dst]), new))
    return found


def prune(
    d: Draft,
    world: World,
    rng: random.Random,
    *,
    cut: bool = False,
    start: Shape | None = None,
    guard: Callable[[Draft], bool] | None = None,
) -> Draft:
    """Drop what says the most first (a branch, an exact value, another value, a name initial) as long as the answer
    stays unique, the question keeps its shape (`keeps`, from `start`) and `guard` holds (`hunt.make_huntable`: a
    searcher can still start it), then every bare leaf the answer is unique without. A drop that fails once fails for
    good (fewer constraints only add matches), so it is not tried again."""
    start, failed = start or shape(d), set()
    while True:
        options = [r for r in removals(d, cut) if r[1] not in failed]
        options.sort(key=lambda r: (-r[0], rng.random()))
        for _, key, new in options:
            if not keeps(start, new) or (guard is not None and not guard(new)):
                continue
            if unique(world, new.query, new.truth):
                d = new
                break
            failed.add(key)
        else:
            break
    for i in sorted((i for i in range(len(d.query.vars)) if bare(d.query, i)), reverse=True):
        q, binding = drop_var(d.query, d.binding, i)
        if unique(world, q, d.truth):
            d = dataclasses.replace(d, query=q, binding=binding)
    return d


def blur_values(d: Draft, world: World, rng: random.Random, start: Shape | None = None) -> Draft:
    """Each date and number of the draft as the vaguest range of the truth that keeps the answer unique (and the
    draft's shape, `keeps`)."""
    start = start or shape(d)
    spots = [(i, p) for i, v in enumerate(d.query.vars) for p in v.preds if isinstance(p, (DateIn, NumberIn))]
    rng.shuffle(spots)
    for i, p in spots:
        var = d.query.vars[i]
        for option in value_options(p, world, d.binding[i], rng):
            if option == p:
                break
            new = dataclasses.replace(
                d, query=d.query.with_var(i, Var(var.type, tuple(option if x == p else x for x in var.preds)))
            )
            if keeps(start, new) and unique(world, new.query, d.truth):
                d = new
                break
    return d


def said_exact(p: DateIn | NumberIn) -> bool:
    """True when the predicate reads as an exact figure (a day, a month or a year; all the digits of a number)."""
    if isinstance(p, DateIn):
        return p.grain in ("day", "month", "year")
    forms = attribute_forms(p.attr)
    return reads_exact(say_quantity(p, forms.word, forms.symbol, scale=forms.scale))


def vague_options(p: DateIn | NumberIn, world: World, entity_id: str, rng: random.Random) -> list:
    """`value_options` without the ones that read as an exact figure."""
    return [o for o in value_options(p, world, entity_id, rng) if not said_exact(o)]


def exact_of(e, attr: str) -> DateIn | NumberIn:
    """The exact predicate of one attribute of entity `e` (a date at the grain it is known to)."""
    if attr in e.dates:
        return date_pred(attr, e.dates[attr], date_precision(attr))
    return number_pred(attr, e.numbers[attr], "exact")


def _with_pred(d: Draft, j: int, p: object) -> Draft:
    var = d.query.vars[j]
    return dataclasses.replace(d, query=d.query.with_var(j, Var(var.type, var.preds + (p,))))


def _with_neighbour(d: Draft, i: int, n: Neighbour, world: World) -> Draft:
    j = len(d.query.vars)
    edge = Edge(i, n.rel, j) if n.direction == "out" else Edge(j, n.rel, i)
    q = d.query.add_var(Var(world.entity(n.id).type, (Is(n.id),)), edge)
    return dataclasses.replace(d, query=q, binding=d.binding + (n.id,))


def extra_facts(d: Draft, world: World, i: int, rng: random.Random) -> list[list[Callable[[Draft], Draft]]]:
    """Facts the draft lacks, each as its additions vaguest first: a vague value of variable `i`'s entity, then of
    the other unnamed variables' (never the asked attribute), then a named neighbour of `i` (the least shared)."""
    facts: list[list[Callable[[Draft], Draft]]] = []
    order = [i] + [j for j in range(len(d.query.vars)) if j != i]
    for j in order:
        var = d.query.vars[j]
        if var.anchor() is not None:
            continue
        e = world.entity(d.binding[j])
        have = {x.attr for x in var.preds if isinstance(x, (DateIn, NumberIn))}
        asked = d.query.answer_attr if j == d.query.target else None
        free = [a for a in sorted(list(e.dates) + list(e.numbers)) if a not in have and a != asked]
        rng.shuffle(free)
        for attr in free:
            options = vague_options(exact_of(e, attr), world, e.id, rng)
            if options:
                facts.append([functools.partial(_with_pred, j=j, p=o) for o in options])
    for n in least_shared(world, d.binding[i], set(d.binding), 2, rng):
        facts.append([functools.partial(_with_neighbour, i=i, n=n, world=world)])
    return facts


def trade_exact(d: Draft, world: World, rng: random.Random, start: Shape | None = None) -> Draft:
    """Each value that reads exact traded for a vague one plus one fact the draft lacks (`extra_facts`), the
    vaguest pair that keeps the answer unique; kept when no pair does. The finest vague options lie inside every
    vaguer one, so one match tells whether a fact can help at all. The draft keeps its shape (`keeps`)."""
    start = start or shape(d)
    for i in range(len(d.query.vars)):
        for p in [p for p in d.query.vars[i].preds if isinstance(p, (DateIn, NumberIn)) and said_exact(p)]:
            vaguer = vague_options(p, world, d.binding[i], rng)
            if not vaguer:
                continue

            def swap(o, i=i, p=p, d=d) -> Draft:
                var = d.query.vars[i]
                return dataclasses.replace(
                    d, query=d.query.with_var(i, Var(var.type, tuple(o if y == p else y for y in var.preds)))
                )

            for additions in extra_facts(d, world, i, rng):
                t = additions[-1](swap(vaguer[-1]))
                if not keeps(start, t) or not unique(world, t.query, t.truth):
                    continue
                d = next(
                    t
                    for o in vaguer
                    for add in additions
                    if keeps(start, t := add(swap(o))) and unique(world, t.query, t.truth)
                )
                break
    return d


def ensure_handle(d: Draft, world: World, rng: random.Random) -> Draft:
    """A draft without a handle (`handle`) gets one: a date of an unnamed variable said to its decade, sharpened
    from a vaguer one or added (a sharper true clue keeps the answer unique); unchanged when no variable has a date.
    A natural draft only sharpens (an added date would be a clue the others imply)."""
    if handle(d.query):
        return d
    spots = [(i, p) for i, v in enumerate(d.query.vars) for p in v.preds if isinstance(p, DateIn)]
    rng.shuffle(spots)
    for i, p in spots:
        var = d.query.vars[i]
        decade = date_pred(p.attr, world.entity(d.binding[i]).dates[p.attr], "decade")
        return dataclasses.replace(
            d, query=d.query.with_var(i, Var(var.type, tuple(decade if x == p else x for x in var.preds)))
        )
    unnamed = [i for i, v in enumerate(d.query.vars) if v.anchor() is None and not d.natural]
    rng.shuffle(unnamed)
    for i in unnamed:
        e = world.entity(d.binding[i])
        attrs = sorted(a for a in e.dates if not (i == d.query.target and a == d.query.answer_attr))
        if attrs:
            return _with_pred(d, i, date_pred(attrs[0], e.dates[attrs[0]], "decade"))
    return d


def select(d: Draft, world: World, rng: random.Random, *, cut: bool = False) -> Draft:
    """The draft with its kinds named, its redundant clues pruned and its values blurred (see the module docstring);
    a count question is returned as it is (its filter sets the count)."""
    if d.query.count:
        return d
    cut = cut or d.natural
    start = shape(d)
    d = describe_hidden(with_kinds(d, world), world, rng)
    d = blur_values(prune(d, world, rng, cut=cut, start=start), world, rng, start)
    return ensure_handle(trade_exact(d, world, rng, start), world, rng)
