"""World lookups: types, neighbours in both directions, urls, pages, search."""

import pytest

from jaxseeker.world import Entity, Relation, World


def tiny() -> World:
    return World(
        [
            Entity("a", "person", "Ada Lune", dates={"born": "1950-02-03"}, labels={"occupation": "poet"}),
            Entity("b", "city", "Varo"),
            Entity("c", "country", "Tesland", numbers={"population": 1500}),
        ],
        [Relation("a", "born_in", "b"), Relation("b", "located_in", "c")],
        info={"source": "tiny"},
    )


def test_neighbours_both_directions_and_degree():
    w = tiny()
    assert w.targets("a", "born_in") == ("b",)
    assert w.sources("b", "born_in") == ("a",)
    seen = [(n.rel, n.direction, n.id) for n in w.neighbours("b")]
    assert seen == [("born_in", "in", "a"), ("located_in", "out", "c")]
    assert w.neighbours("b", "located_in")[0].id == "c"
    assert w.degree("b") == 2 and w.degree("a") == 1
    assert list(w.ids_of_type("city")) == ["b"] and len(w.ids_of_type(None)) == 3


def test_pages_written_from_facts_link_to_neighbours():
    w = tiny()
    page = w.page(w.url("a"))
    assert page.url == "https://tiny.jaxseeker.local/wiki/Ada_Lune"
    assert page.title == "Ada Lune"
    assert "Ada Lune is a poet." in page.text
    assert "was born on 3 February 1950" in page.text
    assert "Ada Lune was born in Varo." in page.text
    assert page.links == (w.url("b"),)
    city = w.page(w.url("b"))
    assert "Varo is the birthplace of Ada Lune." in city.text
    assert set(city.links) == {w.url("a"), w.url("c")}
    assert w.entity_at(w.url("c")).name == "Tesland"
    assert "population of 1,500" in w.page(w.url("c")).text


def test_search_finds_the_page_of_a_name(small_world):
    e = small_world.entity(next(iter(small_world.ids_of_type("organisation"))))
    hits = small_world.corpus.search(e.name, k=3)
    assert hits[0].url == e.url


def test_bad_input_names_the_culprit():
    with pytest.raises(ValueError, match="unknown entity 'zz'"):
        World([Entity("a", "city", "X")], [Relation("a", "located_in", "zz")])
    with pytest.raises(ValueError, match="duplicate entity id 'a'"):
        World([Entity("a", "city", "X"), Entity("a", "city", "Y")], [])
    with pytest.raises(KeyError, match="no entity with id 'q'"):
        tiny().entity("q")


def test_subgraph_keeps_only_relations_inside():
    sub = tiny().subgraph(["a", "b"])
    assert len(sub) == 2 and sub.relations == [Relation("a", "born_in", "b")]
