"""The atlas source on a few countries: joins checked against known facts."""

import pytest

from jaxseeker.world import Edge, Is, Query, Var, atlas_world, build_world


@pytest.fixture(scope="module")
def atlas():
    return atlas_world(["FR", "DE", "BE", "LU", "CH"])


def by_name(world, name, type):
    return next(e for e in world.entities.values() if e.name == name and e.type == type)


def test_known_facts(atlas):
    france, paris = by_name(atlas, "France", "country"), by_name(atlas, "Paris", "city")
    assert atlas.has_edge(paris.id, "capital_of", france.id) and atlas.has_edge(paris.id, "located_in", france.id)
    assert atlas.has_edge(france.id, "borders", by_name(atlas, "Germany", "country").id) or atlas.has_edge(
        by_name(atlas, "Germany", "country").id, "borders", france.id)
    euro = by_name(atlas, "Euro", "currency")
    assert euro.dates["introduced"] == "1999-01-01" and atlas.has_edge(france.id, "uses_currency", euro.id)
    franc = by_name(atlas, "French Franc", "currency")
    assert franc.dates["withdrawn"] == "2002-02-17" and atlas.has_edge(france.id, "used_currency", franc.id)
    assert france.dates["currency_since"] == "1999-01-01" and france.numbers["population"] > 60_000_000
    cdg = by_name(atlas, "Charles de Gaulle International Airport", "airport")
    assert atlas.has_edge(cdg.id, "serves", paris.id)


def test_every_capital_lies_in_its_country_and_airports_serve_cities_of_their_country(atlas):
    for country in atlas.ids_of_type("country"):
        (capital,) = atlas.sources(country, "capital_of")
        assert atlas.targets(capital, "located_in") == (country,)
    for airport in atlas.ids_of_type("airport"):
        (country,) = atlas.targets(airport, "airport_in")
        for city in atlas.targets(airport, "serves"):
            assert atlas.targets(city, "located_in") == (country,)


def test_rich_enough_and_names_unique(atlas):
    assert len(atlas.relation_types()) >= 10
    names = [e.name for e in atlas.entities.values()]
    assert len(set(names)) == len(names)
    q = Query((Var("country"), Var("city", (Is(by_name(atlas, "Bern", "city").id),))), (Edge(1, "capital_of", 0),))
    assert atlas.match(q) == [by_name(atlas, "Switzerland", "country").id]


def test_build_caches_by_countries(tmp_path):
    w = build_world("atlas", countries=["lu"], cache_dir=tmp_path)
    assert {e.name for e in w.entities.values() if e.type == "country"} == {"Luxembourg"}
    assert len(list(tmp_path.iterdir())) == 1
    with pytest.raises(ValueError, match="unknown country codes: \\['ZZ'\\]"):
        build_world("atlas", countries=["ZZ"], use_cache=False)
