"""Natural questions on hand-built worlds: entities described by their own facts, implied clues dropped, names as a
writer says them, E2HQA entity answers; and the pipeline's default keeps the earlier questions."""

import dataclasses
import random

from jaxseeker.pipeline.data_config import QAStage
from jaxseeker.synthesis.qa.clues import prune
from jaxseeker.synthesis.qa.describe import describe_entity
from jaxseeker.synthesis.qa.e2hqa import entity_start
from jaxseeker.synthesis.qa.naming import spoken_name
from jaxseeker.synthesis.qa.phrasing import merge_verbs
from jaxseeker.synthesis.qa.record import Draft
from jaxseeker.synthesis.qa.render import render_question
from jaxseeker.synthesis.qa.sailorfog import SailorFogConfig
from jaxseeker.synthesis.qa.textcheck import imperative, scene_noun, text_artefacts
from jaxseeker.world import DateIn, Edge, Entity, Is, LabelIs, NameInitial, NumberIn, Query, Relation, Var, World

PLAYER = {"occupation": "baseball player"}


def towns(population: bool = True, players: bool = True, extra: tuple = (), born: tuple = ()) -> World:
    """Waco (138,000 people when `population`) and 30 towns of about a thousand in the United States, an airport
    each; with `players`, Al Ford (debut 1912) born in Waco and six born in towns (debuts 1930 … 1980); `extra`
    entities and their `born` relations added."""
    entities = [Entity("k", "country", "United States")]
    entities.append(Entity("w", "city", "Waco (Texas, US)", numbers={"population": 138_000} if population else {}))
    entities += [
        Entity(f"f{i}", "city", f"Town{chr(65 + i % 20)}{i}", numbers={"population": 1000 + i}) for i in range(30)
    ]
    entities.append(Entity("a", "airport", "Waco Regional Airport", numbers={"elevation_m": 180}))
    entities += [Entity(f"b{i}", "airport", f"Field {i}", numbers={"elevation_m": 10 + i}) for i in range(30)]
    rels = [Relation("w", "located_in", "k"), Relation("a", "serves", "w"), Relation("a", "airport_in", "k")]
    rels += [Relation(f"f{i}", "located_in", "k") for i in range(30)]
    rels += [Relation(f"b{i}", "serves", f"f{i}") for i in range(30)]
    rels += [Relation(f"b{i}", "airport_in", "k") for i in range(30)]
    if players:
        entities.append(Entity("p", "person", "Al Ford", dates={"debut": "1912-05-01"}, labels=PLAYER))
        rels.append(Relation("p", "born_in", "w"))
        entities += [
            Entity(f"q{i}", "person", f"Bo Gray{i}", dates={"debut": f"{1930 + 10 * i}-05-01"}, labels=PLAYER)
            for i in range(6)
        ]
        rels += [Relation(f"q{i}", "born_in", f"f{i}") for i in range(6)]
    return World(entities + list(extra), rels + list(born))


def airport_of_waco(natural: bool = True) -> Draft:
    q = Query((Var("airport"), Var("city", (Is("w"),))), (Edge(0, "serves", 1),))
    return Draft(q, ("a", "w"), "t", natural=natural)


def test_a_city_is_described_by_its_own_population_when_that_singles_it_out():
    d = describe_entity(airport_of_waco(), towns(), random.Random(0), 1)
    assert d.query.vars[1] == Var("city", (NumberIn("population", 100_000, 1_000_000, "magnitude"),))
    assert d.obfuscations == ("describe",)


def test_without_a_value_of_its_own_the_city_is_the_birthplace_of_a_player_who_debuted_in_the_1910s():
    d = describe_entity(airport_of_waco(), towns(population=False), random.Random(0), 1)
    assert d.query.vars[1:] == (
        Var("city"),
        Var(
            "person", (LabelIs("occupation", "baseball player"), DateIn("debut", "1910-01-01", "1919-12-31", "decade"))
        ),
    )
    assert d.query.edges[1] == Edge(2, "born_in", 1) and d.binding == ("a", "w", "p")
    text = render_question(towns(population=False), d.query, natural=True)
    assert "Waco" not in text and "1910s" in text
    # an entity that itself describes another is said by its own facts only: Waco has none, so it keeps its name
    assert describe_entity(airport_of_waco(), towns(population=False), random.Random(0), 1, own_only=True) == (
        airport_of_waco()
    )


def test_a_first_letter_only_when_nothing_else_describes_the_city_and_its_name_must_go():
    w = towns(population=False, players=False)
    assert describe_entity(airport_of_waco(), w, random.Random(0), 1) == airport_of_waco()
    d = describe_entity(airport_of_waco(), w, random.Random(0), 1, hint=True)
    assert d.query.vars[1] == Var("city", (NameInitial("first", "W"),))


