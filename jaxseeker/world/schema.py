"""What a world can say: entity types, attributes and relations, with the English phrases for each.

The same phrases write the pages (so the facts a question relies on can be found by search) and
render the questions of the synthesisers.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class TypeSpec:
    """An entity type: its noun, plural, relative pronoun and the label key that refines its noun."""

    noun: str
    plural: str
    pronoun: str = "that"
    kind_label: str | None = None


@dataclasses.dataclass(frozen=True)
class AttrSpec:
    """An attribute: `date` (ISO YYYY-MM-DD) or `number`; `verb` takes the value phrase as `{}`; a date known
    only to the year has `precision` "year" (stored as YYYY-01-01, said as "in YYYY")."""

    kind: str
    verb: str
    ask: str
    unit: str = ""
    precision: str = "day"


@dataclasses.dataclass(frozen=True)
class RelSpec:
    """A relation `src --rel--> dst`: forward phrase (said of src), backward phrase (said of dst)."""

    src: str
    dst: str
    forward: str
    backward: str
    functional: bool = False


TYPES: dict[str, TypeSpec] = {
    "person": TypeSpec("person", "people", "who", "occupation"),
    "country": TypeSpec("country", "countries"),
    "city": TypeSpec("city", "cities"),
    "organisation": TypeSpec("organisation", "organisations", kind_label="kind"),
    "work": TypeSpec("work", "works", kind_label="genre"),
    "event": TypeSpec("event", "events", kind_label="kind"),
    "page": TypeSpec("page", "pages"),
    "airport": TypeSpec("airport", "airports"),
    "subdivision": TypeSpec("subdivision", "subdivisions"),
    "region": TypeSpec("region", "regions"),
    "river": TypeSpec("river", "rivers"),
    "lake": TypeSpec("lake", "lakes"),
    "language": TypeSpec("language", "languages"),
    "currency": TypeSpec("currency", "currencies"),
    "mountain": TypeSpec("mountain", "mountains"),
    "ballpark": TypeSpec("ballpark", "ballparks"),
    "award": TypeSpec("award", "awards"),
    "element": TypeSpec("element", "elements", kind_label="series"),
}

ATTRIBUTES: dict[str, AttrSpec] = {
    "born": AttrSpec("date", "was born {}", "In what year was {} born?"),
    "died": AttrSpec("date", "died {}", "In what year did {} die?"),
    "founded": AttrSpec("date", "was founded {}", "In what year was {} founded?"),
    "released": AttrSpec("date", "was released {}", "In what year was {} released?"),
    "held": AttrSpec("date", "was held {}", "In what year was {} held?"),
    "population": AttrSpec("number", "has a population of {}", "What is the population of {}?"),
    "area_km2": AttrSpec("number", "has an area of {}", "What is the area of {} in square kilometres?", " km²"),
    "forest_pct": AttrSpec("number", "has a forest cover of {}", "What share of {} is forest, in percent?", "%"),
    "elevation_m": AttrSpec("number", "lies at an elevation of {}", "At what elevation in metres does {} lie?", " m"),
    "employees": AttrSpec("number", "has {} employees", "How many employees does {} have?"),
    "pages": AttrSpec("number", "is {} pages long", "How many pages long is {}?"),
    "duration_min": AttrSpec("number", "runs for {}", "How many minutes does {} run for?", " minutes"),
    "height_cm": AttrSpec("number", "is {} tall", "How tall is {} in centimetres?", " cm"),
    "attendance": AttrSpec("number", "drew an attendance of {}", "How many people attended {}?"),
    "coastline_km": AttrSpec("number", "has a coastline of {}", "How long is the coastline of {} in km?", " km"),
    "length_km": AttrSpec("number", "is {} long", "How long is {} in kilometres?", " km"),
    "introduced": AttrSpec("date", "was introduced {}", "In what year was {} introduced?"),
    "withdrawn": AttrSpec("date", "was withdrawn {}", "In what year was {} withdrawn?"),
    "currency_since": AttrSpec(
        "date", "adopted its current currency {}", "In what year did {} adopt its current currency?"
    ),
    "debut": AttrSpec("date", "made a major-league debut {}", "In what year did {} make a major-league debut?"),
    "final_game": AttrSpec(
        "date", "played a last major-league game {}", "In what year did {} play a last major-league game?"
    ),
    "weight_kg": AttrSpec(
        "number", "has a listed weight of {}", "What is the listed weight of {} in kilograms?", " kg"
    ),
    "inducted": AttrSpec(
        "date",
        "was inducted into the Baseball Hall of Fame {}",
        "In what year was {} inducted into the Baseball Hall of Fame?",
        precision="year",
    ),
    "first_season": AttrSpec(
        "date", "played its first season {}", "In what year did {} play its first season?", precision="year"
    ),
    "last_season": AttrSpec(
        "date", "played its last season {}", "In what year did {} play its last season?", precision="year"
    ),
    "first_game": AttrSpec(
        "date", "hosted its first major-league game {}", "In what year did {} host its first major-league game?"
    ),
    "last_game": AttrSpec(
        "date", "hosted its last major-league game {}", "In what year did {} host its last major-league game?"
    ),
    "discovered": AttrSpec("date", "was discovered {}", "In what year was {} discovered?", precision="year"),
    "atomic_number": AttrSpec("number", "has the atomic number {}", "What is the atomic number of {}?"),
    "atomic_weight": AttrSpec("number", "has an atomic weight of {}", "What is the atomic weight of {}?"),
}

RELATIONS: dict[str, RelSpec] = {
    "located_in": RelSpec("city", "country", "is located in {}", "contains {}", functional=True),
    "capital_of": RelSpec("city", "country", "is the capital of {}", "has {} as its capital", functional=True),
    "borders": RelSpec("country", "country", "borders {}", "borders {}"),
    "born_in": RelSpec("person", "city", "was born in {}", "is the birthplace of {}", functional=True),
    "died_in": RelSpec("person", "city", "died in {}", "is the place where {} died", functional=True),
    "citizen_of": RelSpec(
        "person", "country", "is a citizen of {}", "is the country of citizenship of {}", functional=True
    ),
    "studied_at": RelSpec("person", "organisation", "studied at {}", "is where {} studied"),
    "member_of": RelSpec("person", "organisation", "is a member of {}", "has {} as a member"),
    "founded_by": RelSpec("organisation", "person", "was founded by {}", "founded {}"),
    "headquartered_in": RelSpec(
        "organisation", "city", "is headquartered in {}", "hosts the headquarters of {}", functional=True
    ),
    "created_by": RelSpec("work", "person", "was created by {}", "created {}", functional=True),
    "published_by": RelSpec("work", "organisation", "was published by {}", "published {}", functional=True),
    "set_in": RelSpec("work", "city", "is set in {}", "is the setting of {}", functional=True),
    "took_place_in": RelSpec("event", "city", "took place in {}", "hosted {}", functional=True),
    "organised_by": RelSpec("event", "organisation", "was organised by {}", "organised {}", functional=True),
    "participated_in": RelSpec("person", "event", "took part in {}", "had {} among its participants"),
    "links_to": RelSpec("page", "page", "links to {}", "is linked from {}"),
    "in_subdivision": RelSpec("city", "subdivision", "lies in {}", "includes {}", functional=True),
    "subdivision_of": RelSpec(
        "subdivision", "country", "is a subdivision of {}", "has {} among its subdivisions", functional=True
    ),
    "serves": RelSpec("airport", "city", "serves {}", "is served by {}", functional=True),
    "airport_in": RelSpec("airport", "country", "is an airport in {}", "has {} among its airports", functional=True),
    "flows_through": RelSpec("river", "country", "flows through {}", "is crossed by {}"),
    "lake_in": RelSpec("lake", "country", "lies in {}", "has {} on its territory"),
    "spoken_in": RelSpec("language", "country", "is spoken in {}", "has {} among its languages"),
    "uses_currency": RelSpec("country", "currency", "uses {} as its currency", "is the currency of {}"),
    "used_currency": RelSpec("country", "currency", "formerly used {}", "was formerly used in {}"),
    "in_region": RelSpec("country", "region", "lies in {}", "includes {}", functional=True),
    "highest_point_of": RelSpec("mountain", "country", "is the highest point of {}", "has {} as its highest point"),
    "played_for": RelSpec("person", "organisation", "played for {}", "had {} among its players"),
    "won_award": RelSpec("person", "award", "won {}", "was won by {}"),
    "home_park": RelSpec("organisation", "ballpark", "played home games at {}", "was a home ground of {}"),
    "ballpark_in": RelSpec("ballpark", "city", "is a ballpark in {}", "has {} among its ballparks", functional=True),
    "discovered_by": RelSpec("element", "person", "was discovered by {}", "discovered {}"),
    "discovered_in": RelSpec("element", "country", "was discovered in {}", "is where {} was discovered"),
}


def attr_spec(name: str) -> AttrSpec:
    """The spec of attribute `name`; a clear error lists the known ones."""
    try:
        return ATTRIBUTES[name]
    except KeyError:
        raise KeyError(f"unknown attribute {name!r}; known: {sorted(ATTRIBUTES)}") from None


def rel_spec(name: str) -> RelSpec:
    """The spec of relation `name`; a clear error lists the known ones."""
    try:
        return RELATIONS[name]
    except KeyError:
        raise KeyError(f"unknown relation {name!r}; known: {sorted(RELATIONS)}") from None


def type_spec(name: str) -> TypeSpec:
    """The spec of entity type `name`; a clear error lists the known ones."""
    try:
        return TYPES[name]
    except KeyError:
        raise KeyError(f"unknown entity type {name!r}; known: {sorted(TYPES)}") from None
