"""Pronounceable made-up names, unique within one world, drawn from a seeded generator."""

from __future__ import annotations

import random

_ONSETS = (
    "b",
    "d",
    "f",
    "g",
    "h",
    "k",
    "l",
    "m",
    "n",
    "p",
    "r",
    "s",
    "t",
    "v",
    "z",
    "br",
    "dr",
    "kr",
    "st",
    "th",
    "sh",
    "ch",
    "gr",
    "tr",
    "pl",
)
_VOWELS = ("a", "e", "i", "o", "u", "a", "e", "o", "ai", "ei", "ou")
_CODAS = ("", "", "", "n", "r", "l", "s", "m", "nd", "rt")
_PLACE_ENDINGS = ("ia", "land", "stan", "ora", "ania", "esh")
_CITY_ENDINGS = ("", "", "burg", "ton", "port", "ara", "ville", "mouth")
_ADJECTIVES = (
    "Silent",
    "Golden",
    "Broken",
    "Hidden",
    "Distant",
    "Crimson",
    "Quiet",
    "Endless",
    "Winter",
    "Burning",
    "Pale",
    "Northern",
    "Hollow",
    "Bright",
    "Last",
    "Iron",
)
_NOUNS = (
    "Harbor",
    "Garden",
    "River",
    "Mirror",
    "Lantern",
    "Tower",
    "Voyage",
    "Orchard",
    "Crown",
    "Shore",
    "Bridge",
    "Letters",
    "Hours",
    "Mountain",
    "Echo",
    "Threshold",
)
ORG_WORDS = {
    "university": "University",
    "company": "Company",
    "publisher": "Press",
    "museum": "Museum",
    "club": "Club",
    "institute": "Institute",
    "party": "Party",
    "orchestra": "Orchestra",
}
EVENT_WORDS = {
    "festival": "Festival",
    "treaty": "Treaty",
    "summit": "Summit",
    "championship": "Championship",
    "exhibition": "Exhibition",
    "congress": "Congress",
}


class NameMaker:
    """Makes names from syllables; every name it returns is new in this maker."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.used: set[str] = set()

    def word(self, syllables: int) -> str:
        """One capitalised made-up word of `syllables` syllables."""
        parts = [self.rng.choice(_ONSETS) + self.rng.choice(_VOWELS) for _ in range(syllables)]
        parts[-1] += self.rng.choice(_CODAS)
        return "".join(parts).capitalize()

    def unique(self, make) -> str:
        """Call `make()` until it gives a name not used before; remember it."""
        for _ in range(1000):
            name = make()
            if name not in self.used:
                self.used.add(name)
                return name
        raise RuntimeError("name space exhausted: too many entities for the name generator")

    def person(self) -> str:
        """`Given Surname`."""
        return self.unique(lambda: f"{self.word(2)} {self.word(self.rng.randint(2, 3))}")

    def country(self) -> str:
        """A country name such as `Tolvania`."""
        return self.unique(lambda: self.word(self.rng.randint(1, 2)) + self.rng.choice(_PLACE_ENDINGS))

    def city(self) -> str:
        """A city name such as `Marazuport`."""
        return self.unique(lambda: self.word(self.rng.randint(2, 3)) + self.rng.choice(_CITY_ENDINGS))

    def organisation(self, kind: str) -> str:
        """`Varen University`, `Orden Press`, ..."""
        return self.unique(lambda: f"{self.word(self.rng.randint(2, 3))} {ORG_WORDS[kind]}")

    def work(self) -> str:
        """`Silent Harbor of Velm`-style titles."""
        return self.unique(
            lambda: f"{self.rng.choice(_ADJECTIVES)} {self.rng.choice(_NOUNS)} of {self.word(self.rng.randint(1, 2))}"
        )

    def event(self, kind: str) -> str:
        """`Kelvar Summit`, `Oruna Festival`, ..."""
        return self.unique(lambda: f"{self.word(self.rng.randint(2, 3))} {EVENT_WORDS[kind]}")
