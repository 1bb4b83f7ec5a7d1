"""The `atlas` source: real-world facts from data that PyPI packages ship, joined into one graph.

- pyworldatlas (its SQLite file): countries (population, area, coastline), borders, UN subregions,
  cities with population and elevation, capitals, major rivers and lakes, languages
  (sources: CIA World Factbook, public domain; GeoNames, CC BY 4.0; Natural Earth, public domain;
  Unicode CLDR; IANA; package code MIT).
- airportsdata: about 28,000 airports with their city, subdivision, country and elevation (MIT).
- babel (Unicode CLDR): each country's currencies with the dates they were legal tender
  (Unicode License v3).

Airport cities are joined to atlas cities by country and name, and, when a name repeats within a
country, by the nearest one (within 60 km); otherwise a city is made per (country, subdivision,
name), never by name alone. Names that repeat get qualified ("Springfield (Illinois, US)").
"""

from __future__ import annotations

import dataclasses
import datetime
import importlib.util
import math
import sqlite3
import unicodedata
from collections.abc import Iterable
from pathlib import Path

from jaxseeker.world.entities import Entity, Relation
from jaxseeker.world.graph import World

NEAR_KM = 60.0
_INSTALL = "the atlas source needs: pip install pyworldatlas airportsdata babel"


def _fold(name: str) -> str:
    """Case-, accent- and spacing-insensitive form of a place name."""
    plain = "".join(c for c in unicodedata.normalize("NFKD", name.casefold()) if not unicodedata.combining(c))
    return " ".join(plain.split())


def _km(lat1: float, lon1: float, lat2: float, lon2: float) -> float:
    p1, p2 = math.radians(lat1), math.radians(lat2)
    a = math.sin((p2 - p1) / 2) ** 2 + math.cos(p1) * math.cos(p2) * math.sin(math.radians(lon2 - lon1) / 2) ** 2
    return 6371.0 * 2 * math.asin(math.sqrt(min(1.0, a)))


def _atlas_db() -> sqlite3.Connection:
    spec = importlib.util.find_spec("pyworldatlas")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(_INSTALL)
    path = Path(list(spec.submodule_search_locations)[0]) / "data" / "atlas.sqlite3"
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    con.row_factory = sqlite3.Row
    return con


@dataclasses.dataclass
class _Node:
    id: str
    type: str
    names: list[str]  # preferred first, then qualified fallbacks
    numbers: dict = dataclasses.field(default_factory=dict)
    dates: dict = dataclasses.field(default_factory=dict)


class _Graph:
    def __init__(self):
        self.nodes: dict[str, _Node] = {}
        self.edges: set[Relation] = set()

    def node(self, id: str, type: str, names: list[str], **fields) -> _Node:
        if id not in self.nodes:
            self.nodes[id] = _Node(id, type, [" ".join(n.split()) for n in names], **fields)
        return self.nodes[id]

    def link(self, src: str, rel: str, dst: str) -> None:
        self.edges.add(Relation(src, rel, dst))

    def entities(self) -> list[Entity]:
        """Entities with unique names: the first free candidate, countries first, then by id."""
        taken: set[str] = set()
        order = sorted(self.nodes.values(), key=lambda n: (n.type != "country", n.id))
        named = {}
        for n in order:
            name = next((c for c in n.names if _fold(c) not in taken), None)
            if name is None:
                name = f"{n.names[-1]} [{n.id}]"
            taken.add(_fold(name))
            named[n.id] = Entity(n.id, n.type, name, numbers={k: v for k, v in n.numbers.items() if v is not None},
                                 dates=n.dates)
        return [named[i] for i in sorted(named)]


def _countries(con: sqlite3.Connection, g: _Graph, only: set[str] | None) -> dict[int, str]:
    rows = con.execute(
        "SELECT c.id, c.alpha2, c.name, c.subregion, c.total_area_km2, c.population, p.coastline_km "
        "FROM country c LEFT JOIN country_physical p ON p.country_id = c.id ORDER BY c.alpha2"
    ).fetchall()
    ids = {}
    for r in rows:
        if only is not None and r["alpha2"] not in only:
            continue
        cid = f"country/{r['alpha2']}"
        ids[r["id"]] = cid
        g.node(cid, "country", [r["name"], f"{r['name']} (country)"],
               numbers={"population": r["population"], "area_km2": r["total_area_km2"],
                        "coastline_km": r["coastline_km"] or None})
        if r["subregion"]:
            rid = f"region/{_fold(r['subregion'])}"
            g.node(rid, "region", [r["subregion"], f"{r['subregion']} (region)"])
            g.link(cid, "in_region", rid)
    for a, b in con.execute("SELECT country1_id, country2_id FROM country_border"):
        if a in ids and b in ids:
            g.link(ids[a], "borders", ids[b])
    return ids


def _cities(con: sqlite3.Connection, g: _Graph, countries: dict[int, str]) -> dict[str, list[tuple]]:
    """Atlas cities and capitals; returns, per country id, (folded name, lat, lon, city id) for joining."""
    index: dict[str, list[tuple]] = {}

    def add(row, cid: str) -> str:
        gid = f"city/gn{row['geonames_id']}" if row["geonames_id"] else f"city/{cid}/{_fold(row['name'])}"
        code = cid.split("/")[1]
        g.node(gid, "city", [row["name"], f"{row['name']} ({code})", f"{row['name']} (city, {code})"],
               numbers={"population": row["population"] or None, "elevation_m": row["elevation_m"]})
        g.link(gid, "located_in", cid)
        index.setdefault(cid, []).append((_fold(row["name"]), row["latitude"], row["longitude"], gid))
        return gid

    for row in con.execute("SELECT * FROM city ORDER BY id"):
        if row["country_id"] in countries:
            add(row, countries[row["country_id"]])
    for row in con.execute("SELECT * FROM capital WHERE is_primary = 1 ORDER BY id"):
        if row["country_id"] in countries:
            cid = countries[row["country_id"]]
            gid = f"city/gn{row['geonames_id']}" if row["geonames_id"] else None
            city = gid if gid in g.nodes else add(row, cid)
            g.link(city, "capital_of", cid)
    return index


