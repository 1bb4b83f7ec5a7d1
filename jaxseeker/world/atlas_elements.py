"""Atlas source: the chemical elements in mendeleev's `elements.db` (read with sqlite3; MIT).

Each element (atomic number, atomic weight, discovery year, its series as the kind) is linked to the
countries where it was discovered and to its discoverers: people, or research institutes when the
name says so. Discoverer strings are split on commas, semicolons and "and" ("Pierre and Marie
Curie" gives both Curies); "et al." and honorifics are dropped. An element is kept when one of its
discovery countries is in the world.
"""

from __future__ import annotations

import importlib.util
import re
import sqlite3
from pathlib import Path

from jaxseeker.world.atlas_graph import GraphBuilder, fold, iso_or_none
from jaxseeker.world.atlas_places import Places

SERIES = {
    "Nonmetals": "nonmetal",
    "Noble gases": "noble gas",
    "Alkali metals": "alkali metal",
    "Alkaline earth metals": "alkaline earth metal",
    "Metalloids": "metalloid",
    "Halogens": "halogen",
    "Poor metals": "post-transition metal",
    "Transition metals": "transition metal",
    "Lanthanides": "lanthanide",
    "Actinides": "actinide",
}
PLACE_ALIASES = {"England": "GB", "Scotland": "GB", "Great Britain": "GB", "USSR": "RU"}
_INSTITUTE = re.compile(
    r"Institute|Laborator|Research|Centre|Center|RIKEN|Argonne|Los Alamos|\bU\.? of|Univ", re.IGNORECASE
)


def discoverers(text: str | None) -> list[str]:
    """The names in a discoverer string: split, honorifics and "et al." dropped, a shared surname shared,
    initials spaced."""
    if not text or text.lower().startswith("known to the ancients"):
        return []
    text = re.sub(r",?\s*et al\.?", "", text)
    if _INSTITUTE.search(text) and "/" in text:
        return [p.strip() for p in text.split("/") if p.strip()]
    names = []
    for part in re.split(r"[;,]", text):
        part = re.sub(r"^\s*(Sir|Baron)\s+(?=\S+\s)", "", part.strip()).strip()
        part = re.sub(r"\.(?=\S)", ". ", part)  # "A.Ghiorso" and "A. Ghiorso" are one person
        pair = re.fullmatch(r"(\S+) and (.+ (\S+))", part)
        if pair:  # "Pierre and Marie Curie"
            names += [f"{pair[1]} {pair[3]}", pair[2]]
        elif part:
            names.append(part)
    return names


def elements(g: GraphBuilder, places: Places, install_hint: str) -> None:
    """Add the elements, their discovery countries and their discoverers (see the module docstring)."""
    spec = importlib.util.find_spec("mendeleev")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(install_hint)
    path = Path(next(iter(spec.submodule_search_locations))) / "elements.db"
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as con:
        rows = con.execute(
            "SELECT e.atomic_number, e.symbol, e.name, e.atomic_weight, e.discovery_year, e.discovery_location, "
            "e.discoverers, s.name FROM elements e LEFT JOIN series s ON s.id = e.series_id ORDER BY e.atomic_number"
        ).fetchall()
    named = {eid: discoverers(who) for eid, who in ((f"element/{r[1]}", r[6]) for r in rows)}
    full: dict[tuple[str, str], str] = {}  # (initial, surname) → the longest spelling ("H. Davy" → "Humphrey Davy")
    for person in sorted({p for names in named.values() for p in names if not _INSTITUTE.search(p)}):
        key = (person[:1], fold(person.split()[-1]))
        if len(person) > len(full.get(key, "")):
            full[key] = person
    for number, symbol, name, weight, year, location, _, series in rows:
        codes = [PLACE_ALIASES.get(p.strip()) or places.country(p.strip()) for p in (location or "").split("/")]
        codes = sorted({c for c in codes if c in places.countries})
        if not codes:
            continue
        eid = f"element/{symbol}"
        g.node(
            eid,
            "element",
            [name, f"{name} ({symbol})", f"{name} (element)"],
            labels={"series": SERIES.get(series, "element")} if series else {},
            numbers={"atomic_number": number, "atomic_weight": round(weight, 1) if weight else None},
            dates={"discovered": iso_or_none(year)},
        )
        for code in codes:
            g.link(eid, "discovered_in", places.countries[code])
        for person in named[eid]:
            if _INSTITUTE.search(person):
                did = f"organisation/{fold(person)}"
                g.node(
                    did,
                    "organisation",
                    [person, f"{person} (research institute)"],
                    labels={"kind": "research institute"},
                )
            else:
                person = full[(person[:1], fold(person.split()[-1]))]
                did = f"person/{fold(person)}"
                g.node(did, "person", [person, f"{person} (scientist)"], labels={"occupation": "scientist"})
            g.link(eid, "discovered_by", did)
