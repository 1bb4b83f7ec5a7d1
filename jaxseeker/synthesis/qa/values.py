"""English for value ranges: a `DateIn` or `NumberIn` said as a reader would say it.

Round amounts are said in words (`four hundred`, `20 thousand`, `1.5 million`), so a blurred value never reads
as an exact figure; only an exact predicate shows all its digits (`1,234,567`).
"""

from __future__ import annotations

import math
import re

from jaxseeker.world import DateIn, NumberIn
from jaxseeker.world.entities import date_parts
from jaxseeker.world.phrases import MONTHS, say_date, say_number

_WORDS = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen twenty"
).split()
_TENS = {30: "thirty", 40: "forty", 50: "fifty", 60: "sixty", 70: "seventy", 80: "eighty", 90: "ninety"}
_SCALES = ((1e9, "billion"), (1e6, "million"), (1e3, "thousand"))
# a numeral of 3+ digits (thousands separated or not, decimals allowed) not glued to letters (`1960s`, `20th`)
EXACT_NUMBER = re.compile(r"(?<![\w.,])(?:\d{1,3}(?:,\d{3})+|\d{3,})(?:\.\d+)?(?![\w])")
# [10^k, 10^(k+1)] said as an order of magnitude
MAGNITUDES = {
    2: "hundreds",
    3: "thousands",
    4: "tens of thousands",
    5: "hundreds of thousands",
    6: "millions",
    7: "tens of millions",
    8: "hundreds of millions",
    9: "billions",
}


def ordinal(n: int) -> str:
    """1st, 2nd, 3rd, 4th, 11th, 21st ..."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def small(x: float) -> str:
    """`four`, `twenty`, `forty`, `23`, `1.5`: whole numbers to twenty and round tens in words, the rest in digits."""
    if float(x).is_integer():
        n = int(x)
        if 0 <= n <= 20:
            return _WORDS[n]
        if n in _TENS:
            return _TENS[n]
        return f"{n:,}"
    return f"{x:g}"


def amount(value: float) -> str:
    """A round amount in words: `four hundred`, `twelve hundred`, `20 thousand`, `1.5 million`; else its digits."""
    if 100 <= value < 2000 and value % 100 == 0 and value != 1000:
        return f"{small(value / 100)} hundred"  # `four hundred`, `fifteen hundred`; never `76 hundred`
    for scale, word in _SCALES:
        k = value / scale
        if value >= scale and (k * 10).is_integer() and k < 1000:
            return f"{small(k)} {word}"
    return say_number(value)


def _shared_scale(lo: float, hi: float) -> str:
    """`20 to 30 thousand` when both ends are round in one scale word, else `nine hundred to one thousand`."""
    a, b = amount(lo), amount(hi)
    wa, wb = a.rsplit(" ", 1), b.rsplit(" ", 1)
    if len(wa) == len(wb) == 2 and wa[1] == wb[1] and wa[1] in ("hundred", "thousand", "million", "billion"):
        return f"{wa[0]} to {wb[0]} {wa[1]}"
    return f"{a} to {b}"


def magnitude_of(p: NumberIn) -> str:
    """`tens of thousands` for a magnitude predicate [10^4, 10^5]."""
    return MAGNITUDES[round(math.log10(p.lo))]


def say_quantity(
    p: NumberIn, word: str = "", symbol: str = "", *, scale: float = 1.0, before_noun: bool = False
) -> str:
    """The amount of a number predicate: `more than four hundred metres`, `tens of thousands of kilometres`,
    `20 to 30 thousand`, `1,234 m`. A range is said in `word`s (`metres`) after its value times `scale`
    (centimetres said in metres: 0.01); an exact value in its stored unit, `symbol` after it (` m`, `%`).
    `before_noun` ends a bare magnitude with `of` (`tens of thousands of` people)."""
    if p.grain == "exact":
        return say_number(p.lo, symbol)
    lo = None if p.lo is None else p.lo * scale
    hi = None if p.hi is None else p.hi * scale
    tail = "%" if word == "%" else f" {word}" if word else ""
    if tail.endswith("s") and 1 in (lo, hi) and p.grain in ("above", "below"):
        tail = tail[:-1]  # `less than 1 metre`
    if p.grain == "magnitude":
        text = magnitude_of(p)
        if word and word != "%":
            return f"{text} of {word}"
        return f"{text} of" if before_noun else text
    if p.grain == "above":
        return f"more than {amount(lo)}{tail}"
    if p.grain == "below":
        return f"less than {amount(hi)}{tail}"
    return f"{_shared_scale(lo, hi)}{tail}"


def say_number_range(p: NumberIn, unit: str = "") -> str:
    """`1,234 m`, `one to two million`, `more than five hundred`, `less than 1%`: the amount with the
    schema's unit symbol (the canonical clue phrase of `pred_phrase`)."""
    return say_quantity(p, unit.strip(), unit)


def say_date_range(p: DateIn) -> str:
    """`on 3 March 1962`, `in March 1962`, `in the early 1960s`, `in the mid-5th century` ..."""
    y, m, _ = date_parts(p.lo)
    hy = date_parts(p.hi)[0]
    g = p.grain
    if g == "day":
        return "on " + say_date(p.lo)
    if g == "month":
        return f"in {MONTHS[m - 1]} {y}"
    if g == "year":
        return f"in {y}"
    if g.endswith("-decade"):
        part = g.split("-")[0]
        return f"in the {part}{'-' if part == 'mid' else ' '}{hy // 10 * 10}s"
    if g == "decade":
        return f"in the {hy // 10 * 10}s"
    if g.endswith("-century"):
        part = g.split("-")[0]
        return f"in the {part}{'-' if part == 'mid' else ' '}{ordinal((hy - 1) // 100 + 1)} century"
    if g == "century":
        return f"in the {ordinal((hy - 1) // 100 + 1)} century"
    return f"between {y} and {hy}"


def date_variants(p: DateIn) -> list[str]:
    """Ways to say when (each with its preposition): `in the 1960s`, `during the 1960s`, `early in the 1960s` ..."""
    base = say_date_range(p)
    g = p.grain
    if g in ("decade", "century"):
        return [base, base.replace("in the", "during the", 1), base.replace("in the", "sometime in the", 1)]
    if g.endswith("-decade") or g.endswith("-century"):
        part = g.split("-")[0]
        period = base.split(f"{part}-" if part == "mid" else f"{part} ", 1)[1]
        if part == "mid":
            return [base, f"around the middle of the {period}"]
        return [base, f"{part} in the {period}"]
    return [base]


def reads_exact(text: str) -> bool:
    """True when `text` states a figure of three or more digits (`327,167,434`, `1962`; not `1960s`)."""
    return EXACT_NUMBER.search(text) is not None
