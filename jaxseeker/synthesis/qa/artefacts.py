"""What makes a question read as generated, or hard for the wrong reason: one test per artefact, and the counts.

Per question (`question_artefacts`):
- `first_letter`: an entity hidden behind the first letter of its name (a `NameInitial` in `meta.query`);
- `droppable`: a clue implied by the others: a value, a label, or an edge with all it alone joins to the answer,
  whose removal leaves the answer unique in the world (needs the world);
- `one_search`: one BM25 search of the question's own words lists the answer's page in its top `k` (needs the
  world);
- `repeated_name`: one name said twice or more;
- `disambiguator`: a parenthesised qualifier in the text (`Richmond (Kentucky, US)`);
- `imperative`: a sentence that opens with a command (`Name the city …`, `Think of a player …`);
- `stacked_relative`: a relative clause inside a relative clause whose verbs then close one after the other (`the
  city where a player who died in Waco was born`): two verb groups with no word between their clauses.
- `scene_noun`: the closing question asks for another noun than the answer's (`Think of a city … Which airport is
  it?`), or `Who …?` of what is no person (needs the structured query);
- `country_the`: a country that takes `the` said without it (`in United States`; needs the world).
Per set (`ArtefactCounts`): each artefact's count, the non-answer entities of the queries that are named, hidden
behind a first letter or described (neither), the answers' kinds (entity, number, date, count), and the questions
that name nothing with, given the world, the fewest candidates one variable's own clues leave (`fewest_candidates`:
how many entities a searcher starting there must check, as no search of a range's words lists them).
`check_limits` compares the shares with limits (`DEFAULT_LIMITS`, or a YAML file's) and names each one passed.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
from collections.abc import Mapping, Sequence

from jaxseeker.synthesis.qa.checks import answer_part, found_by_one_search
from jaxseeker.synthesis.qa.naming import bare_name, takes_the
from jaxseeker.synthesis.qa.phrasing import noun
from jaxseeker.synthesis.qa.record import Draft, QARecord
from jaxseeker.synthesis.qa.textcheck import TEXT_ARTEFACTS, country_without_the, scene_noun, text_artefacts
from jaxseeker.world import DateIn, LabelIs, NameInitial, NumberIn, Query, Var, World
from jaxseeker.world.schema import TYPES

ARTEFACTS = ("first_letter", "droppable", "one_search", *TEXT_ARTEFACTS, "scene_noun", "country_the")


@functools.lru_cache(maxsize=8)
def countries_with_the(world: World) -> tuple[str, ...]:
    """The world's country names said with `the` (`United States`), without it."""
    names = (bare_name(world.entity(i).name) for i in world.ids_of_type("country"))
    return tuple(sorted({n for n in names if takes_the(n)}))


def _clue(var: Var, p: object) -> bool:
    """True for a predicate that is a clue of its own (a value, an initial, a label other than the kind noun)."""
    if isinstance(p, (DateIn, NumberIn, NameInitial)):
        return True
    spec = TYPES.get(var.type or "")
    return isinstance(p, LabelIs) and (spec is None or p.key != spec.kind_label)


def _bare_leaf(q: Query, i: int) -> bool:
    v = q.vars[i]
    return i != q.target and v.anchor() is None and q.degree(i) <= 1 and not any(_clue(v, p) for p in v.preds)


def droppable_clues(world: World, q: Query, binding: Sequence[str]) -> list[str]:
    """The clues of `q` (true under `binding`) whose removal leaves the answer unique: each predicate (unless it leaves
    a leaf with nothing said of it, which the edge's removal covers), and each edge with the variables it alone
    joins to the answer (a cycle's edge alone). Each is named `var i: Pred(...)` or `edge src-rel-dst`."""
    if q.count:
        return []
    truth = binding[q.target]
    d = Draft(q, tuple(binding), "")
    found = []
    for i, v in enumerate(q.vars):
        for p in v.preds:
            if not _clue(v, p):
                continue
            new = q.with_var(i, Var(v.type, tuple(x for x in v.preds if x != p)))
            if not _bare_leaf(new, i) and world.match(new, limit=2) == [truth]:
                found.append(f"var {i}: {p}")
    for k, e in enumerate(q.edges):
        new = answer_part(d, q.vars, q.edges[:k] + q.edges[k + 1 :]).query
        if any(_bare_leaf(new, j) for j in range(len(new.vars))):
            continue
        if world.match(new, limit=2) == [truth]:
            found.append(f"edge {e.src}-{e.rel}-{e.dst}")
    return found


def entity_ways(q: Query) -> list[str]:
    """How each non-answer variable is said: `named`, `first_letter` or `described`."""
    ways = []
    for i, v in enumerate(q.vars):
        if i == q.target:
            continue
        if v.anchor() is not None:
            ways.append("named")
        elif any(isinstance(p, NameInitial) for p in v.preds):
            ways.append("first_letter")
        else:
            ways.append("described")
    return ways


def fewest_candidates(world: World, q: Query) -> int:
    """The fewest entities of one variable's type that its own values and initials leave in `world` (a variable with
    none of those: every entity of its type), over the variables of `q`."""
    fewest = None
    for v in q.vars:
        ids: set[str] | None = None
        for p in v.preds:
            found = world.candidates(v.type, p)
            if found is not None:
                ids = set(found) if ids is None else ids & set(found)
        n = len(ids) if ids is not None else len(world.ids_of_type(v.type))
        fewest = n if fewest is None else min(fewest, n)
    return fewest or 0


