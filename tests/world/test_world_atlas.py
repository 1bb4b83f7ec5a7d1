"""The atlas source on a few countries: joins checked against known facts (geography, baseball, elements)."""

import pytest

from jaxseeker.world import Edge, Is, Query, Var, atlas_world, build_world
from jaxseeker.world.atlas_graph import GraphBuilder
from jaxseeker.world.atlas_places import Places
from jaxseeker.world.schema import ATTRIBUTES, RELATIONS, TYPES


@pytest.fixture(scope="module")
def atlas():
    return atlas_world(["FR", "DE", "BE", "LU", "CH", "CA", "SE", "DO"])


def by_name(world, name, type):
    return next(e for e in world.entities.values() if e.name == name and e.type == type)


def test_known_facts(atlas):
    france, paris = by_name(atlas, "France", "country"), by_name(atlas, "Paris", "city")
    assert atlas.has_edge(paris.id, "capital_of", france.id) and atlas.has_edge(paris.id, "located_in", france.id)
    assert atlas.has_edge(france.id, "borders", by_name(atlas, "Germany", "country").id) or atlas.has_edge(
        by_name(atlas, "Germany", "country").id, "borders", france.id
    )
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


def test_players_teams_and_ballparks(atlas):
    walker = by_name(atlas, "Larry Walker", "person")
    assert walker.dates["born"] == "1966-12-01" and walker.dates["inducted"] == "2020-01-01"
    (maple_ridge,) = atlas.targets(walker.id, "born_in")
    assert atlas.entity(maple_ridge).name == "Maple Ridge"
    (bc,) = atlas.targets(maple_ridge, "in_subdivision")
    assert atlas.entity(bc).name == "British Columbia" and atlas.targets(bc, "subdivision_of") == ("country/CA",)
    expos = by_name(atlas, "Montreal Expos", "organisation")
    assert atlas.has_edge(walker.id, "played_for", expos.id)
    assert (expos.dates["first_season"], expos.dates["last_season"]) == ("1969-01-01", "2004-01-01")
    stadium = by_name(atlas, "Stade Olympique", "ballpark")
    assert atlas.has_edge(expos.id, "home_park", stadium.id) and stadium.dates["last_game"].startswith("2004")
    (montreal,) = atlas.targets(stadium.id, "ballpark_in")
    assert atlas.targets(expos.id, "headquartered_in") == (montreal,)
    assert "last_game" not in by_name(atlas, "Rogers Centre", "ballpark").dates  # still in use
    sosa = by_name(atlas, "Sammy Sosa", "person")  # born in San Pedro de Macorís, the province's capital
    (city,) = atlas.targets(sosa.id, "born_in")
    (province,) = atlas.targets(city, "in_subdivision")
    assert atlas.entity(province).name.startswith("San Pedro de Macorís") and province.endswith("DO-23")


def test_elements_with_year_only_dates(atlas):
    chlorine = by_name(atlas, "Chlorine", "element")
    assert chlorine.numbers["atomic_number"] == 17 and chlorine.labels["series"] == "halogen"
    assert chlorine.dates["discovered"] == "1774-01-01" and ATTRIBUTES["discovered"].precision == "year"
    scheele = by_name(atlas, "Carl Wilhelm Scheele", "person")
    assert atlas.has_edge(chlorine.id, "discovered_by", scheele.id)
    assert atlas.has_edge(chlorine.id, "discovered_in", by_name(atlas, "Sweden", "country").id)
    assert "Chlorine was discovered in 1774." in atlas.page(chlorine.url).text  # a year, not "on 1 January"


def test_places_join_by_country_and_subdivision(atlas):
    for city in atlas.ids_of_type("city"):
        (country,) = atlas.targets(city, "located_in")
        for sub in atlas.targets(city, "in_subdivision"):
            assert atlas.targets(sub, "subdivision_of") == (country,)
    for r in atlas.relations:
        assert r.rel in RELATIONS and atlas.entity(r.src).type in TYPES
        if r.rel in ("born_in", "died_in", "ballpark_in", "headquartered_in", "serves"):
            assert atlas.entity(r.dst).type == "city"
    assert len(atlas.relation_types()) >= 20
    dated = {a for e in atlas.entities.values() for a in e.dates}
    assert {"born", "died", "debut", "discovered", "first_season", "introduced"} <= dated


def test_a_name_without_its_subdivision_is_not_guessed():
    g = GraphBuilder()
    places = Places(g, {"US": "country/US"}, [])
    illinois = places.city("US", "IL", "Springfield")
    assert illinois == places.city("US", "Illinois", "Springfield") and illinois.startswith("city/gn")
    assert g.nodes[illinois].numbers["population"] > 100_000
    assert places.city("US", "MA", "Springfield") not in (illinois, None)
    unknown = places.city("US", None, "Springfield")  # a dozen Springfields: a place of its own, no guess
    assert not unknown.startswith("city/gn") and unknown == places.city("US", None, "Springfield")
    assert places.country("USA") == "US" and places.country("Canada") is None  # not in this world
