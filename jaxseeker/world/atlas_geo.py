"""Atlas sources about places: pyworldatlas (countries, cities, waters, peaks, languages), babel/CLDR
currencies, airportsdata airports."""

from __future__ import annotations

import datetime
import importlib.util
import re
import sqlite3
from collections.abc import Iterable
from pathlib import Path

from jaxseeker.world.atlas_graph import GraphBuilder, fold
from jaxseeker.world.atlas_places import Places


def atlas_db(install_hint: str) -> sqlite3.Connection:
    """pyworldatlas's SQLite file, read-only."""
    spec = importlib.util.find_spec("pyworldatlas")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(install_hint)
    path = Path(next(iter(spec.submodule_search_locations))) / "data" / "atlas.sqlite3"
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    con.row_factory = sqlite3.Row
    return con


def countries(con: sqlite3.Connection, g: GraphBuilder, only: set[str] | None) -> dict[int, str]:
    """Countries (population, area, coastline), their UN subregions and borders; atlas id → entity id."""
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
        g.node(
            cid,
            "country",
            [r["name"], f"{r['name']} (country)"],
            numbers={
                "population": r["population"],
                "area_km2": r["total_area_km2"],
                "coastline_km": r["coastline_km"] or None,
            },
        )
        if r["subregion"]:
            rid = f"region/{fold(r['subregion'])}"
            g.node(rid, "region", [r["subregion"], f"{r['subregion']} (region)"])
            g.link(cid, "in_region", rid)
    for a, b in con.execute("SELECT country1_id, country2_id FROM country_border"):
        if a in ids and b in ids:
            g.link(ids[a], "borders", ids[b])
    return ids


def country_names(con: sqlite3.Connection) -> list[tuple[str, str]]:
    """(name, alpha-2) for every name the atlas knows a country by."""
    rows = con.execute("SELECT c.alpha2, c.name, c.official_name FROM country c").fetchall()
    out = [(n, r["alpha2"]) for r in rows for n in (r["name"], r["official_name"]) if n]
    out += [
        (r[1], r[0])
        for r in con.execute("SELECT c.alpha2, n.name FROM country_name n JOIN country c ON c.id = n.country_id")
    ]
    return out


def cities(con: sqlite3.Connection, g: GraphBuilder, ids: dict[int, str], places: Places) -> None:
    """Atlas cities (population, elevation) in their subdivisions, and capitals."""

    def add(row, cid: str) -> str:
        code = cid.split("/")[1]
        gid = f"city/gn{row['geonames_id']}" if row["geonames_id"] else f"city/{cid}/{fold(row['name'])}"
        g.node(
            gid,
            "city",
            [row["name"], f"{row['name']} ({code})", f"{row['name']} (city, {code})"],
            numbers={"population": row["population"] or None, "elevation_m": row["elevation_m"]},
        )
        g.link(gid, "located_in", cid)
        places.place_known(gid, code, row["geonames_id"])
        return gid

    for row in con.execute("SELECT * FROM city ORDER BY id"):
        if row["country_id"] in ids:
            add(row, ids[row["country_id"]])
    for row in con.execute("SELECT * FROM capital WHERE is_primary = 1 ORDER BY id"):
        if row["country_id"] in ids:
            gid = f"city/gn{row['geonames_id']}" if row["geonames_id"] else None
            city = gid if gid in g.nodes else add(row, ids[row["country_id"]])
            g.link(city, "capital_of", ids[row["country_id"]])


def waters_peaks_languages(con: sqlite3.Connection, g: GraphBuilder, ids: dict[int, str]) -> None:
    """Major rivers (length) and lakes (area) per country, each country's highest point, its languages."""
    for table, type, rel, size in (
        ("country_river", "river", "flows_through", "length_km"),
        ("country_lake", "lake", "lake_in", "area_km2"),
    ):
        for row in con.execute(f"SELECT country_id, name, {size} FROM {table} ORDER BY name"):
            if row["country_id"] in ids:
                nid = f"{type}/{fold(row['name'])}"
                g.node(nid, type, [row["name"], f"{row['name']} ({type})"], numbers={size: row[size]})
                g.link(nid, rel, ids[row["country_id"]])
    for row in con.execute(
        "SELECT country_id, highest_point_name AS name, highest_point_elevation_m AS m "
        "FROM country_physical WHERE highest_point_name IS NOT NULL ORDER BY country_id"
    ):
        name = re.sub(r"\s*\(.*\)$", "", row["name"]).strip()
        if row["country_id"] not in ids or row["m"] is None or not name or name.lower().startswith("unnamed"):
            continue
        country = g.nodes[ids[row["country_id"]]].names[0]
        mid = f"mountain/{fold(name)}/{round(row['m'])}"
        g.node(
            mid,
            "mountain",
            [name, f"{name} ({country})", f"{name} (mountain, {country})"],
            numbers={"elevation_m": round(row["m"])},
        )
        g.link(mid, "highest_point_of", ids[row["country_id"]])
    for row in con.execute("SELECT country_id, primary_code, name FROM country_language ORDER BY primary_code"):
        if row["country_id"] in ids:
            lid = f"language/{row['primary_code']}"
            g.node(lid, "language", [row["name"], f"{row['name']} (language)"])
            g.link(lid, "spoken_in", ids[row["country_id"]])


def currencies(g: GraphBuilder, country_ids: Iterable[str]) -> None:
    """Each country's legal tenders since 1800 (babel / CLDR), with the dates they were introduced and withdrawn."""
    from babel import Locale
    from babel.numbers import get_territory_currencies

    names = Locale("en").currencies
    spans: dict[str, list[tuple]] = {}
    for cid in country_ids:
        code = cid.split("/")[1]
        try:
            rows = get_territory_currencies(
                code, start_date=datetime.date(1800, 1, 1), end_date=datetime.date.today(), include_details=True
            )
        except Exception:  # babel raises for territories CLDR does not know
            continue
        current = [r for r in rows if r["to"] is None and r["tender"]]
        for r in rows:
            if not r["tender"]:
                continue
            spans.setdefault(r["currency"], []).append((r["from"], r["to"]))
            g.link(cid, "uses_currency" if r["to"] is None else "used_currency", f"currency/{r['currency']}")
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


def airports(g: GraphBuilder, places: Places, install_hint: str) -> None:
    """airportsdata: airports (elevation) in their country, each serving its city resolved by country,
    subdivision and name (the nearest such city within `NEAR_KM`)."""
    try:
        import airportsdata
    except ModuleNotFoundError:
        raise ModuleNotFoundError(install_hint) from None
    for icao, a in sorted(airportsdata.load().items()):
        code = a["country"]
        if code not in places.countries or not a["name"]:
            continue
        aid = f"airport/{icao}"
        g.node(
            aid,
            "airport",
            [a["name"], f"{a['name']} ({a['city'] or code})", f"{a['name']} ({icao})"],
            numbers={"elevation_m": round(a["elevation"] * 0.3048) if a["elevation"] is not None else None},
        )
        g.link(aid, "airport_in", places.countries[code])
        if a["city"]:
            g.link(aid, "serves", places.city(code, a["subd"] or None, a["city"], near=(a["lat"], a["lon"])))
