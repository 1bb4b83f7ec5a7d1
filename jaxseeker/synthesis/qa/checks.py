"""The checks every recipe shares: uniqueness, answer leak, de-duplication, hops and level, then the record."""

from __future__ import annotations

import collections
import dataclasses
import string
from collections.abc import Callable, Sequence

from jaxseeker.synthesis.qa.obfuscate import date_precision
from jaxseeker.synthesis.qa.record import Draft, QARecord
from jaxseeker.synthesis.qa.render import answer_text, render_question, sayable
from jaxseeker.world import DateIn, Edge, Entity, Is, NameInitial, NumberIn, Query, Var, World

SEARCH_K = 5  # results of the one search (the search tool's default top_k)
_PUNCT = str.maketrans({c: " " for c in string.punctuation + "“”‘’"})


def normalize(text: str) -> str:
    """Lower case, punctuation and articles removed, spaces collapsed (for answer matching and de-dup)."""
    words = text.lower().replace(",", "").translate(_PUNCT).split()
    return " ".join(w for w in words if w not in ("a", "an", "the"))


def same_answer(predicted: str, gold: str) -> bool:
    """Exact match after `normalize`."""
    return bool(normalize(predicted)) and normalize(predicted) == normalize(gold)


def simplify(d: Draft) -> Draft:
    """Drop what a named entity makes redundant: its other predicates, and variables reached only through it."""
    q = d.query
    vars_ = tuple(
        Var(v.type, (Is(a),)) if (a := v.anchor()) is not None and i != q.target else v for i, v in enumerate(q.vars)
    )
    return answer_part(d, vars_, q.edges, through=lambda i: i == q.target or vars_[i].anchor() is None)


def answer_part(
    d: Draft, vars_: Sequence[Var], edges: Sequence[Edge], through: Callable[[int], bool] = lambda i: True
) -> Draft:
    """The draft with `vars_` and `edges`, cut to the variables `edges` join to the answer (walking on from a
    variable only where `through` says so), renumbered in order."""
    q = d.query
    reached, frontier = {q.target}, [q.target]
    while frontier:
        i = frontier.pop()
        if not through(i):
            continue
        for e in edges:
            for a, b in ((e.src, e.dst), (e.dst, e.src)):
                if a == i and b not in reached:
                    reached.add(b)
                    frontier.append(b)
    keep = sorted(reached)
    new = {old: k for k, old in enumerate(keep)}
    query = dataclasses.replace(
        q,
        vars=tuple(vars_[i] for i in keep),
        edges=tuple(Edge(new[e.src], e.rel, new[e.dst]) for e in edges if e.src in new and e.dst in new),
        target=new[q.target],
    )
    return dataclasses.replace(d, query=query, binding=tuple(d.binding[i] for i in keep))


def found_by_one_search(world: World, text: str, entity_id: str, k: int = SEARCH_K) -> bool:
    """True when one BM25 search of `text` (the world's corpus, as the local search tool) lists the entity's page
    among its top `k`."""
    url = world.url(entity_id)
    return any(h.url == url for h in world.corpus.search(text, k=k))


def obfuscations_of(q: Query, history: Sequence[str]) -> list[str]:
    """The obfuscations present in `q`: hidden names, described entities and places, blurred dates and
    numbers (read from the constraints), plus the clues removed (from the edit `history`)."""
    found = []
    for i, v in enumerate(q.vars):
        if v.anchor() is not None:
            continue
        if i != q.target or q.answer_attr is not None:
            hinted = any(isinstance(p, NameInitial) for p in v.preds)
            found.append("name" if hinted else "place" if v.type in ("city", "country") else "describe")
        for p in v.preds:
            if isinstance(p, DateIn) and p.grain != date_precision(p.attr):
                found.append("date")
            elif isinstance(p, NumberIn) and p.grain != "exact":
                found.append("number")
    return found + [h for h in history if h == "remove"]


def shape(q: Query) -> str:
    """single, chain, star, tree or cycle: the form of the constraint graph."""
    if not q.edges:
        return "single"
    if q.has_cycle():
        return "cycle"
    degrees = [q.degree(i) for i in range(len(q.vars))]
    if max(degrees) <= 2:
        return "chain"
    return "star" if len(q.vars) >= 4 and max(degrees) == len(q.vars) - 1 else "tree"


def hops(q: Query) -> int:
    """The farthest variable from the answer (edges, undirected), plus one when the answer is an attribute."""
    dist = {q.target: 0}
    frontier = [q.target]
    while frontier:
        nxt = []
        for i in frontier:
            for e in q.edges:
                for a, b in ((e.src, e.dst), (e.dst, e.src)):
                    if a == i and b not in dist:
                        dist[b] = dist[i] + 1
                        nxt.append(b)
        frontier = nxt
    return max(dist.values()) + (q.answer_attr is not None)


