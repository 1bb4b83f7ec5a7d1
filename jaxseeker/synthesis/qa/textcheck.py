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


def repeated_name(text: str, times: int = 2) -> bool:
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


_ASKED = (
    re.compile(r"^(?:which|what) ([\w-]+) (?:is|was) (?:it|meant)\?$"),
    re.compile(r"\b(?:this|that|the same) ([\w-]+)(?: called)?\?$"),
)


_SCENE = re.compile(
    r"^(?:think of|consider|imagine|picture|take|there is|here is|we know of|somewhere there is|there exists"
    r"|suppose there is|my question is about|i am looking for) (?:a|an|the|one|some|a certain) "
)


def scene_noun(text: str, answer_noun: str, person: bool) -> bool:
    """True when a scene sets up another noun than the answer's (`Think of a city … Which airport is it?`), the
    closing question asks for another noun, or asks `Who …?` of what is no person; a sentence it cannot read is no
    artefact."""
    sentences = _SENTENCES.split(text.strip())
    first, last = sentences[0].strip().lower(), sentences[-1].strip().lower()
    scene = _SCENE.match(first)
    if len(sentences) > 1 and scene and not first[scene.end() :].startswith(answer_noun.split()[-1].lower()):
        if not first[scene.end() :].startswith(answer_noun.lower()):
            return True
    if last.startswith("who is it") or last.startswith("who is this") or last.startswith("who is that"):
        if not person:
            return True
    for pattern in _ASKED:
        found = pattern.search(last)
        if found:
            return found.group(1) != answer_noun.split()[-1].lower()
    return False


def country_without_the(text: str, names: tuple[str, ...]) -> bool:
    """True when one of the country `names` that take `the` (`United States`) stands in `text` without it."""
    return any(re.search(rf"(?<!\bthe )(?<!\bThe )\b{re.escape(n)}\b", text) for n in names)


def text_artefacts(text: str) -> list[str]:
    """The text artefacts of `text` (`TEXT_ARTEFACTS`, in that order)."""
    tests = (repeated_name, disambiguator, imperative, stacked_relative)
    return [name for name, test in zip(TEXT_ARTEFACTS, tests) if test(text)]
