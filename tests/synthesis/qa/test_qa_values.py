"""Values said as a reader says them: round amounts in words, ranges, magnitudes, dates; what reads exact."""

import pytest

from jaxseeker.synthesis.qa.values import (
    amount,
    date_variants,
    reads_exact,
    say_date_range,
    say_number_range,
    say_quantity,
)
from jaxseeker.world import DateIn, NumberIn


@pytest.mark.parametrize(
    "value, said",
    [
        (400, "four hundred"),
        (1100, "eleven hundred"),
        (1000, "one thousand"),
        (3000, "three thousand"),
        (20_000, "twenty thousand"),
        (23_000, "23 thousand"),
        (1_500_000, "1.5 million"),
        (2_500_000_000, "2.5 billion"),
        (7600, "7.6 thousand"),
        (1234, "1,234"),
        (5, "5"),
    ],
)
def test_round_amounts_are_words_and_others_digits(value, said):
    assert amount(value) == said


@pytest.mark.parametrize(
    "p, word, symbol, scale, said",
    [
        (NumberIn("population", 20_000, 30_000, "between"), "", "", 1.0, "twenty to thirty thousand"),
        (NumberIn("population", 10_000, 100_000, "magnitude"), "", "", 1.0, "tens of thousands"),
        (NumberIn("elevation_m", 1000, 10_000, "magnitude"), "metres", " m", 1.0, "thousands of metres"),
        (NumberIn("elevation_m", 400, None, "above"), "metres", " m", 1.0, "more than four hundred metres"),
        (NumberIn("elevation_m", None, 1, "below"), "metres", " m", 1.0, "less than 1 metre"),
        (NumberIn("height_cm", 180, 190, "fine"), "metres", " cm", 0.01, "1.8 to 1.9 metres"),
        (NumberIn("height_cm", 185, 185, "exact"), "metres", " cm", 0.01, "185 cm"),
        (NumberIn("forest_pct", None, 1, "below"), "%", "%", 1.0, "less than 1%"),
        (NumberIn("population", 900, 1000, "between"), "", "", 1.0, "nine hundred to one thousand"),
    ],
)
def test_quantities(p, word, symbol, scale, said):
    assert say_quantity(p, word, symbol, scale=scale) == said


def test_a_magnitude_before_a_noun_ends_with_of():
    p = NumberIn("population", 10_000, 100_000, "magnitude")
    assert say_quantity(p, before_noun=True) + " people" == "tens of thousands of people"


def test_canonical_number_phrases_keep_the_schema_unit():
    assert say_number_range(NumberIn("population", 1234567, 1234567, "exact")) == "1,234,567"
    assert say_number_range(NumberIn("area_km2", 1e6, 2e6, "between"), " km²") == "one to two million km²"


@pytest.mark.parametrize(
    "p, said, variants",
    [
        (DateIn("born", "1962-03-03", "1962-03-03", "day"), "on 3 March 1962", 1),
        (DateIn("born", "1962-03-01", "1962-03-31", "month"), "in March 1962", 1),
        (DateIn("born", "1960-01-01", "1963-12-31", "early-decade"), "in the early 1960s", 2),
        (DateIn("born", "1964-01-01", "1966-12-31", "mid-decade"), "in the mid-1960s", 2),
        (DateIn("held", "0434-01-01", "0466-12-31", "mid-century"), "in the mid-5th century", 2),
        (DateIn("held", "1901-01-01", "2000-12-31", "century"), "in the 20th century", 3),
    ],
)
def test_dates_and_their_variants(p, said, variants):
    assert say_date_range(p) == said
    found = date_variants(p)
    assert found[0] == said and len(set(found)) == variants
    assert all(v.startswith(("in ", "on ", "during ", "sometime ", "early ", "late ", "around ")) for v in found)


def test_early_and_mid_variants_name_the_same_period():
    assert date_variants(DateIn("born", "1960-01-01", "1963-12-31", "early-decade"))[1] == "early in the 1960s"
    mid = DateIn("born", "1964-01-01", "1966-12-31", "mid-decade")
    assert date_variants(mid)[1] == "around the middle of the 1960s"


@pytest.mark.parametrize(
    "text, exact",
    [
        ("has a population of 327,167,434", True),
        ("born in 1962", True),
        ("2,222 inhabitants", True),
        ("lies 450 m up", True),
        ("born in the 1960s", False),
        ("in the 20th century", False),
        ("1.8 to 1.9 m", False),
        ("weighs 85 kg", False),
        ("twenty to thirty thousand", False),
        ("Route 66", False),
    ],
)
def test_what_reads_as_an_exact_figure(text, exact):
    assert reads_exact(text) is exact