def is_coupled(q: Query) -> bool:
    """True unless the constraints form one chain ending at the answer (a cycle, a branch, an answer in the middle)."""
    if q.has_cycle():
        return True
    return q.degree(q.target) >= 2 or any(q.degree(i) >= 3 for i in range(len(q.vars)))


def level_of(q: Query, obfuscations: Sequence[str]) -> int:
    """1: one hop; 2: a clear multi-hop chain; 3: coupled constraints with at least one obfuscation."""
    if obfuscations and is_coupled(q):
        return 3
    return 1 if hops(q) <= 1 else 2


class LeakCheck:
    """Does a question give its answer away? The whole answer, or a distinctive word of it (rare among names)."""

    def __init__(self, world: World, rare: int = 3):
        counts: collections.Counter[str] = collections.Counter()
        for e in world.entities.values():
            counts.update({w for w in normalize(e.name).split()})
        self.counts, self.rare = counts, rare

    def __call__(self, answer: str, question: str) -> bool:
        """True when `question` leaks `answer`."""
        q = f" {normalize(question)} "
        a = normalize(answer)
        if not a:
            return False
        if f" {a} " in q:
            return True
        return any(f" {w} " in q for w in a.split() if len(w) >= 4 and self.counts[w] <= self.rare)


class Dedup:
    """Remembers questions (normalised text) and question signatures (answer + evidence edges)."""

    def __init__(self):
        self.texts: set[str] = set()
        self.signatures: set[tuple] = set()

    def add(self, question: str, signature: tuple) -> bool:
        """True (and remembered) when neither the text nor the signature was seen before."""
        text = normalize(question)
        if text in self.texts or signature in self.signatures:
            return False
        self.texts.add(text)
        self.signatures.add(signature)
        return True


def _alone(world: World, var: Var, truth: str) -> bool:
    """True when `truth` and no other entity satisfies `var` on its own (stops at the first other one found)."""

    def fits(e: Entity) -> bool:
        return (var.type is None or e.type == var.type) and all(p.holds(e) for p in var.preds)

    if not fits(world.entity(truth)):
        return False
    if var.anchor() is not None:
        return True
    scan = world.ids_of_type(var.type)
    for p in var.preds:
        found = world.candidates(var.type, p)
        if found is not None and len(found) < len(scan):
            scan = found
    return not any(i != truth and fits(world.entity(i)) for i in scan)


def is_shortcut(d: Draft, world: World) -> bool:
    """True when the answer's own predicates already single it out, so its relations add nothing."""
    q = d.query
    return bool(q.edges) and not q.count and _alone(world, q.vars[q.target], d.truth)


def evidence_edges(d: Draft) -> list[list[str]]:
    """The query's edges with the true entity ids: `[src_id, rel, dst_id]`."""
    return [[d.binding[e.src], e.rel, d.binding[e.dst]] for e in d.query.edges]


def finalize(world: World, d: Draft, leak: LeakCheck, dedup: Dedup) -> tuple[QARecord | None, str]:
    """Run the shared checks on a draft: (the record, "kept") or (None, the reason it was dropped).

    Reasons: truth_fails (a bug), not_unique, shortcut (the answer's own attributes single it out,
    so the relations are moot), unsayable (a cycle would point back at one of two same-noun variables), leak,
    duplicate; for a natural draft also one_search (one search of the question's words lists the answer's page)."""
    d = simplify(d)
    q = d.query
    obfuscations = obfuscations_of(q, d.obfuscations)
    matches = world.match(q, limit=None if q.count else 2)  # two matches already mean "not unique"
    if d.truth not in matches and len(matches) < 2:
        return None, "truth_fails"
    if not q.count and matches != [d.truth]:
        return None, "not_unique"
    if is_shortcut(d, world):
        return None, "shortcut"
    if d.question is None and not sayable(world, q):
        return None, "unsayable"
    answer = answer_text(world, q, d.truth)
    question = d.question or render_question(world, q, d.style, natural=d.natural, declarative=d.declarative)
    if leak(answer, question):
        return None, "leak"
    if d.natural and not q.count and found_by_one_search(world, question, d.truth):
        return None, "one_search"
    signature = (answer, q.answer_attr, q.count, tuple(sorted(map(tuple, evidence_edges(d)))))
    if not dedup.add(question, signature):
        return None, "duplicate"
    meta = {
        "query": q.to_json(),
        "answer_id": d.truth,
        "entities": list(d.binding),
        "edges": evidence_edges(d),
        "urls": list(dict.fromkeys(world.url(i) for i in d.binding)),
        "hops": hops(q),
        "shape": shape(q),
        "obfuscations": obfuscations,
        **d.meta,
    }
    return QARecord(question, answer, d.tag, level_of(q, obfuscations), meta), "kept"
