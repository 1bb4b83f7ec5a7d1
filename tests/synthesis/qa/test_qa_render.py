"""Rendering constraints to English: values, chains, cycles, counts and attribute questions."""

from jaxseeker.world import DateIn, Edge, Entity, Is, LabelIs, NameInitial, NumberIn, Query, Relation, Var, World
from jaxseeker.synthesis.qa.render import answer_text, render_question, say_date_range, say_number_range


def tiny() -> World:
    return World(
        [Entity("p", "person", "Ada Fenwick", dates={"born": "1962-03-03"}, labels={"occupation": "poet"}),
         Entity("c", "city", "Varo", numbers={"population": 1_540_000}),
         Entity("k", "country", "Tesland"),
         Entity("o", "organisation", "Orla University", labels={"kind": "university"})],
        [Relation("p", "born_in", "c"), Relation("c", "located_in", "k"), Relation("p", "studied_at", "o"),
         Relation("o", "headquartered_in", "c")],
    )


def test_date_and_number_phrases():
    assert say_date_range(DateIn("born", "1962-03-03", "1962-03-03", "day")) == "on 3 March 1962"
    assert say_date_range(DateIn("born", "1962-03-01", "1962-03-31", "month")) == "in March 1962"
    assert say_date_range(DateIn("born", "2010-01-01", "2013-12-31", "early-decade")) == "in the early 2010s"
    assert say_date_range(DateIn("born", "1964-01-01", "1966-12-31", "mid-decade")) == "in the mid-1960s"
    assert say_date_range(DateIn("held", "0434-01-01", "0466-12-31", "mid-century")) == "in the mid-5th century"
    assert say_date_range(DateIn("held", "1901-01-01", "2000-12-31", "century")) == "in the 20th century"
    assert say_number_range(NumberIn("population", 1e6, 2e6, "between")) == "between 1 and 2 million"
    assert say_number_range(NumberIn("forest_pct", None, 1, "below"), "%") == "less than 1%"
    assert say_number_range(NumberIn("population", 500, None, "above")) == "more than 500"
    assert say_number_range(NumberIn("population", 1234567, 1234567, "exact")) == "1,234,567"


def test_chain_question_reads_as_nested_clauses():
    w = tiny()
    q = Query((Var("country"), Var("city", (NumberIn("population", 1e6, 2e6, "between"),)),
               Var("person", (LabelIs("occupation", "poet"), NameInitial("last", "F")))),
              (Edge(1, "located_in", 0), Edge(2, "born_in", 1)))
    assert render_question(w, q) == (
        "Which country contains a city that has a population of between 1 and 2 million and is the birthplace "
        "of a poet who has a surname starting with “F”?")
    assert answer_text(w, q, "k") == "Tesland"


def test_styles_say_the_same_constraints():
    w = tiny()
    q = Query((Var("person"), Var("city", (Is("c"),))), (Edge(0, "born_in", 1),))
    assert render_question(w, q, 0) == "Which person was born in Varo?"
    assert render_question(w, q, 1) == "Identify the person who was born in Varo."
    assert render_question(w, q, 2) == "There is a person who was born in Varo. Who is this person?"


def test_cycle_gets_a_letter_to_point_back():
    w = tiny()
    q = Query((Var("person"), Var("city"), Var("organisation")),
              (Edge(0, "born_in", 1), Edge(0, "studied_at", 2), Edge(2, "headquartered_in", 1)))
    text = render_question(w, q)
    assert text == ("Which person was born in a city X and studied at an organisation that is headquartered in X?")
    assert w.match(q) == ["p"]


def test_attribute_and_count_questions():
    w = tiny()
    q = Query((Var("person", (Is("p"),)),), answer_attr="born")
    assert render_question(w, q) == "In what year was Ada Fenwick born?"
    assert answer_text(w, q, "p") == "1962"
    described = Query((Var("person"), Var("city", (Is("c"),))), (Edge(0, "born_in", 1),), answer_attr="born")
    assert render_question(w, described) == "In what year was the person who was born in Varo born?"
    count = Query((Var("person"), Var("city", (Is("c"),))), (Edge(0, "born_in", 1),), count=True)
    assert render_question(w, count) == "How many people are there, each of whom was born in Varo?"
    assert answer_text(w, count, "p") == "1"
