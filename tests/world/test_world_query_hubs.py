"""The matcher on a hub-heavy world (one country holds most cities and airports, as the atlas does): whichever
variable it starts from and whichever side of an edge it walks, it finds what a plain backtracking search finds."""

import random

from jaxseeker.world import Edge, Entity, Is, NameInitial, NumberIn, Query, Relation, Var, World

SIGNATURES = [
    ("located_in", "city", "country"),
    ("serves", "airport", "city"),
    ("airport_in", "airport", "country"),
    ("capital_of", "city", "country"),
    ("borders", "country", "country"),
]


def hub_world(seed: int = 0) -> World:
    """One hub country with 60 cities, four small ones with 3 each; 1-3 airports per city."""
    rng = random.Random(seed)
    entities = [Entity(f"c{k}", "country", f"{'Hub' if k == 0 else 'Small'} Land {k}") for k in range(5)]
    relations = [Relation("c0", "borders", f"c{k}") for k in range(1, 5)] + [Relation("c1", "borders", "c2")]
    n = 0
    for k in range(5):
        for j in range(60 if k == 0 else 3):
            city = f"t{k}_{j}"
            entities.append(
                Entity(
                    city, "city", f"{rng.choice('ABCD')}town {k} {j}", numbers={"population": rng.randrange(1000, 9000)}
                )
            )
            relations.append(Relation(city, "located_in", f"c{k}"))
            if j == 0:
                relations.append(Relation(city, "capital_of", f"c{k}"))
            for _ in range(rng.randint(1, 3)):
                n += 1
                entities.append(
                    Entity(
                        f"a{n}",
                        "airport",
                        f"{rng.choice('ABCD')}field {n}",
                        numbers={"elevation_m": rng.randrange(0, 900)},
                    )
                )
                relations += [Relation(f"a{n}", "serves", city), Relation(f"a{n}", "airport_in", f"c{k}")]
    return World(entities, relations)


def reference(w: World, q: Query) -> list[str]:
    """Target values of every assignment, by backtracking along the edges from variable 0."""
    order, seen = [0], {0}
    for i in order:
        for e in q.edges:
            for a, b in ((e.src, e.dst), (e.dst, e.src)):
                if a == i and b not in seen:
                    seen.add(b)
                    order.append(b)

    def fits(i: int, x: str) -> bool:
        v = q.vars[i]
        return w.entity(x).type == v.type and all(p.holds(w.entity(x)) for p in v.preds)

    found = set()

    def extend(assign: dict[int, str]) -> None:
        if len(assign) == len(order):
            found.add(assign[q.target])
            return
        i = order[len(assign)]
        for x in w.ids_of_type(q.vars[i].type):
            if fits(i, x) and all(
                w.has_edge(assign.get(e.src, x), e.rel, assign.get(e.dst, x))
                for e in q.edges
                if i in (e.src, e.dst) and {e.src, e.dst} <= set(assign) | {i}
            ):
                extend({**assign, i: x})

    extend({})
    return sorted(found)


def random_query(w: World, rng: random.Random) -> Query:
    """2-4 connected variables, maybe a cycle, with anchors, initials and number ranges."""
    types = [rng.choice(["country", "city", "airport"])]
    edges = []
    while len(types) < rng.randint(2, 4):
        i = rng.randrange(len(types))
        rel, src, dst = rng.choice([s for s in SIGNATURES if types[i] in s[1:]])
        types.append(dst if types[i] == src else src)
        j = len(types) - 1
        edges.append(Edge(i, rel, j) if types[i] == src else Edge(j, rel, i))
    if rng.random() < 0.4:  # close a cycle when a relation fits
        pairs = [
            (a, b, s[0])
            for a in range(len(types))
            for b in range(len(types))
            for s in SIGNATURES
            if a != b and (types[a], types[b]) == s[1:]
        ]
        if pairs:
            a, b, rel = rng.choice(pairs)
            edges.append(Edge(a, rel, b))
    vars_ = []
    for t in types:
        preds = []
        if rng.random() < 0.25:
            preds.append(Is(rng.choice(list(w.ids_of_type(t)))))
        if rng.random() < 0.4 and t != "country":
            preds.append(NameInitial("first", rng.choice("ABCD")))
        if rng.random() < 0.3 and t != "country":
            attr = "population" if t == "city" else "elevation_m"
            lo = rng.choice([0, 1000, 3000, 300])
            preds.append(NumberIn(attr, lo, None, "above"))
        vars_.append(Var(t, tuple(preds)))
    return Query(tuple(vars_), tuple(edges), target=rng.randrange(len(types)))


def test_matcher_agrees_with_backtracking_on_a_hub_world():
    w = hub_world()
    rng = random.Random(1)
    non_empty = 0
    for _ in range(150):
        q = random_query(w, rng)
        expected = reference(w, q)
        assert w.match(q) == expected, q
        assert w.match(q, limit=2) == expected[:2]
        non_empty += bool(expected)
    assert non_empty > 60  # the patterns mostly have answers, so the check is not vacuous