def _waters_and_languages(con: sqlite3.Connection, g: _Graph, countries: dict[int, str]) -> None:
    for table, type, rel, size in (("country_river", "river", "flows_through", "length_km"),
                                   ("country_lake", "lake", "lake_in", "area_km2")):
        for row in con.execute(f"SELECT country_id, name, {size} FROM {table} ORDER BY name"):
            if row["country_id"] in countries:
                nid = f"{type}/{_fold(row['name'])}"
                g.node(nid, type, [row["name"], f"{row['name']} ({type})"], numbers={size: row[size]})
                g.link(nid, rel, countries[row["country_id"]])
    for row in con.execute("SELECT country_id, primary_code, name FROM country_language ORDER BY primary_code"):
        if row["country_id"] in countries:
            lid = f"language/{row['primary_code']}"
            g.node(lid, "language", [row["name"], f"{row['name']} (language)"])
            g.link(lid, "spoken_in", countries[row["country_id"]])


def _currencies(g: _Graph, countries: Iterable[str]) -> None:
    from babel import Locale
    from babel.numbers import get_territory_currencies

    names = Locale("en").currencies
    spans: dict[str, list[tuple]] = {}
    for cid in countries:
        code = cid.split("/")[1]
        try:
            rows = get_territory_currencies(code, start_date=datetime.date(1800, 1, 1), end_date=datetime.date.today(),
                                            include_details=True)
        except Exception:  # babel raises for territories CLDR does not know
            continue
        current = [r for r in rows if r["to"] is None and r["tender"]]
        for r in rows:
            if not r["tender"]:
                continue
            spans.setdefault(r["currency"], []).append((r["from"], r["to"]))
            rel = "uses_currency" if r["to"] is None else "used_currency"
            g.link(cid, rel, f"currency/{r['currency']}")
        froms = [r["from"] for r in current if r["from"] is not None]
        if froms:
            g.nodes[cid].dates["currency_since"] = min(froms).isoformat()
    for code, periods in sorted(spans.items()):
        name = names.get(code, code)
        dates = {}
        starts = [a for a, _ in periods if a is not None]
        if starts:
            dates["introduced"] = min(starts).isoformat()
        if all(b is not None for _, b in periods):
            dates["withdrawn"] = max(b for _, b in periods).isoformat()
        g.node(f"currency/{code}", "currency", [name, f"{name} ({code})"], dates=dates)


def _airports(g: _Graph, countries: dict[int, str], cities: dict[str, list[tuple]]) -> None:
    try:
        import airportsdata
    except ModuleNotFoundError:
        raise ModuleNotFoundError(_INSTALL) from None
    wanted = {cid.split("/")[1]: cid for cid in countries.values()}
    joined: dict[tuple, str] = {}
    placed: set[str] = set()  # cities already put in a subdivision
    for icao, a in sorted(airportsdata.load().items()):
        cid = wanted.get(a["country"])
        if cid is None or not a["name"]:
            continue
        aid = f"airport/{icao}"
        g.node(aid, "airport", [a["name"], f"{a['name']} ({a['city'] or a['country']})", f"{a['name']} ({icao})"],
               numbers={"elevation_m": round(a["elevation"] * 0.3048) if a["elevation"] is not None else None})
        g.link(aid, "airport_in", cid)
        if not a["city"]:
            continue
        key = (cid, a["subd"], _fold(a["city"]))
        if key not in joined:
            near = [(d, gid) for name, lat, lon, gid in cities.get(cid, ()) if name == key[2]
                    and (d := _km(lat, lon, a["lat"], a["lon"])) <= NEAR_KM]
            code = a["country"]
            city = min(near)[1] if near else f"city/{code}/{_fold(a['subd'] or '-')}/{key[2]}"
            qualified = f"{a['city']} ({a['subd']}, {code})" if a["subd"] else f"{a['city']} ({code})"
            g.node(city, "city", [a["city"], qualified, f"{qualified} [{len(g.nodes)}]"])
            g.link(city, "located_in", cid)
            if a["subd"]:
                sid = f"subdivision/{code}/{_fold(a['subd'])}"
                g.node(sid, "subdivision", [a["subd"], f"{a['subd']} ({code})", f"{a['subd']} (subdivision, {code})"])
                g.link(sid, "subdivision_of", cid)
                if city not in placed:
                    placed.add(city)
                    g.link(city, "in_subdivision", sid)
            joined[key] = city
        g.link(aid, "serves", joined[key])


def atlas_world(countries: Iterable[str] | None = None) -> World:
    """The atlas world (all countries, or only these ISO alpha-2 codes, for small test worlds)."""
    only = {c.upper() for c in countries} if countries is not None else None
    g = _Graph()
    with _atlas_db() as con:
        ids = _countries(con, g, only)
        if only is not None and len(ids) != len(only):
            known = {r[0] for r in con.execute("SELECT alpha2 FROM country")}
            raise ValueError(f"unknown country codes: {sorted(only - known)}")
        cities = _cities(con, g, ids)
        _waters_and_languages(con, g, ids)
    _currencies(g, ids.values())
    _airports(g, ids, cities)
    info = {"source": "atlas", "countries": sorted(only) if only else "all"}
    return World(g.entities(), sorted(g.edges), info=info)
