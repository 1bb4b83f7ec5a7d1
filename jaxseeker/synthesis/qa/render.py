"""English for structured constraints: a `Query` becomes a question, and its answer a string.

`render_question` is the rule-based realiser: the same query always gives the same text (its choices are drawn
from a generator seeded by the query and `style`), different queries read differently. The grammar is in
`phrasing` (noun phrases, clauses, references that close cycles), the question frames in `frames`, the phrase
book in `lexicon`, values in `values`. `pred_phrase` is the canonical clue phrase of one predicate, in the
schema's words (what a page says), for the embedded expert's notes.
"""

from __future__ import annotations

import json
import random

from jaxseeker.synthesis.qa.frames import attribute_question, count_question, entity_question
from jaxseeker.synthesis.qa.phrasing import Phraser, Unsayable, capitalise, join, kind_key, noun, plural, pronoun
from jaxseeker.synthesis.qa.textcheck import text_artefacts
from jaxseeker.synthesis.qa.values import say_date_range, say_number_range
from jaxseeker.world import DateIn, LabelIs, NameInitial, NumberIn, Query, Var, World
from jaxseeker.world.entities import date_parts
from jaxseeker.world.phrases import indefinite
from jaxseeker.world.schema import ATTRIBUTES

__all__ = ["answer_text", "article", "join", "noun", "plural", "pred_phrase", "pronoun", "render_question", "sayable"]


def article(word: str) -> str:
    """`a painter` / `an organisation` / `a university`."""
    return indefinite(word)


def _name_part(var: Var, position: str) -> str:
    if var.type == "person":
        return "surname" if position == "last" else "given name"
    if var.type == "work":
        return "title" if position == "first" else "title whose last word"
    return "name" if position == "first" else "name whose last word"


def pred_phrase(var: Var, p) -> str | None:
    """The schema's verb phrase of one predicate (None for ones said elsewhere: anchors, the kind label)."""
    if isinstance(p, DateIn):
        return ATTRIBUTES[p.attr].verb.format(say_date_range(p))
    if isinstance(p, NumberIn):
        spec = ATTRIBUTES[p.attr]
        return spec.verb.format(say_number_range(p, spec.unit))
    if isinstance(p, NameInitial):
        part = _name_part(var, p.position)
        if part.endswith("last word"):
            return f"has a {part} starts with “{p.letter.upper()}”"
        return f"has a {part} starting with “{p.letter.upper()}”"
    if isinstance(p, LabelIs) and p.key != kind_key(var):
        return f"has {p.key.replace('_', ' ')} {p.value}"
    return None


NATURAL_TRIES = 12  # phrasings a natural question may draw before one without a text artefact


def _rng(q: Query, style: int | str) -> random.Random:
    return random.Random(f"{json.dumps(q.to_json(), sort_keys=True)}/{style}")


def render_question(
    world: World, q: Query, style: int | str = 0, *, natural: bool = False, declarative: bool = False
) -> str:
    """The question for `q`: one phrasing among many (`style` draws another), every constraint said once, no
    placeholder letters. A cycle whose reference would be ambiguous is said as `that same …` (see `sayable`).
    `natural`: names as a sentence says them, questions rather than commands, the answer's noun in the closing
    question, and the first of `NATURAL_TRIES` phrasings with no text artefact (`textcheck`), else the last.
    `declarative` (natural too): an entity question as SailorFog's, a description in sentences ending in the
    question (`frames.declaration`)."""
    if not (natural or declarative):
        return _render(world, q, style, natural=False)
    text = ""
    for k in range(NATURAL_TRIES):
        text = capitalise(_render(world, q, f"{style}/{k}" if k else style, natural=True, declarative=declarative))
        if not text_artefacts(text):
            break
    return text


def _render(world: World, q: Query, style: int | str, *, natural: bool, declarative: bool = False) -> str:
    for lenient in (False, True):
        rng = _rng(q, style)
        try:
            if q.count:
                return count_question(world, q, rng, lenient=lenient, natural=natural)
            if q.answer_attr is not None:
                return attribute_question(world, q, rng, lenient=lenient, natural=natural)
            return entity_question(world, q, rng, lenient=lenient, natural=natural, declarative=declarative)
        except Unsayable:
            continue
    raise AssertionError("a lenient phrasing never raises Unsayable")


def sayable(world: World, q: Query) -> bool:
    """True when every edge that closes a cycle can point back at a variable by a noun no other variable has."""
    ph = Phraser(world, q, random.Random(0))
    try:
        for back in ph.back.values():
            for _, other in back:
                ph.ref(other)
    except Unsayable:
        return False
    return True


def answer_text(world: World, q: Query, truth: str) -> str:
    """The answer string: the entity's name, its attribute (a year for dates), or the count."""
    if q.count:
        return str(len(world.match(q)))
    e = world.entity(truth)
    if q.answer_attr is None:
        return e.name
    if q.answer_attr in e.dates:
        return str(date_parts(e.dates[q.answer_attr])[0])
    value = e.numbers[q.answer_attr]
    return str(int(value)) if float(value).is_integer() else str(value)
