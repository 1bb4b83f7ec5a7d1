"""The realiser's phrase book of attributes: several constructions for every attribute of the world's schema.

An attribute's forms (`vp`, `mod`, `lead` as a relation's in `lexicon`) take `{v}` (a date phrase with its
preposition: `in the 1960s`), `{q}` (an amount with its unit: `more than four hundred metres`) or `{qn}` (an amount
before a noun the form names: `tens of thousands of` people); `ask` asks for the attribute of `{x}`. An attribute
missing here falls back to the schema's own verb and question (`world.schema`).
"""

from __future__ import annotations

import dataclasses

from jaxseeker.world.schema import ATTRIBUTES


@dataclasses.dataclass(frozen=True)
class AttrForms:
    """The constructions of one attribute; `word`, `symbol` and `scale` say its amounts (see `values.say_quantity`);
    `magnitude`: an order of magnitude (`tens of thousands`) reads naturally for it."""

    vp: tuple[str, ...]
    mod: tuple[str, ...] = ()
    ask: tuple[str, ...] = ()
    lead: tuple[str, ...] = ()
    word: str = ""
    symbol: str = ""
    scale: float = 1.0
    magnitude: bool = False


def _a(vp, mod=(), ask=(), lead=(), **kw) -> AttrForms:
    return AttrForms(tuple(vp), tuple(mod), tuple(ask), tuple(lead), **kw)


