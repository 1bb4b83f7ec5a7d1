"""English for exact values: dates, numbers, and a fact about an entity."""

from __future__ import annotations

from jaxseeker.world.entities import date_parts

MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)


def say_date(iso: str) -> str:
    """`3 March 1962` for `1962-03-03`."""
    y, m, d = date_parts(iso)
    return f"{d} {MONTHS[m - 1]} {y}"


def say_number(value: float, unit: str = "") -> str:
    """`1,234,567` / `12.5%` / `830 m`: thousands separated, at most one decimal, then the unit."""
    text = f"{int(value):,}" if float(value).is_integer() else f"{value:,.1f}"
    return text + unit


def say_count_noun(n: int, singular: str, plural: str) -> str:
    """`1 city` / `3 cities`."""
    return f"{n} {singular if n == 1 else plural}"


def indefinite(noun: str) -> str:
    """`a painter`, `an organisation`, `a university`: by the first letter, `uni`/`eu`/`one`/`use` excepted."""
    lower = noun.lower()
    vowel = lower[:1] in "aeiou" and not lower.startswith(("uni", "eu", "one", "use"))
    return ("an " if vowel else "a ") + noun
