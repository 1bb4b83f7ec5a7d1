"""The realiser: a query read many ways, each saying every clue once, without placeholder letters."""

from jaxseeker.synthesis.qa.render import answer_text, pred_phrase, render_question, sayable
from jaxseeker.synthesis.qa.style import has_placeholder, opening
from jaxseeker.world import DateIn, Edge, Entity, Is, LabelIs, NameInitial, NumberIn, Query, Relation, Var, World

STYLES = range(40)


def tiny() -> World:
    return World(
        [
            Entity("p", "person", "Ada Fenwick", dates={"born": "1962-03-03"}, labels={"occupation": "poet"}),
            Entity("q", "person", "Bram Osk", dates={"born": "1941-05-01"}, labels={"occupation": "painter"}),
            Entity("c", "city", "Varo", numbers={"population": 1_540_000}),
            Entity("d", "city", "Lenst", numbers={"population": 20_400}),
            Entity("k", "country", "Tesland"),
            Entity("o", "organisation", "Orla University", labels={"kind": "university"}),
        ],
        [
            Relation("p", "born_in", "c"),
            Relation("q", "born_in", "d"),
            Relation("c", "located_in", "k"),
            Relation("d", "located_in", "k"),
            Relation("p", "studied_at", "o"),
            Relation("o", "headquartered_in", "c"),
        ],
    )


# the poet born in Varo in the early 1960s who studied at a university whose name begins with “O”
EARLY_60S = DateIn("born", "1960-01-01", "1963-12-31", "early-decade")
POET = Query(
    (
        Var("person", (LabelIs("occupation", "poet"), EARLY_60S)),
        Var("city", (Is("c"),)),
        Var("organisation", (LabelIs("kind", "university"), NameInitial("first", "O"))),
    ),
    (Edge(0, "born_in", 1), Edge(0, "studied_at", 2)),
)


def test_the_same_query_reads_the_same_and_other_styles_read_otherwise():
    w = tiny()
    assert render_question(w, POET) == render_question(w, POET)
    texts = [render_question(w, POET, s) for s in STYLES]
    assert len(set(texts)) >= 30
    assert len({opening(t) for t in texts}) >= 12


def test_every_phrasing_says_every_clue_and_no_answer():
    w = tiny()
    assert w.match(POET) == ["p"]
    for s in STYLES:
        text = render_question(w, POET, s)
        assert "Varo" in text and "1960s" in text and "“O”" in text and "poet" in text, text
        assert "university" in text and "Ada" not in text and "Fenwick" not in text, text
        assert not has_placeholder(text) and text[0].isupper() and text.endswith(("?", ".")), text


def test_a_cycle_points_back_by_the_same_noun():
    w = tiny()
    q = Query(
        (Var("person"), Var("city"), Var("organisation")),
        (Edge(0, "born_in", 1), Edge(0, "studied_at", 2), Edge(2, "headquartered_in", 1)),
    )
    assert w.match(q) == ["p"] and sayable(w, q)
    for s in range(20):
        text = render_question(w, q, s)
        assert ("same" in text or "in question" in text) and not has_placeholder(text), text


def test_a_cycle_back_to_one_of_two_cities_is_unsayable_and_read_leniently():
    w = tiny()
    q = Query(
        (Var("country"), Var("city"), Var("person"), Var("city")),
        (Edge(1, "located_in", 0), Edge(2, "born_in", 1), Edge(2, "died_in", 1), Edge(3, "located_in", 0)),
    )
    assert not sayable(w, q)
    assert "that same city" in render_question(w, q)


def test_a_clue_that_fixes_the_answer_never_opens_a_group():
    w = tiny()
    q = Query(
        (Var("city", (NumberIn("population", 1e6, 1e7, "magnitude"),)), Var("person", (Is("p"),))),
        (Edge(1, "born_in", 0),),
    )
    texts = [render_question(w, q, s) for s in range(60)]
    assert not any(
        t.startswith(("Among the cities where", "Of all the cities where", "Of the cities where")) for t in texts
    )
    assert all("Ada Fenwick" in t and "millions" in t for t in texts)


def test_attribute_questions_ask_of_a_name_or_a_description():
    w = tiny()
    named = Query((Var("person", (Is("p"),)),), answer_attr="born")
    texts = {render_question(w, named, s) for s in STYLES}
    assert len(texts) >= 8 and all("Ada Fenwick" in t for t in texts)
    assert all(("year" in t or "born" in t) for t in texts)
    assert answer_text(w, named, "p") == "1962"
    described = Query((Var("person"), Var("city", (Is("c"),))), (Edge(0, "born_in", 1),), answer_attr="born")
    assert all("Varo" in render_question(w, described, s) for s in STYLES)


def test_count_questions():
    w = tiny()
    count = Query((Var("city"), Var("country", (Is("k"),))), (Edge(0, "located_in", 1),), count=True)
    assert answer_text(w, count, "c") == "2"
    for s in STYLES:
        text = render_question(w, count, s).lower()
        assert "tesland" in text and ("how many" in text or "number" in text or "count" in text), text


def test_the_canonical_clue_phrase_speaks_the_schema():
    v = Var("person")
    assert pred_phrase(v, DateIn("born", "1960-01-01", "1963-12-31", "early-decade")) == "was born in the early 1960s"
    assert pred_phrase(v, NumberIn("height_cm", 180, 190, "between")) == "is 180 to 190 cm tall"
    assert pred_phrase(v, NameInitial("last", "F")) == "has a surname starting with “F”"
    assert pred_phrase(Var("person", (LabelIs("occupation", "poet"),)), LabelIs("occupation", "poet")) is None
