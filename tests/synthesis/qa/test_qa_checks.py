"""The shared checks: hops and levels, leaks, de-duplication, simplification, and `finalize`'s verdicts."""

from jaxseeker.synthesis.qa.checks import (
    Dedup,
    LeakCheck,
    finalize,
    hops,
    is_coupled,
    level_of,
    normalize,
    obfuscations_of,
    same_answer,
    simplify,
)
from jaxseeker.synthesis.qa.record import Draft
from jaxseeker.world import DateIn, Edge, Is, NameInitial, Query, Var

CHAIN = Query(
    (Var("country"), Var("city"), Var("person", (Is("p"),))), (Edge(1, "located_in", 0), Edge(2, "born_in", 1))
)
STAR = Query(
    (Var("person"), Var("city", (Is("c"),)), Var("organisation", (Is("o"),))),
    (Edge(0, "born_in", 1), Edge(0, "member_of", 2)),
)


def test_hops_and_levels():
    one = Query((Var("person"), Var("city", (Is("c"),))), (Edge(0, "born_in", 1),))
    assert hops(one) == 1 and level_of(one, []) == 1
    assert hops(CHAIN) == 2 and not is_coupled(CHAIN) and level_of(CHAIN, ["name"]) == 2
    assert is_coupled(STAR) and level_of(STAR, []) == 1 and level_of(STAR, ["date"]) == 3
    assert hops(Query((Var("person", (Is("p"),)),), answer_attr="born")) == 1


def test_normalize_and_same_answer():
    assert normalize("The  Golden Harbor, of Velm!") == "golden harbor of velm"
    assert same_answer("1,234,567", "1234567") and same_answer("the varo", "Varo")
    assert not same_answer("", "") and not same_answer("Varo", "Vara")


def test_leak_check_whole_answer_and_distinctive_words(world):
    leak = LeakCheck(world)
    person = world.entity(next(iter(world.ids_of_type("person"))))
    given, surname = person.name.split()
    assert leak(person.name, f"Is it {person.name.upper()}?")
    assert leak(person.name, f"Which person has the surname {surname}?")
    assert not leak(person.name, "Which person was born in the 1960s?")
    assert not leak("1962", "Which person was born in 19620?")


def test_dedup_by_text_and_signature():
    d = Dedup()
    assert d.add("Which city is it?", ("a", 1))
    assert not d.add("which city is it", ("b", 2))
    assert not d.add("Another text", ("a", 1))
    assert d.add("Another text", ("c", 3))


def test_simplify_drops_what_a_name_makes_redundant():
    q = Query(
        (
            Var("person"),
            Var("city", (Is("c"), DateIn("founded", "0001-01-01", "2000-12-31", "century"))),
            Var("country"),
        ),
        (Edge(0, "born_in", 1), Edge(1, "located_in", 2)),
    )
    d = simplify(Draft(q, ("p", "c", "k"), "t"))
    assert d.query.vars == (Var("person"), Var("city", (Is("c"),))) and d.binding == ("p", "c")


def test_obfuscations_read_from_constraints():
    q = Query(
        (
            Var("person", (DateIn("born", "1960-01-01", "1969-12-31", "decade"),)),
            Var("city", (NameInitial("first", "V"),)),
            Var("country"),
        ),
        (Edge(0, "born_in", 1), Edge(1, "located_in", 2)),
    )
    assert obfuscations_of(q, ("remove", "name")) == ["date", "name", "place", "remove"]


def test_finalize_keeps_unique_and_drops_ambiguous(world):
    person = next(p for p in world.ids_of_type("person") if world.targets(p, "born_in"))
    (city,) = world.targets(person, "born_in")
    leak, dedup = LeakCheck(world), Dedup()
    good = Draft(Query((Var("city"), Var("person", (Is(person),))), (Edge(1, "born_in", 0),)), (city, person), "t")
    record, why = finalize(world, good, leak, dedup)
    assert why == "kept" and record.answer == world.entity(city).name and record.level == 1
    assert record.meta["answer_id"] == city and record.meta["edges"] == [[person, "born_in", city]]
    assert record.meta["urls"] == [world.url(city), world.url(person)]
    assert finalize(world, good, leak, dedup) == (None, "duplicate")
    vague = Draft(Query((Var("city"), Var("person")), (Edge(1, "born_in", 0),)), (city, person), "t")
    assert finalize(world, vague, leak, dedup) == (None, "not_unique")
    wrong = Draft(good.query, (person, person), "t")
    assert finalize(world, wrong, leak, dedup) == (None, "truth_fails")
