"""SailorFog-QA (WebSailor §3.1): a rare seed, a random-walk subgraph, coupled and obfuscated constraints.

The walk starts at a rarely linked entity and adds edges until a target count, each step either
continuing from the newest node or returning to an earlier one (which grows stars and trees), and
sometimes closing a cycle. One node becomes the answer; the others are named, hidden behind an
initial, or described by their own attributes, with dates and numbers blurred.
"""

from __future__ import annotations

import dataclasses
import functools
import random

from jaxseeker.synthesis.qa.checks import found_by_one_search, hops, obfuscations_of, simplify
from jaxseeker.synthesis.qa.clues import select
from jaxseeker.synthesis.qa.describe import describe_entity
from jaxseeker.synthesis.qa.driver import Rewrite, SynthResult, run_recipe
from jaxseeker.synthesis.qa.hunt import make_huntable
from jaxseeker.synthesis.qa.obfuscate import add_attribute, blur_one_value, hide_name, tighten
from jaxseeker.synthesis.qa.record import Draft
from jaxseeker.synthesis.qa.render import render_question
from jaxseeker.world import Edge, Is, Query, Relation, Var, World


@dataclasses.dataclass(frozen=True)
class SailorFogConfig:
    """Walk length (edges), walk behaviour, rarity of the seed, and how much to obfuscate.

    A hub (more than `hub_degree` links, e.g. a country with thousands of airports) can be reached but
    is never expanded from: one of its thousands of neighbours would only add a vacuous constraint."""

    min_edges: int = 2
    max_edges: int = 5
    p_continue: float = 0.5
    p_cycle: float = 0.3
    rare_quantile: float = 0.3
    hub_degree: int = 100
    p_hide: float = 0.7
    p_attribute: float = 0.6
    natural: bool = True  # entities described, clues the others imply dropped, text as a writer's (`propose_natural`)
    p_describe: float = 0.9  # natural: the share of the other entities described rather than named
    p_nameless: float = 0.25  # natural: the share of drafts whose last name is described too (they name nothing)
    declarative: bool = True  # natural: SailorFog's text, a description in sentences that ends in the question
    huntable: bool = True  # natural: a draft that names nothing is one a searcher can start (`hunt.make_huntable`)


@functools.lru_cache(maxsize=8)
def rare_entities(world: World, quantile: float) -> tuple[str, ...]:
    """Entities among the least linked `quantile` (with at least two links), in world order."""
    degrees = sorted(world.degree(i) for i in world.entities)
    if not degrees:
        return ()
    cut = max(2, degrees[min(len(degrees) - 1, int(quantile * len(degrees)))])
    return tuple(i for i in world.entities if 2 <= world.degree(i) <= cut)


def topology(nodes: list[str], edges: set[Relation]) -> str:
    """chain, star, tree or cycle, of the undirected walk graph."""
    if len(edges) >= len(nodes) or len({frozenset((r.src, r.dst)) for r in edges}) < len(edges):
        return "cycle"
    degree = {n: 0 for n in nodes}
    for r in edges:
        degree[r.src] += 1
        degree[r.dst] += 1
    if max(degree.values()) <= 2:
        return "chain"
    if len(nodes) >= 4 and max(degree.values()) == len(nodes) - 1:
        return "star"
    return "tree"


def _edges_among(world: World, nodes: list[str]) -> set[Relation]:
    """Every relation between two of `nodes`, each pair seen from its less linked end (a hub is never scanned
    when it is the most linked node)."""
    order = sorted(set(nodes), key=lambda i: (world.degree(i), i))
    rank = {i: k for k, i in enumerate(order)}
    found = set()
    for a in order[:-1]:
        for nb in world.neighbours(a):
            if rank.get(nb.id, -1) > rank[a]:
                found.add(Relation(a, nb.rel, nb.id) if nb.direction == "out" else Relation(nb.id, nb.rel, a))
    return found


def random_walk(
    world: World, seed: str, n_edges: int, rng: random.Random, cfg: SailorFogConfig
) -> tuple[list[str], set[Relation]]:
    """Expand from `seed` until `n_edges` edges: continue from the newest node or return to an earlier one."""
    nodes, edges = [seed], set()
    for _ in range(20 * n_edges):
        if len(edges) >= n_edges:
            break
        here = nodes[-1] if rng.random() < cfg.p_continue else rng.choice(nodes)
        if not 0 < world.degree(here) <= cfg.hub_degree:
            continue
        n = rng.choice(world.neighbours(here))
        rel = Relation(here, n.rel, n.id) if n.direction == "out" else Relation(n.id, n.rel, here)
        if rel not in edges:
            edges.add(rel)
            if n.id not in nodes:
                nodes.append(n.id)
    if rng.random() < cfg.p_cycle:
        closing = sorted(r for r in _edges_among(world, nodes) if r not in edges)
        if closing:
            edges.add(rng.choice(closing))
    return nodes, edges


