"""Text artefacts of a generated question, read from its words alone (see `artefacts` for the counts)."""

from __future__ import annotations

import collections
import re

TEXT_ARTEFACTS = ("repeated_name", "disambiguator", "imperative", "stacked_relative")

_IMPERATIVE = (
    "name",
    "identify",
    "find",
    "tell",
    "give",
    "count",
    "guess",
    "determine",
    "please",
    "consider",
    "picture",
    "imagine",
    "think",
    "take",
    "suppose",
    "list",
    "state",
)
_SENTENCES = re.compile(r"(?<=[.?!])\s+(?=[A-Z“\"])")
# two verb groups back to back: the inner relative clause's verb, then the outer's (`… was born was born`)
_STACKED = re.compile(
    r"\b(?:who|that|which|where|whose|whom)\b[^,.;?:]*?\b(?:was|were|is|are|died|lived|played|born)\b[^,.;?:]*?"
    r"\b(?:born|founded|built|located|died|played|lies|lived|opened|based)\s+(?:was|were|is|are|died|played|lived)\b"
)
_CAPITALISED = re.compile(r"(?:[A-Z][\w'’.-]*)(?:\s+(?:of|de|del|la|le|the|upon|on)?\s*[A-Z][\w'’.-]*)*")


def imperative(text: str) -> bool:
    """True when a sentence of `text` opens with a command (`Name …`, `Think of …`, `Please …`)."""
    for sentence in _SENTENCES.split(text.strip()):
        first = sentence.lstrip("“\"'(").split(" ", 1)[0].strip(",:").lower()
        if first in _IMPERATIVE:
            return True
    return False


def disambiguator(text: str) -> bool:
    """True when `text` holds a parenthesised qualifier (`Richmond (Kentucky, US)`, `Swank Airport (Clarksburg)`)."""
    return re.search(r"\w \([^)]+\)", text) is not None


def stacked_relative(text: str) -> bool:
    """True when a relative clause nests another whose verb closes just before its own (`where a player who died in
    X was born`)."""
    return _STACKED.search(text) is not None


def repeated_name(text: str, times: int = 3) -> bool:
    """True when a capitalised name (a run of capitalised words, not a sentence's first word alone) occurs `times`
    times or more."""
    counts: collections.Counter[str] = collections.Counter()
    for sentence in _SENTENCES.split(text):
        for m in _CAPITALISED.finditer(sentence):
            name = m.group(0).strip().rstrip(".’'-")
            if m.start() == 0 and " " not in name:
                continue  # `Which`, `The`: a sentence's first word
            counts[name] += 1
    return any(k >= times for k in counts.values())


def text_artefacts(text: str) -> list[str]:
    """The text artefacts of `text` (`TEXT_ARTEFACTS`, in that order)."""
    tests = (repeated_name, disambiguator, imperative, stacked_relative)
    return [name for name, test in zip(TEXT_ARTEFACTS, tests) if test(text)]
