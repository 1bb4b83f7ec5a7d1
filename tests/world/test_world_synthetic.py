"""The synthetic source: deterministic, typed, every relation type, facts consistent with the schema."""

import collections

import pytest

from jaxseeker.errors import InputError
from jaxseeker.world import synthetic_world
from jaxseeker.world.entities import date_parts
from jaxseeker.world.schema import RELATIONS
from jaxseeker.world.synthetic import MIN_SIZE


def test_same_seed_same_world_other_seed_other_world(small_world):
    again = synthetic_world(600, seed=7)
    assert [e.to_json() for e in again.entities.values()] == [e.to_json() for e in small_world.entities.values()]
    assert again.relations == small_world.relations
    assert [p.text for p in again.pages] == [p.text for p in small_world.pages]
    other = synthetic_world(600, seed=8)
    assert [e.name for e in other.entities.values()] != [e.name for e in small_world.entities.values()]


def test_size_types_and_unique_names(small_world):
    assert len(small_world) == 600
    types = collections.Counter(e.type for e in small_world.entities.values())
    assert set(types) == {"person", "country", "city", "organisation", "work", "event"}
    names = [e.name for e in small_world.entities.values()]
    assert len(set(names)) == len(names)


def test_relations_follow_the_schema(small_world):
    rels = small_world.relation_types()
    assert len(rels) >= 8
    for r in small_world.relations:
        spec = RELATIONS[r.rel]
        assert small_world.entity(r.src).type == spec.src, r
        assert small_world.entity(r.dst).type == spec.dst, r


def test_known_facts_hold(small_world):
    # every country has exactly one capital, and it lies in that country
    for country in small_world.ids_of_type("country"):
        (capital,) = small_world.sources(country, "capital_of")
        assert small_world.targets(capital, "located_in") == (country,)
    # people die after they are born; organisations are founded after their founders are born
    for pid in small_world.ids_of_type("person"):
        p = small_world.entity(pid)
        assert "died" not in p.dates or p.dates["died"] > p.dates["born"]
    for oid in small_world.ids_of_type("organisation"):
        founded = date_parts(small_world.entity(oid).dates["founded"])[0]
        for f in small_world.targets(oid, "founded_by"):
            assert founded > date_parts(small_world.entity(f).dates["born"])[0]


def test_graph_has_hubs_and_rare_entities(small_world):
    degrees = sorted(small_world.degree(i) for i in small_world.entities)
    assert degrees[0] <= 2 and degrees[-1] >= 15


def test_the_smallest_size_the_message_names_builds():
    assert len(synthetic_world(MIN_SIZE, seed=0).entities) == MIN_SIZE
    with pytest.raises(InputError, match=rf"size={MIN_SIZE - 1} is too small .* \(need at least {MIN_SIZE} entities\)"):
        synthetic_world(MIN_SIZE - 1, seed=0)
