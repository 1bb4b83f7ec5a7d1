"""The `synthetic` source: a seeded, procedurally generated world of any size.

Countries, cities, people, organisations, works and events with dates and numbers, joined by
sixteen relation types. Popular places and organisations are drawn more often (weights by size), so
the graph has hubs and rare entities as a real web does. The same seed gives the same world.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Sequence

from jaxseeker.errors import InputError
from jaxseeker.world.entities import Entity, Relation, date_parts, iso_date
from jaxseeker.world.graph import World
from jaxseeker.world.names import EVENT_WORDS, ORG_WORDS, NameMaker

LAST_YEAR = 2024
SHARES = {"country": 0.03, "city": 0.12, "organisation": 0.13, "work": 0.17, "event": 0.10}
MIN_SIZE = 28  # the smallest size whose shares leave the 10 people a world needs (tests/world checks it)
OCCUPATIONS = {
    "painter": ("painting", "sculpture"),
    "novelist": ("novel",),
    "poet": ("poem collection",),
    "composer": ("symphony", "opera"),
    "film director": ("film",),
    "physicist": ("treatise",),
    "chemist": ("treatise",),
    "historian": ("treatise",),
    "architect": (),
    "engineer": (),
    "politician": (),
    "athlete": (),
}
GENRE_NUMBER = {
    "novel": "pages",
    "poem collection": "pages",
    "treatise": "pages",
    "film": "duration_min",
    "symphony": "duration_min",
    "opera": "duration_min",
    "painting": "height_cm",
    "sculpture": "height_cm",
}
MEMBER_KINDS = ("club", "party", "orchestra", "institute")


class _Builder:
    def __init__(self, seed: int):
        self.rng = random.Random(seed)
        self.names = NameMaker(self.rng)
        self.entities: list[Entity] = []
        self.relations: list[Relation] = []
        self.ids = (f"e{i:06d}" for i in itertools.count())

    def date(self, year: int) -> str:
        return iso_date(max(1, min(year, LAST_YEAR)), self.rng.randint(1, 12), self.rng.randint(1, 28))

    def log_uniform(self, lo: float, hi: float) -> int:
        return int(round(math.exp(self.rng.uniform(math.log(lo), math.log(hi)))))

    def add(self, type: str, name: str, **fields) -> Entity:
        e = Entity(next(self.ids), type, name, **fields)
        self.entities.append(e)
        return e

    def link(self, src: Entity, rel: str, dst: Entity) -> None:
        self.relations.append(Relation(src.id, rel, dst.id))

    def weighted(self, items: Sequence[Entity], cum: Sequence[float]) -> Entity:
        return self.rng.choices(items, cum_weights=cum, k=1)[0]


def _cumulative(weights: Sequence[float]) -> list[float]:
    return list(itertools.accumulate(weights))


def _counts(size: int) -> dict[str, int]:
    counts = {t: int(size * s) for t, s in SHARES.items()}
    counts["country"] = max(3, counts["country"])
    counts["city"] = max(2 * counts["country"], counts["city"])
    counts["person"] = size - sum(counts.values())
    if counts["person"] < 10:
        raise InputError(f"size={size} is too small for a synthetic world (need at least {MIN_SIZE} entities)")
    return counts


def _places(b: _Builder, n_country: int, n_city: int) -> tuple[list[Entity], list[Entity], dict[str, Entity]]:
    countries = []
    for _ in range(n_country):
        countries.append(
            b.add(
                "country",
                b.names.country(),
                numbers={
                    "population": b.log_uniform(1e5, 3e8),
                    "area_km2": b.log_uniform(500, 5e6),
                    "forest_pct": round(math.exp(b.rng.uniform(math.log(0.2), math.log(75))), 1),
                },
                dates={"founded": b.date(b.rng.randint(800, 1995))},
            )
        )
    for i, c in enumerate(countries):
        for step, p in ((1, 0.8), (2, 0.3)):
            if i + step < len(countries) and b.rng.random() < p:
                b.link(c, "borders", countries[i + step])
    cities, country_of = [], {}
    for i in range(n_city):
        country = countries[i] if i < n_country else b.rng.choice(countries)
        city = b.add(
            "city",
            b.names.city(),
            numbers={"population": b.log_uniform(2e3, 1.5e7), "elevation_m": b.rng.randint(0, 2500)},
            dates={"founded": b.date(b.rng.randint(100, 1950))},
        )
        b.link(city, "located_in", country)
        cities.append(city)
        country_of[city.id] = country
    for country in countries:
        own = [c for c in cities if country_of[c.id].id == country.id]
        b.link(max(own, key=lambda c: c.numbers["population"]), "capital_of", country)
    return countries, cities, country_of


def _people(b: _Builder, n: int, cities: list[Entity], countries: list[Entity], country_of) -> list[Entity]:
    city_cum = _cumulative([math.log(c.numbers["population"]) ** 2 for c in cities])
    people = []
    for _ in range(n):
        year = b.rng.randint(1850, 2005) if b.rng.random() < 0.9 else b.rng.randint(300, 1849)
        dates = {"born": b.date(year)}
        death = year + b.rng.randint(30, 95)
        dead = death < LAST_YEAR and (year < 1925 or b.rng.random() < 0.5)
        if dead:
            dates["died"] = b.date(death)
        person = b.add(
            "person", b.names.person(), dates=dates, labels={"occupation": b.rng.choice(sorted(OCCUPATIONS))}
        )
        birthplace = b.weighted(cities, city_cum)
        b.link(person, "born_in", birthplace)
        home = country_of[birthplace.id] if b.rng.random() < 0.9 else b.rng.choice(countries)
        b.link(person, "citizen_of", home)
        if dead and b.rng.random() < 0.7:
            b.link(person, "died_in", b.weighted(cities, city_cum))
        people.append(person)
    return people


def _organisations(b: _Builder, n: int, cities, people) -> list[Entity]:
    city_cum = _cumulative([math.log(c.numbers["population"]) ** 2 for c in cities])
    orgs = []
    for _ in range(n):
        kind = b.rng.choice(sorted(ORG_WORDS))
        founders = b.rng.sample(people, k=1 if b.rng.random() < 0.7 else 2)
        born = max(date_parts(f.dates["born"])[0] for f in founders)
        org = b.add(
            "organisation",
            b.names.organisation(kind),
            labels={"kind": kind},
            numbers={"employees": b.log_uniform(10, 200_000 if kind == "company" else 5_000)},
            dates={"founded": b.date(born + b.rng.randint(25, 60))},
        )
        for f in founders:
            b.link(org, "founded_by", f)
        b.link(org, "headquartered_in", b.weighted(cities, city_cum))
        orgs.append(org)
    member_orgs = [o for o in orgs if o.labels["kind"] in MEMBER_KINDS]
    universities = [o for o in orgs if o.labels["kind"] == "university"]
    member_cum = _cumulative([math.log(o.numbers["employees"]) + 1 for o in member_orgs])
    for person in people:
        if universities and b.rng.random() < 0.5:
            b.link(person, "studied_at", b.rng.choice(universities))
        for _ in range(b.rng.choice((0, 0, 1, 1, 2))):
            if member_orgs:
                b.link(person, "member_of", b.weighted(member_orgs, member_cum))
    return orgs


def _works(b: _Builder, n: int, cities, people, orgs) -> None:
    creators = [p for p in people if OCCUPATIONS[p.labels["occupation"]]]
    publishers = [o for o in orgs if o.labels["kind"] == "publisher"]
    for _ in range(n):
        creator = b.rng.choice(creators)
        genre = b.rng.choice(OCCUPATIONS[creator.labels["occupation"]])
        born = date_parts(creator.dates["born"])[0]
        last = date_parts(creator.dates["died"])[0] if "died" in creator.dates else LAST_YEAR
        year = min(last, born + b.rng.randint(20, 70))
        number = GENRE_NUMBER[genre]
        value = {
            "pages": b.rng.randint(40, 1200),
            "duration_min": b.rng.randint(12, 240),
            "height_cm": b.rng.randint(20, 400),
        }[number]
        work = b.add(
            "work", b.names.work(), labels={"genre": genre}, numbers={number: value}, dates={"released": b.date(year)}
        )
        b.link(work, "created_by", creator)
        if publishers and number == "pages" and b.rng.random() < 0.7:
            b.link(work, "published_by", b.rng.choice(publishers))
        if genre in ("novel", "film") and b.rng.random() < 0.5:
            b.link(work, "set_in", b.rng.choice(cities))


def _events(b: _Builder, n: int, cities, people, orgs) -> None:
    city_cum = _cumulative([math.log(c.numbers["population"]) ** 2 for c in cities])
    for _ in range(n):
        kind = b.rng.choice(sorted(EVENT_WORDS))
        year = b.rng.randint(1500, LAST_YEAR)
        event = b.add(
            "event",
            b.names.event(kind),
            labels={"kind": kind},
            numbers={"attendance": b.log_uniform(50, 500_000)},
            dates={"held": b.date(year)},
        )
        b.link(event, "took_place_in", b.weighted(cities, city_cum))
        if b.rng.random() < 0.6:
            b.link(event, "organised_by", b.rng.choice(orgs))
        for person in b.rng.sample(people, k=min(len(people), b.rng.randint(0, 6))):
            born = date_parts(person.dates["born"])[0]
            died = date_parts(person.dates["died"])[0] if "died" in person.dates else LAST_YEAR
            if born + 15 <= year <= died:
                b.link(person, "participated_in", event)


def synthetic_world(size: int = 2000, seed: int = 0) -> World:
    """A procedurally generated world of `size` entities, the same for the same `seed`."""
    counts = _counts(size)
    b = _Builder(seed)
    countries, cities, country_of = _places(b, counts["country"], counts["city"])
    people = _people(b, counts["person"], cities, countries, country_of)
    orgs = _organisations(b, counts["organisation"], cities, people)
    _works(b, counts["work"], cities, people, orgs)
    _events(b, counts["event"], cities, people, orgs)
    return World(b.entities, b.relations, info={"source": "synthetic", "size": size, "seed": seed})
