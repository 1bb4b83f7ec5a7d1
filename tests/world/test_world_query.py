"""Structured constraints: predicates, the matcher (checked against brute force), JSON round trip."""

import itertools
import random

import pytest

from jaxseeker.world import (
    DateIn,
    Edge,
    Entity,
    Is,
    LabelIs,
    NameInitial,
    NumberIn,
    Query,
    Relation,
    Var,
    World,
    synthetic_world,
)
from jaxseeker.world.query import pred_from_json, pred_to_json


def test_predicates():
    e = Entity(
        "x",
        "person",
        "Ada Fenwick",
        numbers={"height_cm": 170},
        dates={"born": "1962-03-03"},
        labels={"occupation": "poet"},
    )
    assert Is("x").holds(e) and not Is("y").holds(e)
    assert LabelIs("occupation", "poet").holds(e)
    assert DateIn("born", "1960-01-01", "1963-12-31", "early-decade").holds(e)
    assert not DateIn("born", "1964-01-01", "1966-12-31", "mid-decade").holds(e)
    assert not DateIn("died", "0001-01-01", "9999-12-31", "any").holds(e)
    assert NumberIn("height_cm", 100, None, "above").holds(e) and not NumberIn("height_cm", None, 150, "below").holds(e)
    assert NameInitial("last", "F").holds(e) and NameInitial("first", "a").holds(e)
    assert not NameInitial("last", "A").holds(e)


def test_chain_and_intersection_queries(small_world):
    w = small_world
    person = next(p for p in w.ids_of_type("person") if w.targets(p, "born_in"))
    (city,) = w.targets(person, "born_in")
    (country,) = w.targets(city, "located_in")
    # "Which country contains the birthplace of PERSON?"
    q = Query(
        (Var("country"), Var("city"), Var("person", (Is(person),))), (Edge(1, "located_in", 0), Edge(2, "born_in", 1))
    )
    assert w.match(q) == [country]
    # the same pattern without the anchor matches every country someone was born in
    loose = q.with_var(2, Var("person"))
    assert country in w.match(loose) and len(w.match(loose)) > 1
    # restricted to a set of entities the match can only shrink
    assert w.match(loose, within={country, city, person}) == [country]


def test_cycle_needs_a_consistent_assignment():
    w = World(
        [
            Entity("p", "person", "P One"),
            Entity("q", "person", "Q Two"),
            Entity("c1", "city", "Aaa"),
            Entity("c2", "city", "Bbb"),
            Entity("o", "organisation", "Org"),
        ],
        [
            Relation("p", "born_in", "c1"),
            Relation("q", "born_in", "c2"),
            Relation("o", "founded_by", "p"),
            Relation("o", "founded_by", "q"),
            Relation("o", "headquartered_in", "c2"),
        ],
    )
    # founder born in the city where the organisation is headquartered: only q (a cycle o-person-city-o)
    q = Query(
        (Var("person"), Var("organisation"), Var("city")),
        (Edge(1, "founded_by", 0), Edge(0, "born_in", 2), Edge(1, "headquartered_in", 2)),
    )
    assert q.has_cycle()
    assert w.match(q) == ["q"]


def _brute(w, q):
    doms = [[i for i in w.ids_of_type(v.type) if all(p.holds(w.entity(i)) for p in v.preds)] for v in q.vars]
    edges = {(r.src, r.rel, r.dst) for r in w.relations}
    found = set()
    for combo in itertools.product(*doms):
        if all((combo[e.src], e.rel, combo[e.dst]) in edges for e in q.edges):
            found.add(combo[q.target])
    return sorted(found)


def test_matcher_agrees_with_brute_force_on_random_patterns():
    w = synthetic_world(150, seed=3)
    rng = random.Random(0)
    rels = [(r.rel, w.entity(r.src).type, w.entity(r.dst).type) for r in w.relations]
    types = sorted({t for _, s, d in rels for t in (s, d)})
    checked = 0
    while checked < 40:
        n = rng.randint(2, 3)
        vtypes = [rng.choice(types) for _ in range(n)]
        edges = []
        for _ in range(rng.randint(1, 3)):
            a, b = rng.sample(range(n), 2)
            options = [r for r, s, d in rels if s == vtypes[a] and d == vtypes[b]]
            if options:
                edges.append(Edge(a, rng.choice(options), b))
        if not edges:
            continue
        q = Query(tuple(Var(t) for t in vtypes), tuple(edges), target=rng.randrange(n))
        assert w.match(q) == _brute(w, q), q
        checked += 1


def test_json_round_trip():
    q = Query(
        (
            Var("person", (NameInitial("last", "F"), DateIn("born", "1960-01-01", "1963-12-31", "early-decade"))),
            Var("city", (Is("e1"), NumberIn("population", 1e6, 2e6, "between"), LabelIs("k", "v"))),
        ),
        (Edge(0, "born_in", 1),),
        target=0,
        answer_attr="born",
    )
    assert Query.from_json(q.to_json()) == q
    with pytest.raises(ValueError, match="unknown predicate kind 'Nope'"):
        pred_from_json({"kind": "Nope"})
    assert pred_to_json(Is("a")) == {"kind": "Is", "id": "a"}