def test_a_natural_draft_drops_the_country_the_city_implies_and_the_earlier_one_keeps_it():
    w = towns()
    q = Query(
        (
            Var("airport"),
            Var("city", (NumberIn("population", 100_000, 1_000_000, "magnitude"),)),
            Var("country", (Is("k"),)),
        ),
        (Edge(0, "serves", 1), Edge(1, "located_in", 2), Edge(0, "airport_in", 2)),
    )
    natural = prune(Draft(q, ("a", "w", "k"), "t", natural=True), w, random.Random(0), cut=True)
    assert natural.query.edges == (Edge(0, "serves", 1),) and natural.binding == ("a", "w")
    earlier = prune(Draft(q, ("a", "w", "k"), "t"), w, random.Random(0), cut=True)
    assert len(earlier.query.edges) == 3  # a cycle's edge joins nothing new: the earlier selection never drops it


def test_names_as_a_writer_says_them():
    w = World(
        [
            Entity("k", "country", "United States"),
            Entity("f", "country", "France"),
            Entity("r1", "city", "Richmond (Kentucky, US)"),
            Entity("r2", "city", "Richmond (Virginia, US)"),
            Entity("o", "city", "Oulu (Finland)"),
            Entity("e1", "person", "Ed Walsh (baseball player)"),
            Entity("e2", "person", "Ed Walsh"),
        ],
        [],
    )
    assert [spoken_name(w, i) for i in ("k", "f", "r1", "o", "e1")] == [
        "the United States",
        "France",
        "Richmond, Kentucky",
        "Oulu",
        "the baseball player Ed Walsh",
    ]
    q = Query((Var("city"), Var("country", (Is("k"),))), (Edge(0, "located_in", 1),))
    for style in range(6):
        text = render_question(w, q, style, natural=True)
        assert "the United States" in text.replace("The United", "the United") and not imperative(text), text
        assert " United States" not in text.replace("he United States", "")


def test_an_e2hqa_entity_question_starts_from_a_neighbour_that_fixes_the_answer():
    w = towns()
    starts = [d for s in range(40) if (d := entity_start(w, random.Random(s), hub_degree=100)) is not None]
    assert starts
    for d in starts:
        (e,) = d.query.edges
        assert d.query.target == 0 and d.query.vars[1] == Var(w.entity(d.binding[1]).type, (Is(d.binding[1]),))
        assert w.match(d.query) == [d.binding[0]]  # the named neighbour fixes the answer
        assert d.binding[0] != "k"  # the country has 62 links: no hub answers


def test_the_pipeline_keeps_the_earlier_questions_and_their_fingerprint_unless_qa_natural_is_set():
    stage = QAStage(recipes={"e2hqa": 3000}, e2hqa_rounds=(0, 1))
    assert stage.key() == {k: v for k, v in dataclasses.asdict(stage).items() if k != "natural"}
    assert dataclasses.replace(stage, natural=True).key()["natural"] is True


def test_a_city_no_single_value_describes_is_the_birthplace_of_a_player_said_by_his_whole_profile():
    facts = {"p": ("1890-03-01", "1912-05-01", "w"), "q0": ("1875-03-01", "1912-06-01", "f0")}
    facts["q1"] = ("1891-03-01", "1917-05-01", "f1")
    extra = [Entity(k, "person", k, dates={"born": b, "debut": d}, labels=PLAYER) for k, (b, d, _) in facts.items()]
    born = [Relation(k, "born_in", c) for k, (*_, c) in facts.items()]
    w = towns(population=False, players=False, extra=tuple(extra), born=tuple(born))
    d = describe_entity(airport_of_waco(), w, random.Random(0), 1)
    assert d.binding == ("a", "w", "p") and d.query.vars[1] == Var("city")
    assert set(d.query.vars[2].preds) == {
        LabelIs("occupation", "baseball player"),
        DateIn("born", "1890-01-01", "1893-12-31", "early-decade"),
        DateIn("debut", "1910-01-01", "1913-12-31", "early-decade"),
    }  # one value, or the two at the decade (Bo Gray: born 1891, debut 1917), fits another town's player too


def test_sailorfog_text_is_a_description_in_sentences_that_ends_in_the_question():
    w = towns()
    q = Query(
        (
            Var("airport", (NumberIn("elevation_m", 100, 1000, "magnitude"),)),
            Var("city", (NumberIn("population", 100_000, 1_000_000, "magnitude"),)),
            Var("person", (LabelIs("occupation", "baseball player"), Is("p"))),
        ),
        (Edge(0, "serves", 1), Edge(2, "born_in", 1)),
    )
    for style in range(8):
        text = render_question(w, q, style, natural=True, declarative=True)
        sentences = text.split(". ")
        assert 2 <= len(sentences) <= 4 and text.endswith("?") and text.count("?") == 1, text
        assert "airport" in sentences[-1] and not imperative(text) and not text_artefacts(text), text
        assert not scene_noun(text, "airport", person=False), text
    assert SailorFogConfig().declarative  # SailorFog's default; the WebDancer recipes keep their wh-questions


def test_a_time_and_a_place_of_one_event_share_their_verb():
    vps = ["was born during the 1940s", "played for a team", "was born in a city that a player born in 1980 left"]
    assert merge_verbs(vps) == [
        "was born during the 1940s in a city that a player born in 1980 left",
        "played for a team",
    ]
    assert merge_verbs(["died in the 1970s", "died in Waco"]) == ["died in the 1970s in Waco"]
    assert merge_verbs(["was born in Waco", "died in the 1970s"]) == ["was born in Waco", "died in the 1970s"]
