"""Structured constraints over a world and the matcher that finds every entity satisfying them.

A `Query` is a small pattern graph: variables (`Var`, each with a type and predicates on its
entity) joined by typed edges (`Edge`). Its answer is the entity bound to `target` (or one of its
attributes, or the number of such entities). `match` returns every entity the target can be bound
to; a question is unique when that list holds only the true answer. Variables may bind the same
entity (homomorphism semantics): this can only add matches, so a pattern that is unique under it is
unique under any stricter reading.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Collection, Mapping
from typing import Any, Protocol

from jaxseeker.world.entities import Entity


@dataclasses.dataclass(frozen=True)
class Is:
    """The variable is this entity (a named mention)."""

    id: str

    def holds(self, e: Entity) -> bool:
        """True when `e` satisfies the predicate."""
        return e.id == self.id


@dataclasses.dataclass(frozen=True)
class LabelIs:
    """A categorical label has this value (e.g. occupation = painter)."""

    key: str
    value: str

    def holds(self, e: Entity) -> bool:
        """True when `e` satisfies the predicate."""
        return e.labels.get(self.key) == self.value


@dataclasses.dataclass(frozen=True)
class DateIn:
    """A date attribute lies in [lo, hi] (ISO strings); `grain` says how to say it (day, decade, ...)."""

    attr: str
    lo: str
    hi: str
    grain: str

    def holds(self, e: Entity) -> bool:
        """True when `e` satisfies the predicate."""
        v = e.dates.get(self.attr)
        return v is not None and self.lo <= v <= self.hi


@dataclasses.dataclass(frozen=True)
class NumberIn:
    """A number attribute lies in [lo, hi] (None: open end); `grain` is exact, between, above or below."""

    attr: str
    lo: float | None
    hi: float | None
    grain: str

    def holds(self, e: Entity) -> bool:
        """True when `e` satisfies the predicate."""
        v = e.numbers.get(self.attr)
        if v is None:
            return False
        return (self.lo is None or v >= self.lo) and (self.hi is None or v <= self.hi)


@dataclasses.dataclass(frozen=True)
class NameInitial:
    """The first letter of the name's first or last word (`position`) is `letter`."""

    position: str
    letter: str

    def holds(self, e: Entity) -> bool:
        """True when `e` satisfies the predicate."""
        words = e.name.split()
        if not words:
            return False
        word = words[0] if self.position == "first" else words[-1]
        return word[:1].upper() == self.letter.upper()


Pred = Is | LabelIs | DateIn | NumberIn | NameInitial
_PREDS: dict[str, type] = {c.__name__: c for c in (Is, LabelIs, DateIn, NumberIn, NameInitial)}


def pred_to_json(p: Pred) -> dict[str, Any]:
    """A JSON-ready dict with a `kind` key naming the predicate class."""
    return {"kind": type(p).__name__, **dataclasses.asdict(p)}


def pred_from_json(d: Mapping[str, Any]) -> Pred:
    """Inverse of `pred_to_json`; an unknown kind names the known ones."""
    fields = dict(d)
    kind = fields.pop("kind", None)
    if kind not in _PREDS:
        raise ValueError(f"unknown predicate kind {kind!r}; known: {sorted(_PREDS)}")
    return _PREDS[kind](**fields)


@dataclasses.dataclass(frozen=True)
class Var:
    """A pattern variable: an entity type (None: any) and predicates its entity must satisfy."""

    type: str | None
    preds: tuple[Pred, ...] = ()

    def anchor(self) -> str | None:
        """The entity id this variable names (an `Is` predicate), or None."""
        return next((p.id for p in self.preds if isinstance(p, Is)), None)


@dataclasses.dataclass(frozen=True)
class Edge:
    """A relation `vars[src] --rel--> vars[dst]` between pattern variables (indices)."""

    src: int
    rel: str
    dst: int


