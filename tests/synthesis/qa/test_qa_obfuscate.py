"""Obfuscation loosens the surface but the truth still satisfies every edited constraint."""

import random

import pytest

from jaxseeker.synthesis.qa.obfuscate import (
    blur_one_value,
    blur_value,
    date_pred,
    describe,
    drop_var,
    hide_name,
    number_pred,
    remove_clue,
    tighten,
)
from jaxseeker.synthesis.qa.record import Draft
from jaxseeker.synthesis.qa.render import render_question, say_date_range, say_number_range
from jaxseeker.world import DateIn, Edge, Entity, Is, NameInitial, NumberIn, Query, Var


@pytest.mark.parametrize(
    "iso, grain, phrase",
    [
        ("2011-05-17", "decade-part", "in the early 2010s"),
        ("1965-05-17", "decade-part", "in the mid-1960s"),
        ("1968-05-17", "decade-part", "in the late 1960s"),
        ("0450-06-01", "century-part", "in the mid-5th century"),
        ("0401-01-01", "century-part", "in the early 5th century"),
        ("1999-12-31", "century", "in the 20th century"),
        ("1962-02-10", "month", "in February 1962"),
        ("1962-02-10", "year", "in 1962"),
    ],
)
def test_date_grains_hold_the_truth_and_say_it(iso, grain, phrase):
    p = date_pred("born", iso, grain)
    assert p.lo <= iso <= p.hi
    assert say_date_range(p) == phrase


@pytest.mark.parametrize(
    "value, grain, phrase",
    [
        (1_540_000, "between", "one to two million"),
        (0.4, "between", "less than 1"),
        (830, "above", "more than eight hundred"),
        (830, "below", "less than nine hundred"),
        (2_500_000_000, "between", "two to three billion"),
        (23_456, "fine", "23 to 24 thousand"),
        (23_456, "magnitude", "tens of thousands"),
        (5.5, "fine", "5 to 6"),
    ],
)
def test_number_grains_hold_the_truth_and_say_it(value, grain, phrase):
    p = number_pred("population", value, grain)
    assert p.holds(Entity("x", "city", "X", numbers={"population": value}))
    assert say_number_range(p) == phrase


def test_blur_value_is_looser_and_still_true():
    rng = random.Random(0)
    e = Entity("x", "person", "Ada Fenwick", dates={"born": "1962-03-03"}, numbers={"height_cm": 171})
    for _ in range(20):
        d = blur_value(date_pred("born", "1962-03-03", "day"), e, rng)
        assert d.holds(e) and d.grain != "day" and (d.lo, d.hi) != ("1962-03-03", "1962-03-03")
        n = blur_value(NumberIn("height_cm", 171, 171, "exact"), e, rng)
        assert n.holds(e) and n.grain != "exact"
    assert blur_value(DateIn("born", "1901-01-01", "2000-12-31", "century"), e, rng) is None


def named_draft(world, rng):
    """A draft 'which X relates to named Y and named Z', true for some entity with two neighbours."""
    hub = next(i for i in world.entities if len({n.id for n in world.neighbours(i)}) >= 2)
    n1, n2 = list(dict.fromkeys(n for n in world.neighbours(hub)))[:2]
    edges = tuple(Edge(0, n.rel, j) if n.direction == "out" else Edge(j, n.rel, 0) for j, n in ((1, n1), (2, n2)))
    vars_ = (
        Var(world.entity(hub).type),
        Var(world.entity(n1.id).type, (Is(n1.id),)),
        Var(world.entity(n2.id).type, (Is(n2.id),)),
    )
    return Draft(Query(vars_, edges), (hub, n1.id, n2.id), "test")


def test_query_edits_keep_the_truth_and_change_the_question(world):
    rng = random.Random(1)
    for k in range(10):
        d = named_draft(world, random.Random(k))
        before = render_question(world, d.query)
        for edit in (
            lambda x: hide_name(x, world, rng),
            lambda x: describe(x, world, rng, k=2),
            lambda x: remove_clue(x, rng),
            lambda x: blur_one_value(tighten(x, world, rng) or x, world, rng),
        ):
            new = edit(d)
            if new is None:
                continue
            assert new.truth == d.truth
            assert d.truth in world.match(new.query), new.query
            assert new.obfuscations and render_question(world, new.query) != before


def test_hide_name_gives_an_initial_and_the_kind(world):
    d = named_draft(world, random.Random(0))
    hidden = hide_name(d, world, random.Random(0), 1)
    preds = hidden.query.vars[1].preds
    assert hidden.query.vars[1].anchor() is None
    initial = next(p for p in preds if isinstance(p, NameInitial))
    assert initial.holds(world.entity(d.binding[1]))


def test_drop_var_reindexes_edges_and_binding():
    q = Query((Var("city"), Var("person"), Var("country")), (Edge(1, "born_in", 0), Edge(0, "located_in", 2)), target=2)
    nq, binding = drop_var(q, ("c", "p", "k"), 1)
    assert nq.edges == (Edge(0, "located_in", 1),) and nq.target == 1 and binding == ("c", "k")
    with pytest.raises(ValueError, match="answer variable"):
        drop_var(q, ("c", "p", "k"), 2)
