"""Artefact counts on hand-written questions and hand-built worlds: each test says what a reader would see."""

import json

import pytest

from jaxseeker.cli import main
from jaxseeker.synthesis.qa.artefacts import (
    ArtefactCounts,
    artefact_summary,
    check_limits,
    count_artefacts,
    droppable_clues,
    entity_ways,
    fewest_candidates,
    found_by_one_search,
)
from jaxseeker.synthesis.qa.record import QARecord
from jaxseeker.synthesis.qa.textcheck import (
    country_without_the,
    disambiguator,
    imperative,
    repeated_name,
    scene_noun,
    stacked_relative,
)
from jaxseeker.world import Edge, Entity, Is, LabelIs, NameInitial, NumberIn, Query, Relation, Var, World


def towns() -> World:
    """Varo (1.54 million) and Lenst (20,400) in Tesland, Maro (25,000) in Ruland; each has its airport."""
    entities = [
        Entity("c", "city", "Varo", numbers={"population": 1_540_000}),
        Entity("d", "city", "Lenst", numbers={"population": 20_400}),
        Entity("m", "city", "Maro", numbers={"population": 25_000}),
        Entity("k", "country", "Tesland"),
        Entity("r", "country", "Ruland"),
        Entity("a", "airport", "Varo Field", numbers={"elevation": 40}),
        Entity("b", "airport", "Maro Field", numbers={"elevation": 900}),
        Entity("e", "airport", "Lenst Field", numbers={"elevation": 300}),
    ]
    rels = [Relation("c", "located_in", "k"), Relation("d", "located_in", "k"), Relation("m", "located_in", "r")]
    rels += [Relation("a", "serves", "c"), Relation("a", "airport_in", "k")]
    rels += [Relation("b", "serves", "m"), Relation("b", "airport_in", "r")]
    rels += [Relation("e", "serves", "d"), Relation("e", "airport_in", "k")]
    return World(entities, rels)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Name the city that lies in Tesland.", True),
        ("A city lies in Tesland. Think of its airport: which one is it?", True),
        ("Which city lies in Tesland? Please answer.", True),
        ("Which city lies in Tesland?", False),
        ("A player born in Waco played for a club. Which club is it?", False),
    ],
)
def test_imperative_frames_are_sentences_that_open_with_a_command(text, expected):
    assert imperative(text) is expected


def test_text_artefacts():
    assert disambiguator("Which airport serves Richmond (Kentucky, US)?")
    assert not disambiguator("Which airport serves Richmond, Kentucky?")
    stacked = (
        "Find the population of the city where a player who passed away in the city where Mike Moore was born was born."
    )
    assert stacked_relative(stacked)
    assert stacked_relative(
        "Look up the population of the city where a player born in the place where Henry Mullin died died."
    )
    assert not stacked_relative("Which city is the birthplace of a player who died in Waco?")
    arco = "What airport serves Arco and lies in a country that contains Arco and has a subdivision that contains Arco?"
    assert repeated_name(arco)
    assert not repeated_name("Which city lies in Tesland and is served by Varo Field? Tesland has a coast.")
    assert repeated_name("What airport serves Arco and lies in the subdivision of Arco?")  # twice is one too many
    assert scene_noun("Think of a city in Tesland. Which airport is it?", "airport", person=False)
    assert scene_noun("A city lies in Tesland. Who is it?", "city", person=False)
    assert not scene_noun("A player was born in Varo. Who is this player?", "baseball player", person=True)
    assert not scene_noun("An airport serves Varo. What is this airport called?", "airport", person=False)
    assert country_without_the("Which city lies in United States?", ("United States",))
    assert not country_without_the("Which city lies in the United States? The United States …", ("United States",))


def test_a_country_implied_by_the_city_is_a_droppable_clue_and_the_needed_ones_are_not():
    w = towns()
    # the airport in Tesland serving a city in Tesland of more than a million: the airport's country is implied
    q = Query(
        (
            Var("airport"),
            Var("city", (NumberIn("population", 1_000_000, None, "above"),)),
            Var("country", (Is("k"),)),
        ),
        (Edge(0, "serves", 1), Edge(1, "located_in", 2), Edge(0, "airport_in", 2)),
    )
    assert droppable_clues(w, q, ("a", "c", "k")) == ["edge 1-located_in-2", "edge 0-airport_in-2"]
    # the city of more than a million alone: nothing to drop (without the number two cities of Tesland fit)
    q2 = Query(
        (Var("airport"), Var("city", (NumberIn("population", 1_000_000, None, "above"),))), (Edge(0, "serves", 1),)
    )
    assert droppable_clues(w, q2, ("a", "c")) == []