_YEAR = "Give the year."
ATTRIBUTES_SAID: dict[str, AttrForms] = {
    "born": _a(
        ["was born {v}"],
        ["born {v}"],
        [
            "In what year was {x} born?",
            "In which year was {x} born?",
            "What year was {x} born in?",
            "What is the birth year of {x}?",
            f"When was {{x}} born? {_YEAR}",
            "{x} was born in which year?",
            "Give the birth year of {x}.",
        ],
        ["Born {v}"],
    ),
    "died": _a(
        ["died {v}", "passed away {v}"],
        ["whose death came {v}"],
        [
            "In what year did {x} die?",
            "What year did {x} die in?",
            f"When did {{x}} die? {_YEAR}",
            "{x} died in which year?",
            "Give the year of death of {x}.",
        ],
    ),
    "founded": _a(
        ["was founded {v}", "was established {v}"],
        ["founded {v}", "established {v}"],
        [
            "In what year was {x} founded?",
            "When was {x} established? Give the year.",
            "What is the founding year of {x}?",
            "{x} was founded in which year?",
        ],
        ["Founded {v}"],
    ),
    "released": _a(
        ["was released {v}", "came out {v}"],
        ["released {v}"],
        ["In what year was {x} released?", "When did {x} come out? Give the year.", "{x} was released in which year?"],
    ),
    "held": _a(
        ["was held {v}", "took place {v}"],
        ["held {v}"],
        ["In what year was {x} held?", "When did {x} take place? Give the year.", "{x} was held in which year?"],
        ["Held {v}"],
    ),
    "introduced": _a(
        ["was introduced {v}", "came into use {v}"],
        ["introduced {v}"],
        [
            "In what year was {x} introduced?",
            "When did {x} come into use? Give the year.",
            "{x} was introduced in which year?",
            "Give the year of introduction of {x}.",
        ],
    ),
    "withdrawn": _a(
        ["was withdrawn {v}", "went out of use {v}"],
        ["withdrawn {v}"],
        [
            "In what year was {x} withdrawn?",
            "When did {x} go out of use? Give the year.",
            "{x} was withdrawn in which year?",
        ],
    ),
    "currency_since": _a(
        ["adopted its current currency {v}", "switched to its present currency {v}"],
        ["whose current currency was adopted {v}"],
        [
            "In what year did {x} adopt its current currency?",
            "Since which year has {x} used its current currency?",
            "{x} adopted its current currency in which year?",
        ],
    ),
    "debut": _a(
        ["made a major-league debut {v}", "debuted in the major leagues {v}", "first played in the majors {v}"],
        ["whose major-league debut came {v}"],
        [
            "In what year did {x} make a major-league debut?",
            "What year did {x} debut in the majors?",
            f"When did {{x}} first play in the major leagues? {_YEAR}",
            "{x} made a major-league debut in which year?",
            "Give the year of the major-league debut of {x}.",
        ],
    ),
    "final_game": _a(
        ["played a last major-league game {v}", "played a final big-league game {v}"],
        ["whose last major-league game came {v}"],
        [
            "In what year did {x} play a last major-league game?",
            "What year did {x} play a final game in the majors?",
            f"When did {{x}} last play in the major leagues? {_YEAR}",
            "{x} played a last major-league game in which year?",
            "Give the year of the last major-league game of {x}.",
        ],
    ),
    "inducted": _a(
        ["was inducted into the Baseball Hall of Fame {v}", "entered the Baseball Hall of Fame {v}"],
        ["inducted into the Baseball Hall of Fame {v}"],
        [
            "In what year was {x} inducted into the Baseball Hall of Fame?",
            "When did {x} enter the Baseball Hall of Fame? Give the year.",
            "{x} entered the Baseball Hall of Fame in which year?",
        ],
    ),
    "first_season": _a(
        ["played its first season {v}", "first took the field {v}"],
        ["whose first season came {v}"],
        [
            "In what year did {x} play its first season?",
            "When did {x} first take the field? Give the year.",
            "{x} played its first season in which year?",
        ],
    ),
    "last_season": _a(
        ["played its last season {v}", "took the field for the last time {v}"],
        ["whose last season came {v}"],
        [
            "In what year did {x} play its last season?",
            "What year was the last season of {x}?",
            "{x} played its last season in which year?",
        ],
    ),
    "first_game": _a(
        ["hosted its first major-league game {v}", "opened for major-league play {v}"],
        ["whose first major-league game came {v}"],
        [
            "In what year did {x} host its first major-league game?",
            "When did {x} open for major-league play? Give the year.",
            "{x} hosted its first major-league game in which year?",
        ],
    ),
    "last_game": _a(
        ["hosted its last major-league game {v}"],
        ["whose last major-league game came {v}"],
        [
            "In what year did {x} host its last major-league game?",
            "What year saw the last major-league game at {x}?",
            "{x} hosted its last major-league game in which year?",
        ],
    ),
    "discovered": _a(
        ["was discovered {v}", "was first identified {v}"],
        ["discovered {v}"],
        [
            "In what year was {x} discovered?",
            "When was {x} first identified? Give the year.",
            "{x} was discovered in which year?",
            "Give the year {x} was discovered.",
        ],
        ["Discovered {v}"],
    ),
    "population": _a(
        ["has a population of {q}", "is home to {qn} people", "has {qn} inhabitants"],
        ["with a population of {q}", "home to {qn} people", "of {qn} inhabitants"],
        [
            "What is the population of {x}?",
            "How many people live in {x}?",
            "How many inhabitants does {x} have?",
            "{x} has how many inhabitants?",
            "Give the population of {x}.",
        ],
        magnitude=True,
    ),
    "area_km2": _a(
        ["has an area of {q}", "covers {q}"],
        ["covering {q}", "with an area of {q}"],
        [
            "What is the area in square kilometres of {x}?",
            "How many square kilometres does {x} cover?",
            "{x} covers how many square kilometres?",
        ],
        word="square kilometres",
        symbol=" km²",
        magnitude=True,
    ),
    "forest_pct": _a(
        ["has a forest cover of {q}", "is {q} forested"],
        ["with a forest cover of {q}"],
        ["What share of {x} is forest, in percent?", "What percentage of {x} is covered by forest?"],
        word="%",
        symbol="%",
    ),
    "elevation_m": _a(
        ["lies at an elevation of {q}", "sits {q} above sea level"],
        ["at an elevation of {q}", "{q} above sea level", "lying {q} above sea level"],
        [
            "At what elevation in metres does {x} lie?",
            "How many metres above sea level is {x}?",
            "What is the elevation in metres of {x}?",
            "{x} lies how many metres above sea level?",
            "Give the elevation in metres of {x}.",
        ],
        word="metres",
        symbol=" m",
        magnitude=True,
    ),
    "employees": _a(
        ["has {qn} employees", "employs {q}"],
        ["with {qn} employees"],
        ["How many employees does {x} have?", "How many people does {x} employ?", "{x} has how many employees?"],
        magnitude=True,
    ),
    "pages": _a(
        ["is {qn} pages long", "runs to {qn} pages"],
        ["of {qn} pages", "running to {qn} pages"],
        ["How many pages long is {x}?", "How many pages does {x} have?", "{x} runs to how many pages?"],
        magnitude=True,
    ),
    "duration_min": _a(
        ["runs for {qn} minutes", "lasts {qn} minutes"],
        ["lasting {qn} minutes"],
        ["How many minutes does {x} run for?", "For how many minutes does {x} run?"],
    ),
    "height_cm": _a(
        ["is {q} tall", "stands {q} tall"],
        ["standing {q} tall"],
        [
            "How tall in centimetres is {x}?",
            "What is the height in centimetres of {x}?",
            "How many centimetres tall is {x}?",
            "{x} is how many centimetres tall?",
            "Give the height in centimetres of {x}.",
        ],
        word="metres",
        symbol=" cm",
        scale=0.01,
    ),
    "attendance": _a(
        ["drew an attendance of {q}", "drew {qn} visitors"],
        ["attended by {qn} people"],
        ["How many people attended {x}?", "What was the attendance at {x}?", "{x} drew how many visitors?"],
        magnitude=True,
    ),
    "coastline_km": _a(
        ["has a coastline of {q}", "has {qn} kilometres of coast"],
        ["with a coastline of {q}"],
        [
            "How long in km is the coastline of {x}?",
            "How many kilometres of coastline does {x} have?",
            "{x} has how many kilometres of coastline?",
        ],
        word="kilometres",
        symbol=" km",
        magnitude=True,
    ),
    "length_km": _a(
        ["is {q} long", "runs for {q}"],
        ["{q} long", "stretching for {q}"],
        [
            "How many kilometres long is {x}?",
            "What is the length in kilometres of {x}?",
            "{x} is how many kilometres long?",
        ],
        word="kilometres",
        symbol=" km",
        magnitude=True,
    ),
    "weight_kg": _a(
        ["has a listed weight of {q}", "weighs {q}"],
        ["weighing {q}", "listed at {q}"],
        [
            "What is the listed weight in kilograms of {x}?",
            "How many kilograms does {x} weigh?",
            "{x} weighs how many kilograms?",
            "Give the listed weight in kilograms of {x}.",
        ],
        word="kilograms",
        symbol=" kg",
    ),
    "atomic_number": _a(
        ["has the atomic number {q}", "has an atomic number of {q}"],
        ["with an atomic number of {q}"],
        ["What is the atomic number of {x}?", "Which atomic number does {x} have?", "Give the atomic number of {x}."],
    ),
    "atomic_weight": _a(
        ["has an atomic weight of {q}"],
        ["with an atomic weight of {q}"],
        ["What is the atomic weight of {x}?", "Give the atomic weight of {x}."],
    ),
}


