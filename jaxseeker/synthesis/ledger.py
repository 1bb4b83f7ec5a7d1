"""The reasoning expert's ledger: every clue of a question as a sentence, and which of them the pages have shown.

A clue is one predicate of a variable (`the city has a population of tens of thousands`) or one edge of the
structured query (`the baseball player was born in the city`), said with the names the question gives and `the`
plus the noun for the entities it hides. The expert ticks a clue off when an observation has shown it, and each
of its thoughts names the clue it tests next and the ones still unchecked (`NEXT`, `UNCHECKED`: the words
`synth report` counts).
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Mapping

from jaxseeker.synthesis.plan import Clue, Hop, Plan, clue_phrase
from jaxseeker.synthesis.qa.render import noun
from jaxseeker.world import Is, LabelIs
from jaxseeker.world.schema import RELATIONS

NEXT = ("Next clue:", "Testing now:")  # a thought that names the clue its call tests
UNCHECKED = ("Still unchecked:", "Left to check:", "Nothing is left unchecked.")  # … and what remains


@dataclasses.dataclass(frozen=True)
class Entry:
    """One clue: its key (`("edge", k)` or `("pred", var, j)`) and its sentence."""

    key: tuple
    text: str


def labels(plan: Plan, names: Mapping[int, str]) -> list[str]:
    """How each variable is said: its name when the question gives it, else `the city` (`the other city`,
    `the third city` … when several hidden variables share a noun)."""
    seen: collections.Counter = collections.Counter()
    out = []
    for i, v in enumerate(plan.query.vars):
        if i in names:
            out.append(names[i])
            continue
        word = noun(v)
        seen[word] += 1
        nth = ("", "other ", "third ", "fourth ", "fifth ")[min(seen[word], 5) - 1]
        out.append(f"the {nth}{word}")
    return out


def entries(plan: Plan, names: Mapping[int, str]) -> list[Entry]:
    """Every clue of the question as a sentence: the route's edges first (in route order), then the rest."""
    said = labels(plan, names)
    q = plan.query
    found = []
    for k, e in enumerate(q.edges):
        found.append(Entry(("edge", k), f"{said[e.src]} {RELATIONS[e.rel].forward.format(said[e.dst])}"))
    for i, v in enumerate(q.vars):
        for j, p in enumerate(v.preds):
            if isinstance(p, Is | LabelIs) or (phrase := clue_phrase(v, p)) is None:
                continue  # a name, or the kind its noun already says
            found.append(Entry(("pred", i, j), f"{said[i]} {phrase}"))
    route = [edge_key(plan, hop) for hop in plan.hops]
    return sorted(found, key=lambda e: route.index(e.key) if e.key in route else len(route))


def edge_key(plan: Plan, hop: Hop) -> tuple:
    """The ledger key of the edge a hop follows."""
    for k, e in enumerate(plan.query.edges):
        ends = (hop.src, hop.dst) if hop.forward else (hop.dst, hop.src)
        if e.rel == hop.rel and (e.src, e.dst) == ends:
            return ("edge", k)
    raise ValueError(f"no edge {hop.rel} between variables {hop.src} and {hop.dst}")


def clue_key(plan: Plan, var: int, clue: Clue, names: Mapping[int, str]) -> tuple | None:
    """The ledger key of a clue about variable `var` (None for one the ledger leaves out: the kind)."""
    if clue.pred is not None:
        j = next((j for j, p in enumerate(plan.query.vars[var].preds) if p is clue.pred), None)
        return None if j is None or isinstance(clue.pred, LabelIs) else ("pred", var, j)
    for k, e in enumerate(plan.query.edges):
        other = e.dst if clue.forward else e.src
        mine = e.src if clue.forward else e.dst
        if e.rel == clue.rel and mine == var and names.get(other) == clue.other:
            return ("edge", k)
    return None


class Ledger:
    """The clues of one question and which are checked."""

    def __init__(self, plan: Plan, names: Mapping[int, str]):
        self.plan, self.all = plan, entries(plan, names)
        self.done: set[tuple] = set()

    def tick(self, key: tuple | None) -> None:
        """Mark a clue as shown by an observation."""
        if key is not None:
            self.done.add(key)

    def open(self) -> list[str]:
        """The sentences of the clues not yet shown, route first."""
        return [e.text for e in self.all if e.key not in self.done]

    def is_named(self) -> bool:
        """Whether the question names any entity."""
        return any(isinstance(p, Is) for v in self.plan.query.vars for p in v.preds)