def test_entity_ways_and_one_search():
    q = Query(
        (Var("airport"), Var("city", (NameInitial("first", "V"),)), Var("country", (Is("k"),)), Var("city")),
        (Edge(0, "serves", 1), Edge(0, "airport_in", 2), Edge(3, "located_in", 2)),
    )
    assert entity_ways(q) == ["first_letter", "named", "described"]
    w = towns()
    assert found_by_one_search(w, "Maro Field airport", "b")
    assert not found_by_one_search(w, "Maro Field airport", "c", k=1)


def test_a_question_that_names_nothing_is_counted_with_the_fewest_candidates_its_clues_leave():
    w = towns()
    # a city of 20,000 to 30,000 (Lenst, Maro: 2 of 3 cities) served by an airport above 500 m (Maro Field: 1 of 3)
    q = Query(
        (
            Var("airport", (NumberIn("elevation", 500, None, "above"),)),
            Var("city", (NumberIn("population", 20_000, 30_000, "between"),)),
        ),
        (Edge(0, "serves", 1),),
    )
    assert fewest_candidates(w, q) == 1
    # no value at all: every entity of the smaller type (2 countries against 3 cities)
    bare = Query((Var("city"), Var("country")), (Edge(0, "located_in", 1),))
    assert fewest_candidates(w, bare) == 2
    named = Query((Var("city"), Var("country", (Is("r"),))), (Edge(0, "located_in", 1),))
    records = [
        QARecord("Which city has an airport above 500 m?", "Maro", "t", 2, {"query": q.to_json()}),
        QARecord("Which city is in a country?", "Maro", "t", 2, {"query": bare.to_json()}),
        QARecord("Which city is in Ruland?", "Maro", "t", 1, {"query": named.to_json()}),
    ]
    counts = count_artefacts(records, w, solve=False)
    assert (counts.names_nothing, counts.fewest) == (2, (1, 2))
    assert "naming nothing: 2 of 3; the fewest candidates a variable's own clues leave: at most 10 in 2" in (
        artefact_summary(counts)
    )
    assert count_artefacts(records).fewest == ()  # no world, no candidates counted


def test_counts_and_limits():
    w = towns()
    q = Query((Var("city", (LabelIs("kind", "x"),)), Var("country", (Is("k"),))), (Edge(0, "located_in", 1),))
    meta = {"query": q.to_json(), "answer_id": "c", "entities": ["c", "k"]}
    rec = QARecord("Name the city in Tesland, Tesland or Tesland.", "Varo", "t", 2, meta)
    counts = count_artefacts([rec], w, solve=False)
    assert counts.artefacts["imperative"] == 1 and counts.artefacts["repeated_name"] == 1
    assert counts.artefacts["scene_noun"] == counts.artefacts["country_the"] == 0
    w2 = World(list(w.entities.values()) + [Entity("u", "country", "United States")], [])
    scene = QARecord("A city lies near United States. Which airport is it?", "Varo", "t", 2, meta)
    counts = count_artefacts([scene], w2, solve=False)
    assert counts.artefacts["scene_noun"] == counts.artefacts["country_the"] == 1
    assert counts.entities == {"described": 0, "named": 1, "first_letter": 0} and counts.answers == {"entity": 1}
    c = ArtefactCounts(40, {"imperative": 5, "first_letter": 4}, {"described": 7, "named": 3}, {"entity": 10})
    assert check_limits(c, {"imperative": 0.10, "first_letter": 0.10, "min_described": 0.7}) == [
        "imperative: 12.5% > 10.0%"
    ]
    assert check_limits(c, {"min_entity_answers": 0.5}) == ["entity_answers: 25% < 50%"]
    with pytest.raises(ValueError, match="unknown limit 'bogus'"):
        check_limits(c, {"bogus": 1.0})


def test_synth_stats_fails_past_a_limit_of_its_yaml(tmp_path, capsys):
    path = tmp_path / "q.jsonl"
    rows = [{"question": "Name the city in Tesland.", "answer": "Varo", "tag": "t", "level": 1, "meta": {}}]
    rows.append({"question": "Which city lies in Tesland?", "answer": "Varo", "tag": "t", "level": 1, "meta": {}})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "loose.yaml").write_text("imperative: 0.5\n")
    (tmp_path / "tight.yaml").write_text("imperative: 0.4\n")
    assert main(["synth", "stats", str(path), "--limits", str(tmp_path / "loose.yaml")]) == 0
    assert main(["synth", "stats", str(path), "--limits", str(tmp_path / "tight.yaml")]) == 1
    assert "past its limit: imperative: 50.0% > 40.0%" in capsys.readouterr().out