def walk_draft(world: World, rng: random.Random, cfg: SailorFogConfig) -> Draft | None:
    """The walk's subgraph as a unique draft with every entity named but the answer, or None (no rare entity, or a
    walk too short)."""
    rare = rare_entities(world, cfg.rare_quantile)
    if not rare:
        return None
    seed = rng.choice(rare)
    nodes, edges = random_walk(world, seed, rng.randint(cfg.min_edges, cfg.max_edges), rng, cfg)
    if len(edges) < cfg.min_edges:
        return None
    index = {n: k for k, n in enumerate(nodes)}
    target = index[seed] if rng.random() < 0.5 else rng.randrange(len(nodes))
    if cfg.natural and world.degree(nodes[target]) > cfg.hub_degree:  # a hub's answer follows from any of its parts
        target = index[seed]
    vars_ = tuple(Var(world.entity(n).type, () if k == target else (Is(n),)) for k, n in enumerate(nodes))
    q = Query(vars_, tuple(Edge(index[r.src], r.rel, index[r.dst]) for r in sorted(edges)), target=target)
    meta = {"topology": topology(nodes, edges), "seed_id": seed}
    declarative = cfg.natural and cfg.declarative
    return Draft(q, tuple(nodes), "sailorfog", meta=meta, natural=cfg.natural, declarative=declarative)


def propose(world: World, rng: random.Random, cfg: SailorFogConfig = SailorFogConfig()) -> Draft | None:
    """One SailorFog draft (unique, obfuscated), or None when this walk gives none (or no entity has two links)."""
    if cfg.natural:
        return propose_natural(world, rng, cfg)
    d = walk_draft(world, rng, cfg)
    if d is None:
        return None
    target = d.query.target
    nodes = d.binding
    for i in range(len(nodes)):
        if i != target and rng.random() < cfg.p_hide:
            d = hide_name(d, world, rng, i) or d
            if rng.random() < cfg.p_attribute:
                d = add_attribute(d, world, rng, i, blur=True) or d
    if rng.random() < cfg.p_attribute:
        d = add_attribute(d, world, rng, target, blur=True) or d
    if not d.obfuscations:
        d = blur_one_value(d, world, rng) or hide_name(d, world, rng) or d
    d = tighten(d, world, rng)
    if d is None:
        return None
    d = select(d, world, rng, cut=True)
    return d if obfuscations_of(simplify(d).query, ()) else None


def _named(d: Draft) -> list[int]:
    """The variables of the draft other than the answer that are said by their names."""
    return [i for i, v in enumerate(d.query.vars) if v.anchor() is not None and i != d.query.target]


def propose_natural(world: World, rng: random.Random, cfg: SailorFogConfig) -> Draft | None:
    """A SailorFog draft whose other entities are described by their own facts (`describe.describe_entity`), with
    only the clues the others do not imply (`clues.select` of a natural draft), at least two hops, and not solved by
    one search of its own words: a named entity left is described to deepen it, else the draft is dropped (None).
    After selection the names left but one are described again (selection may have cut a described branch and kept
    a name beside it); the last stays, a searcher's way in (but in `p_nameless` of the drafts), unless one search of
    the question finds the answer. A draft that names nothing must leave a searcher something to search
    (`hunt.make_huntable`), else it keeps its last name (or is dropped). An entity off the walk (one a description
    added) is described by its own facts only: two levels at most."""
    d = walk_draft(world, rng, cfg)
    if d is None:
        return None
    walk = set(d.binding)  # an entity a description or clue selection added is described by its own facts only
    others = [i for i in range(len(d.query.vars)) if i != d.query.target]
    rng.shuffle(others)
    for i in others:
        if rng.random() < cfg.p_describe:
            d = describe_entity(d, world, rng, i)
    if rng.random() < cfg.p_attribute:
        d = add_attribute(d, world, rng, d.query.target, blur=True) or d
    d = tighten(d, world, rng)
    if d is None:
        return None
    d = simplify(select(d, world, rng, cut=True))
    tried: set[str] = set()  # selection may have cut a described branch and kept names: describe all but the last
    keep = 0 if rng.random() < cfg.p_nameless else 1
    named = d if len(_named(d)) == 1 else None  # the draft with one name left, should naming nothing leave no search
    while len(_named(d)) > keep and (left := [i for i in _named(d) if d.binding[i] not in tried]):
        tried.add(d.binding[left[0]])
        described = describe_entity(d, world, rng, left[0], own_only=d.binding[left[0]] not in walk)
        if described is not d:
            d = simplify(select(described, world, rng, cut=True))
        named = d if len(_named(d)) == 1 else named
    if cfg.huntable and not _named(d):
        d = make_huntable(d, world, rng) or named
        if d is None:
            return None
    for _ in range(2):
        if hops(d.query) < 2:
            return None
        if not found_by_one_search(
            world, render_question(world, d.query, d.style, natural=True, declarative=d.declarative), d.truth
        ):
            return d
        named = _named(d)
        if not named:
            return None
        i = rng.choice(named)
        deeper = describe_entity(d, world, rng, i, hint=True, own_only=d.binding[i] not in walk)
        if deeper is d:
            return None
        d = simplify(select(deeper, world, rng, cut=True))
    return None


def synthesize(
    world: World,
    n: int,
    *,
    seed: int = 0,
    progress: bool = False,
    config: SailorFogConfig = SailorFogConfig(),
    writer: Rewrite | None = None,
) -> SynthResult:
    """`n` SailorFog-QA questions from `world`."""
    return run_recipe(
        world, functools.partial(propose, cfg=config), n, seed=seed, progress=progress, rewrite=writer, desc="sailorfog"
    )