def answer_kind(world: World | None, q: Query, record: QARecord) -> str:
    """`entity`, `count`, `date` or `number`: what the question asks for."""
    if q.count:
        return "count"
    if q.answer_attr is None:
        return "entity"
    if world is not None:
        return "date" if q.answer_attr in world.entity(record.meta["answer_id"]).dates else "number"
    return "number"


def question_artefacts(record: QARecord, world: World | None = None, *, solve: bool = True) -> set[str]:
    """The artefacts of one question (the module docstring): the text ones always; with its structured query
    `first_letter`; with a world `droppable` and, when `solve`, `one_search`."""
    text = record.question
    found = set(text_artefacts(text))
    if world is not None and country_without_the(text, countries_with_the(world)):
        found.add("country_the")
    if "query" not in record.meta:
        return found
    q = Query.from_json(record.meta["query"])
    if any(isinstance(p, NameInitial) for v in q.vars for p in v.preds):
        found.add("first_letter")
    answer = q.vars[q.target]
    if not q.count and q.answer_attr is None and scene_noun(text, noun(answer), answer.type == "person"):
        found.add("scene_noun")
    if world is not None and "entities" in record.meta:
        if droppable_clues(world, q, record.meta["entities"]):
            found.add("droppable")
        if solve and not q.count and found_by_one_search(world, text, record.meta["answer_id"]):
            found.add("one_search")
    return found


@dataclasses.dataclass(frozen=True)
class ArtefactCounts:
    """Questions with each artefact, entities by how they are said, answers by kind (see the module docstring)."""

    n: int
    artefacts: dict[str, int]
    entities: dict[str, int]
    answers: dict[str, int]
    names_nothing: int = 0  # questions whose query names no entity
    fewest: tuple[int, ...] = ()  # with a world: `fewest_candidates` of each question that names nothing

    def share(self, key: str) -> float:
        """The share of questions with artefact `key`, of answers that are entities (`entity_answers`), or of
        non-answer entities said so (`described`, `named`)."""
        if key in ARTEFACTS:
            return self.artefacts.get(key, 0) / max(1, self.n)
        if key == "entity_answers":
            return self.answers.get("entity", 0) / max(1, self.n)
        return self.entities.get(key, 0) / max(1, sum(self.entities.values()))


def count_artefacts(records: Sequence[QARecord], world: World | None = None, *, solve: bool = True) -> ArtefactCounts:
    """The artefact counts of `records` (with `world`, the ones that need it)."""
    artefacts: collections.Counter[str] = collections.Counter()
    entities: collections.Counter[str] = collections.Counter()
    answers: collections.Counter[str] = collections.Counter()
    nameless, fewest = 0, []
    for r in records:
        artefacts.update(question_artefacts(r, world, solve=solve))
        if "query" in r.meta:
            q = Query.from_json(r.meta["query"])
            entities.update(entity_ways(q))
            answers[answer_kind(world, q, r)] += 1
            if all(v.anchor() is None for v in q.vars):
                nameless += 1
                fewest += [fewest_candidates(world, q)] if world is not None else []
    return ArtefactCounts(
        len(records),
        {a: artefacts.get(a, 0) for a in ARTEFACTS},
        {w: entities.get(w, 0) for w in ("described", "named", "first_letter")},
        dict(sorted(answers.items())),
        nameless,
        tuple(sorted(fewest)),
    )


def artefact_summary(c: ArtefactCounts) -> str:
    """Lines of the counts, as `jaxseeker synth stats` prints them."""
    per = ", ".join(f"{a} {k}" for a, k in c.artefacts.items())
    total = sum(c.entities.values())
    ways = ", ".join(f"{w} {k} ({k / max(1, total):.0%})" for w, k in c.entities.items())
    kinds = ", ".join(f"{w} {k}" for w, k in c.answers.items()) or "-"
    nameless = f"  naming nothing: {c.names_nothing} of {c.n}"
    if c.fewest:
        small = [sum(n <= k for n in c.fewest) for k in (10, 50)]
        nameless += (
            f"; the fewest candidates a variable's own clues leave: at most 10 in {small[0]}, at most 50 in "
            f"{small[1]} (median {c.fewest[len(c.fewest) // 2]})"
        )
    return "\n".join(
        [
            f"  artefacts (questions of {c.n}): {per}",
            f"  non-answer entities: {ways}",
            f"  answers: {kinds}",
            nameless,
        ]
    )


# max share of questions per artefact, or min share (`min_` keys); a YAML file of the same keys overrides these
DEFAULT_LIMITS: dict[str, float] = {
    "first_letter": 0.10,
    "droppable": 0.10,
    "one_search": 0.0,
    "repeated_name": 0.025,
    "disambiguator": 0.025,
    "imperative": 0.10,
    "stacked_relative": 0.025,
    "scene_noun": 0.025,
    "country_the": 0.025,
}
LIMIT_KEYS = (*ARTEFACTS, "min_described", "min_entity_answers")


def check_limits(c: ArtefactCounts, limits: Mapping[str, float]) -> list[str]:
    """One line per limit passed (`imperative: 30% > 10%`); an unknown key lists the known ones."""
    failed = []
    for key, limit in limits.items():
        if key not in LIMIT_KEYS:
            raise ValueError(f"unknown limit {key!r}; known: {', '.join(LIMIT_KEYS)}")
        if key.startswith("min_"):
            what = key[4:]
            value = c.share(what)
            if value < limit:
                failed.append(f"{what}: {value:.0%} < {limit:.0%}")
        elif (value := c.share(key)) > limit:
            failed.append(f"{key}: {value:.1%} > {limit:.1%}")
    return failed
