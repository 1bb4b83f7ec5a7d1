"""Clue selection on hand-built worlds: the fewest clues, each as vague as uniqueness allows, none vacuous."""

import random

from jaxseeker.synthesis.qa.clues import prune, select, share, value_options
from jaxseeker.synthesis.qa.record import Draft
from jaxseeker.world import DateIn, Edge, Entity, Is, LabelIs, NameInitial, NumberIn, Query, Relation, Var, World


def people() -> World:
    """Two natives of Port Jervis born a year apart (their debuts a decade apart), a neighbour of theirs, three
    others; two clubs."""
    born = {"p1": "1865-04-02", "p2": "1866-01-01", "p3": "1960-06-01", "p4": "1990-06-01", "p5": "1930-06-01"}
    debut = {"p1": "1885-05-01", "p2": "1890-05-01", "p3": "1980-05-01", "p4": "2010-05-01", "p5": "1950-05-01"}
    surname = {"p1": "Ford", "p2": "Fitch", "p3": "Grey", "p4": "Hale", "p5": "Ives"}
    persons = [
        Entity(
            i, "person", f"Al {surname[i]}", dates={"born": born[i], "debut": debut[i]}, labels={"occupation": "player"}
        )
        for i in born
    ]
    places = [
        Entity("j", "city", "Port Jervis"),
        Entity("v", "city", "Varo"),
        Entity("t1", "organisation", "Aster Club", dates={"first_season": "1901-01-01"}, labels={"kind": "club"}),
        Entity("t2", "organisation", "Bolt Club", dates={"first_season": "1950-01-01"}, labels={"kind": "club"}),
    ]
    rels = [
        Relation("p1", "born_in", "j"),
        Relation("p2", "born_in", "j"),
        Relation("p3", "born_in", "v"),
        Relation("p1", "played_for", "t1"),
        Relation("p2", "played_for", "t2"),
        Relation("p3", "played_for", "t1"),
    ]
    return World(persons + places, rels)


def towns() -> World:
    """Varo (1.54 million), Lenst (20,400) and Maro (25,000), all in Tesland."""
    cities = [
        Entity("c", "city", "Varo", numbers={"population": 1_540_000}),
        Entity("d", "city", "Lenst", numbers={"population": 20_400}),
        Entity("m", "city", "Maro", numbers={"population": 25_000}),
        Entity("k", "country", "Tesland"),
    ]
    return World(cities, [Relation(c, "located_in", "k") for c in "cdm"])


def test_a_redundant_initial_goes_and_the_needed_date_is_blurred_as_far_as_it_stays_unique():
    w = people()
    q = Query(
        (
            Var("person", (DateIn("born", "1865-04-02", "1865-04-02", "day"), NameInitial("last", "F"))),
            Var("city", (Is("j"),)),
        ),
        (Edge(0, "born_in", 1),),
    )
    d = prune(Draft(q, ("p1", "j"), "t"), w, random.Random(0))
    assert d.query.vars[0].preds == (DateIn("born", "1865-04-02", "1865-04-02", "day"),)  # Ford and Fitch share “F”


def test_an_exact_date_is_traded_for_two_vague_ones():
    w = people()
    q = Query(
        (Var("person", (DateIn("born", "1865-04-02", "1865-04-02", "day"),)), Var("city", (Is("j"),))),
        (Edge(0, "born_in", 1),),
    )
    d = select(Draft(q, ("p1", "j"), "t"), w, random.Random(0))
    # the birth year alone would tell the two natives apart; the 19th century and a debut in the 1880s do too
    assert set(d.query.vars[0].preds) == {
        LabelIs("occupation", "player"),
        DateIn("born", "1801-01-01", "1900-12-31", "century"),
        DateIn("debut", "1880-01-01", "1889-12-31", "decade"),
    }
    assert w.match(d.query) == ["p1"]


def test_a_number_is_blurred_to_the_vaguest_range_that_stays_unique():
    w = towns()
    q = Query(
        (Var("city", (NumberIn("population", 20_400, 20_400, "exact"),)), Var("country", (Is("k"),))),
        (Edge(0, "located_in", 1),),
    )
    d = select(Draft(q, ("d", "k"), "t"), w, random.Random(0))
    # tens of thousands, more than 20,000, less than 30,000, 20 to 30 thousand all hold Maro too
    assert d.query.vars[0].preds == (NumberIn("population", 20_000, 21_000, "fine"),)


def test_a_name_initial_becomes_a_fact_of_the_hidden_entity():
    w = people()
    q = Query(
        (Var("person"), Var("city", (Is("j"),)), Var("organisation", (NameInitial("first", "A"),))),
        (Edge(0, "born_in", 1), Edge(0, "played_for", 2)),
    )
    d = select(Draft(q, ("p1", "j", "t1"), "t"), w, random.Random(0))
    # two natives of Port Jervis: the club tells them apart, by its first season (early 20th century), not “A”
    assert d.query.vars[2].preds == (
        LabelIs("kind", "club"),
        DateIn("first_season", "1901-01-01", "1933-12-31", "early-century"),
    )


def test_a_bare_leaf_that_says_nothing_goes():
    w = people()
    q = Query(
        (Var("person"), Var("city", (Is("v"),)), Var("organisation")), (Edge(0, "born_in", 1), Edge(0, "played_for", 2))
    )
    d = select(Draft(q, ("p3", "v", "t1"), "t"), w, random.Random(0))
    assert d.query.edges == (Edge(0, "born_in", 1),) and d.binding == ("p3", "v")


def test_options_never_read_exact_nor_say_what_nearly_everyone_satisfies():
    w = towns()
    options = value_options(NumberIn("population", 20_400, 20_400, "exact"), w, "d", random.Random(1))
    assert options[-1].grain == "exact" and all(o.holds(w.entity("d")) for o in options)
    assert NumberIn("population", 20_000, None, "above") not in options  # all three towns: says nothing
    assert share(w, "city", NumberIn("population", 20_000, None, "above")) == 1.0
    assert share(w, "city", NumberIn("population", 20_000, 30_000, "between")) == 2 / 3