_LEADS = {  # opening modifiers of attributes without one above
    "died": ("Having died {v}",),
    "population": ("Home to {qn} people", "With a population of {q}"),
    "elevation_m": ("At {q} above sea level",),
    "area_km2": ("Covering {q}",),
    "debut": ("Debuting in the major leagues {v}",),
    "first_season": ("First taking the field {v}",),
    "height_cm": ("Standing {q} tall",),
    "weight_kg": ("Weighing {q}",),
    "released": ("Released {v}",),
    "introduced": ("Introduced {v}",),
}
ATTRIBUTES_SAID.update({k: dataclasses.replace(ATTRIBUTES_SAID[k], lead=v) for k, v in _LEADS.items()})

# what is asked for, as a noun phrase: each gives `What is the birth year of {x}?`, `Tell me the birth year of …`
ANSWER_NOUNS: dict[str, str] = {
    "born": "birth year",
    "died": "year of death",
    "founded": "founding year",
    "released": "year of release",
    "held": "year",
    "introduced": "year of introduction",
    "withdrawn": "year of withdrawal",
    "currency_since": "year of adoption of the current currency",
    "debut": "major-league debut year",
    "final_game": "year of the last major-league game",
    "inducted": "year of Hall of Fame induction",
    "first_season": "year of the first season",
    "last_season": "year of the last season",
    "first_game": "year of the first major-league game",
    "last_game": "year of the last major-league game",
    "discovered": "year of discovery",
    "population": "population",
    "area_km2": "area in square kilometres",
    "forest_pct": "forest cover in percent",
    "elevation_m": "elevation in metres",
    "employees": "number of employees",
    "pages": "page count",
    "duration_min": "running time in minutes",
    "height_cm": "height in centimetres",
    "attendance": "attendance",
    "coastline_km": "coastline length in kilometres",
    "length_km": "length in kilometres",
    "weight_kg": "listed weight in kilograms",
    "atomic_number": "atomic number",
    "atomic_weight": "atomic weight",
}
_WRAPPERS = (
    "What is the {a} of {x}?",
    "Tell me the {a} of {x}.",
    "Do you know the {a} of {x}?",
    "Can you find the {a} of {x}?",
    "Look up the {a} of {x}.",
    "I need the {a} of {x}.",
    "Find the {a} of {x}.",
)


def asks(attr: str) -> tuple[str, ...]:
    """Every question for attribute `attr` of `{x}`: its own forms and the answer noun in general wrappers."""
    own = attribute_forms(attr).ask
    noun_ = ANSWER_NOUNS.get(attr)
    return own + tuple(w.format(a=noun_, x="{x}") for w in _WRAPPERS) if noun_ else own


def attribute_forms(attr: str) -> AttrForms:
    """The forms of attribute `attr`; the schema's verb and question when not listed."""
    found = ATTRIBUTES_SAID.get(attr)
    if found is not None:
        return found
    spec = ATTRIBUTES[attr]
    slot = "{v}" if spec.kind == "date" else "{q}"
    return AttrForms((spec.verb.format(slot),), ask=(spec.ask.format("{x}"),), symbol=spec.unit, word=spec.unit.strip())