@dataclasses.dataclass(frozen=True)
class Query:
    """A pattern; the answer is `vars[target]`'s name, its attribute `answer_attr`, or a count."""

    vars: tuple[Var, ...]
    edges: tuple[Edge, ...] = ()
    target: int = 0
    answer_attr: str | None = None
    count: bool = False

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "vars": [{"type": v.type, "preds": [pred_to_json(p) for p in v.preds]} for v in self.vars],
            "edges": [[e.src, e.rel, e.dst] for e in self.edges],
            "target": self.target,
            "answer_attr": self.answer_attr,
            "count": self.count,
        }

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> Query:
        """Inverse of `to_json`."""
        return Query(
            vars=tuple(Var(v["type"], tuple(pred_from_json(p) for p in v["preds"])) for v in d["vars"]),
            edges=tuple(Edge(int(s), str(r), int(t)) for s, r, t in d["edges"]),
            target=int(d.get("target", 0)),
            answer_attr=d.get("answer_attr"),
            count=bool(d.get("count", False)),
        )

    def with_var(self, i: int, var: Var) -> Query:
        """This query with variable `i` replaced."""
        return dataclasses.replace(self, vars=self.vars[:i] + (var,) + self.vars[i + 1 :])

    def add_var(self, var: Var, edge: Edge) -> Query:
        """This query plus a new variable (index `len(vars)`) joined by `edge`."""
        return dataclasses.replace(self, vars=self.vars + (var,), edges=self.edges + (edge,))

    def degree(self, i: int) -> int:
        """How many edges touch variable `i`."""
        return sum((e.src == i) + (e.dst == i) for e in self.edges)

    def has_cycle(self) -> bool:
        """True when the variables and edges (undirected, parallel edges counted) contain a cycle."""
        parent = list(range(len(self.vars)))

        def find(i: int) -> int:
            while parent[i] != i:
                parent[i] = parent[parent[i]]
                i = parent[i]
            return i

        for e in self.edges:
            a, b = find(e.src), find(e.dst)
            if a == b:
                return True
            parent[a] = b
        return False


class GraphView(Protocol):
    """What the matcher needs of a world."""

    def entity(self, id: str) -> Entity: ...
    def ids_of_type(self, type: str | None) -> Collection[str]: ...
    def targets(self, src: str, rel: str) -> tuple[str, ...]: ...
    def sources(self, dst: str, rel: str) -> tuple[str, ...]: ...
    def has_edge(self, src: str, rel: str, dst: str) -> bool: ...
    def candidates(self, type: str | None, pred: Pred) -> Collection[str] | None: ...


def _filter(
    world: GraphView, var: Var, ids: Collection[str], within: Collection[str] | None, typed: bool = False
) -> set[str]:
    """The ids (of `var.type` already when `typed`) whose entity satisfies every predicate of `var`."""
    check_type = None if typed else var.type
    preds, entity, out = var.preds, world.entity, set()
    for i in ids:
        if within is not None and i not in within:
            continue
        e = entity(i)
        if check_type is not None and e.type != check_type:
            continue
        for p in preds:
            if not p.holds(e):
                break
        else:
            out.add(i)
    return out


def _scan(world: GraphView, var: Var) -> Collection[str]:
    """The fewest ids to check for `var` when nothing narrows it: its anchor, its smallest predicate index,
    else its type."""
    anchor = var.anchor()
    if anchor is not None:
        return [anchor]
    best: Collection[str] = world.ids_of_type(var.type)
    for p in var.preds:
        found = world.candidates(var.type, p)
        if found is not None and len(found) < len(best):
            best = found
    return best


def _walk_cost(ids: Collection[str], step: Callable[[str], tuple[str, ...]], sample: int = 16) -> float:
    """About how many edges `step` walks from `ids`: exact up to `sample` ids, else scaled from the first ones."""
    if len(ids) <= sample:
        return float(sum(len(step(i)) for i in ids))
    seen = sum(len(step(i)) for i in itertools.islice(ids, sample))
    return seen * len(ids) / sample


def _stepper(world: GraphView, e: Edge, frm: int) -> Callable[[str], tuple[str, ...]]:
    """The walk along `e` from the end at variable `frm` to the other end."""
    if e.src == frm:
        return lambda x: world.targets(x, e.rel)
    return lambda y: world.sources(y, e.rel)


def _with_neighbour_in(
    a: set[str], b: set[str], out: Callable[[str], tuple[str, ...]], back: Callable[[str], tuple[str, ...]]
) -> set[str]:
    """The members of `a` with an `out`-neighbour in `b`, walking whichever side has fewer edges."""
    if _walk_cost(a, out) <= _walk_cost(b, back):
        return {x for x in a if any(y in b for y in out(x))}
    return a & {x for y in b for x in back(y)}


Arc = tuple[int, int, int]  # (variable pruned, variable it must have a neighbour in, edge index)


