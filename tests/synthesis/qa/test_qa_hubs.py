"""What keeps the synthesisers fast on worlds with hubs (a country with thousands of airports) without
changing what they make: the walk never expands from a hub, descriptions sample a hub's least shared
neighbours, the shortcut check stops early; and year-only dates keep their grain."""

import random

from jaxseeker.synthesis.qa.checks import _alone, obfuscations_of
from jaxseeker.synthesis.qa.obfuscate import blur_value, exact_pred, least_shared, name_hint, neighbours_by_fan
from jaxseeker.synthesis.qa.render import render_question
from jaxseeker.synthesis.qa.sailorfog import SailorFogConfig, _edges_among, random_walk
from jaxseeker.world import DateIn, Entity, Query, Relation, Var, World


def star_world(cities: int = 30) -> World:
    """A hub country with `cities` cities, one airport each; a region shared by the hub and four small countries."""
    entities = [Entity("hub", "country", "Hubland"), Entity("reg", "region", "Middle")]
    relations = [Relation("hub", "in_region", "reg")]
    for k in range(4):
        entities.append(Entity(f"s{k}", "country", f"Small {k}"))
        relations += [Relation(f"s{k}", "in_region", "reg"), Relation("hub", "borders", f"s{k}")]
    for k in range(cities):
        entities += [Entity(f"t{k}", "city", f"Town {k}"), Entity(f"a{k}", "airport", f"Field {k}")]
        relations += [
            Relation(f"t{k}", "located_in", "hub"),
            Relation(f"a{k}", "serves", f"t{k}"),
            Relation(f"a{k}", "airport_in", "hub"),
        ]
    return World(entities, relations)


def test_the_walk_reaches_a_hub_but_never_expands_from_it():
    w = star_world()
    capped, free = SailorFogConfig(hub_degree=10), SailorFogConfig(hub_degree=1000)
    reached = set()
    for seed in range(40):
        nodes, edges = random_walk(w, "a0", 4, random.Random(seed), capped)
        assert set(nodes) <= {"a0", "t0", "hub"} and all(w.has_edge(r.src, r.rel, r.dst) for r in edges)
        reached |= set(random_walk(w, "a0", 4, random.Random(seed), free)[0])
    assert len(reached) > 5  # without the cap the walk wanders off through the hub


def test_edges_among_finds_every_edge_between_the_nodes():
    w = star_world()
    rng = random.Random(0)
    for _ in range(30):
        nodes = rng.sample(sorted(w.entities), rng.randint(2, 8))
        expected = {r for r in w.relations if r.src in nodes and r.dst in nodes}
        assert _edges_among(w, nodes) == expected


def test_descriptions_use_the_least_shared_neighbours_of_a_hub():
    w = star_world()
    groups = neighbours_by_fan(w, "hub")
    assert [len(g) for g in groups] == [64, 1]  # 30 cities + 30 airports + 4 borders (fan 1); the region (fan 5)
    assert {n.id for n in groups[-1]} == {"reg"}
    picks = set()
    for seed in range(20):
        found = least_shared(w, "hub", {"t0", "a0"}, 3, random.Random(seed))
        assert len(found) == 3 and not {n.id for n in found} & {"t0", "a0", "reg"}
        picks |= {n.id for n in found}
    assert len(picks) > 20  # ties broken at random, not by order


def test_the_early_stopping_shortcut_check_agrees_with_the_matcher(world):
    rng = random.Random(5)
    for _ in range(200):
        e = world.entity(rng.choice(sorted(world.entities)))
        preds = name_hint(e)[: rng.randint(0, 2)]
        for attr in sorted(list(e.dates) + list(e.numbers))[: rng.randint(0, 2)]:
            p = exact_pred(e, attr)
            preds += (blur_value(p, e, rng) or p,) if rng.random() < 0.6 else (p,)
        var = Var(e.type, tuple(preds))
        assert _alone(world, var, e.id) == (world.match(Query((var,)), limit=2) == [e.id])


def test_year_only_dates_are_exact_at_the_year():
    e = Entity("element/Cl", "element", "Chlorine", dates={"discovered": "1774-01-01"})
    p = exact_pred(e, "discovered")
    assert p == DateIn("discovered", "1774-01-01", "1774-12-31", "year")
    w = World([e], [])
    q = Query((Var("element", (p,)),))
    assert obfuscations_of(q, ()) == [] and "discovered in 1774" in render_question(w, q)
    looser = blur_value(p, e, random.Random(0))
    assert looser.grain in ("decade", "late-century", "century") and looser.holds(e)
    assert obfuscations_of(Query((Var("element", (looser,)),)), ()) == ["date"]