def _domains(world: GraphView, q: Query, within: Collection[str] | None) -> tuple[list[set[str]], set[Arc]]:
    """Candidate sets, cheapest first: each step computes the variable that costs least to enumerate,
    either from its scan (anchor, smallest index, type) or by walking an edge from a computed neighbour,
    filtered by its predicates and by its edges to every computed variable (the arcs returned as consistent)."""
    dom: list[set[str] | None] = [None] * len(q.vars)
    scans = [_scan(world, v) for v in q.vars]
    done: set[Arc] = set()
    while True:
        best: tuple[float, bool, int, int | None] | None = None
        for b in range(len(q.vars)):
            if dom[b] is not None:
                continue
            cost, via = float(len(scans[b])), None
            for k, e in enumerate(q.edges):
                for u, v in ((e.src, e.dst), (e.dst, e.src)):
                    if v == b and dom[u] is not None and (c := _walk_cost(dom[u], _stepper(world, e, u))) < cost:
                        cost, via = c, k
            if best is None or (cost, b != q.target) < best[:2]:
                best = (cost, b != q.target, b, via)
        if best is None:
            return dom, done
        *_, b, via = best
        if via is None:
            ids: Collection[str] = scans[b]
            typed = q.vars[b].anchor() is None  # an index or the type's list
        else:
            e = q.edges[via]
            u = e.dst if e.src == b else e.src
            step = _stepper(world, e, u)
            ids = {y for x in dom[u] for y in step(x)}
            done.add((b, u, via))
            typed = False
        dom[b] = _filter(world, q.vars[b], ids, within, typed)
        if not dom[b]:
            return [d if d is not None else set() for d in dom], done
        for k, e in enumerate(q.edges):
            for u, v in ((e.src, e.dst), (e.dst, e.src)):
                if v == b and dom[u] is not None and (b, u, k) not in done:
                    dom[b] = _with_neighbour_in(dom[b], dom[u], _stepper(world, e, b), _stepper(world, e, u))
                    done.add((b, u, k))


def _prune(world: GraphView, q: Query, dom: list[set[str]], consistent: set[Arc]) -> bool:
    """Arc consistency to a fixpoint (AC-3), starting from every arc not known `consistent` and rechecking
    the arcs into a variable whose domain shrinks; False when some domain empties."""
    arcs = [(a, b, k) for k, e in enumerate(q.edges) for a, b in ((e.src, e.dst), (e.dst, e.src))]
    pending = [arc for arc in arcs if arc not in consistent]
    queued = set(pending)
    while pending:
        arc = pending.pop()
        queued.discard(arc)
        a, b, k = arc
        e = q.edges[k]
        new = _with_neighbour_in(dom[a], dom[b], _stepper(world, e, a), _stepper(world, e, b))
        if not new:
            return False
        if len(new) != len(dom[a]):
            dom[a] = new
            for again in arcs:
                if again[1] == a and again not in queued:
                    pending.append(again)
                    queued.add(again)
    return True


def _bfs_order(q: Query, root: int) -> list[int]:
    order, seen = [root], {root}
    for i in order:
        for e in q.edges:
            for a, b in ((e.src, e.dst), (e.dst, e.src)):
                if a == i and b not in seen:
                    seen.add(b)
                    order.append(b)
    return order


def _extend(world: GraphView, q: Query, dom: list[set[str]], order: list[int], assign: dict[int, str]) -> bool:
    """Depth-first: bind the next variable among the neighbours of a bound one, checking every edge to
    bound variables; True when all variables get bound."""
    if len(assign) == len(order):
        return True
    v = order[len(assign)]
    links = [e for e in q.edges if (e.src == v and e.dst in assign) or (e.dst == v and e.src in assign)]
    first = links[0]
    anchor = assign[first.dst] if first.src == v else assign[first.src]
    near = world.sources(anchor, first.rel) if first.src == v else world.targets(anchor, first.rel)
    if len(near) > len(dom[v]):
        near_set = set(near)
        candidates = sorted(c for c in dom[v] if c in near_set)
    else:
        candidates = sorted(c for c in set(near) if c in dom[v])
    for c in candidates:
        if all(
            world.has_edge(c if e.src == v else assign[e.src], e.rel, c if e.dst == v else assign[e.dst]) for e in links
        ):
            assign[v] = c
            if _extend(world, q, dom, order, assign):
                del assign[v]
                return True
            del assign[v]
    return False


def match(world: GraphView, q: Query, within: Collection[str] | None = None, limit: int | None = None) -> list[str]:
    """Sorted ids of every entity the target variable can be bound to (only among `within` if given).

    With `limit`, stop after that many (the first ones in sorted order): `limit=2` tells unique from not."""
    if not 0 <= q.target < len(q.vars):
        raise ValueError(f"query target {q.target} out of range for {len(q.vars)} variables")
    dom, consistent = _domains(world, q, within)
    if not all(dom) or (q.edges and not _prune(world, q, dom, consistent)):
        return []
    if not q.has_cycle():
        return sorted(dom[q.target])[:limit]
    order = _bfs_order(q, q.target)
    rest = [i for i in range(len(q.vars)) if i not in order]
    while rest:  # a part not joined to the target only has to be satisfiable somehow
        part = _bfs_order(q, rest[0])
        if not any(_extend(world, q, dom, part, {rest[0]: r}) for r in sorted(dom[rest[0]])):
            return []
        rest = [i for i in rest if i not in part]
    found = []
    for t in sorted(dom[q.target]):
        if _extend(world, q, dom, order, {q.target: t}):
            found.append(t)
            if limit is not None and len(found) >= limit:
                break
    return found
