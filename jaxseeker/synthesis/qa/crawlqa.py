"""CrawlQA (WebDancer): click through pages from a root page, then ask about what was seen.

The crawler opens a well-linked root page and follows links the way a reader clicks (preferring
pages not yet seen). From the pages seen it writes one of three kinds of question:
COUNT ("How many works are there, each of which was created by X and ...?"), MULTI-HOP (the
clicked path from a named page to the answer) and INTERSECTION (the entity linked to two seen pages).
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import random

from jaxseeker.synthesis.qa.checks import hops, simplify
from jaxseeker.synthesis.qa.clues import select
from jaxseeker.synthesis.qa.driver import Rewrite, SynthResult, run_recipe
from jaxseeker.synthesis.qa.obfuscate import blur_value, exact_pred, is_unique, tighten
from jaxseeker.synthesis.qa.record import Draft
from jaxseeker.world import Edge, Is, Query, Var, World
from jaxseeker.world.pages import MAX_LISTED

KINDS = ("count", "multihop", "intersection")


@dataclasses.dataclass(frozen=True)
class CrawlQAConfig:
    """Clicks per crawl, which pages may be roots (the most linked `root_share`), question kinds."""

    min_clicks: int = 2
    max_clicks: int = 4
    root_share: float = 0.1
    kinds: tuple[str, ...] = KINDS
    natural: bool = True  # only informative clues, natural text, none solved by one search (`clues`, `render`)


@functools.lru_cache(maxsize=8)
def root_entities(world: World, share: float) -> tuple[str, ...]:
    """The most linked `share` of entities (at least one): the pages a crawl may start from."""
    ranked = sorted(world.entities, key=lambda i: (-world.degree(i), i))
    return tuple(ranked[: max(1, int(share * len(ranked)))])


def crawl(world: World, root: str, clicks: int, rng: random.Random) -> list[str]:
    """Entity ids of the pages visited: the root, then one clicked link per step (unseen pages first)."""
    path = [root]
    for _ in range(clicks):
        page = world.page(world.url(path[-1]))
        targets = [e.id for u in (page.links if page else ()) if (e := world.entity_at(u)) is not None]
        fresh = [t for t in targets if t not in path]
        if not (fresh or targets):
            break
        path.append(rng.choice(fresh or targets))
    return path


def _link(world: World, a: str, b: str, i: int, j: int) -> Edge | None:
    """An edge between variables i (entity a) and j (entity b), from the first relation joining them."""
    for n in world.neighbours(a):
        if n.id == b:
            return Edge(i, n.rel, j) if n.direction == "out" else Edge(j, n.rel, i)
    return None


def count_draft(world: World, seen: list[str], rng: random.Random) -> Draft | None:
    """COUNT: how many neighbours of a seen page, by one relation, optionally filtered by a blurred date."""
    groups = []
    for a in dict.fromkeys(seen):
        by: dict[tuple[str, str], list[str]] = {}
        for n in world.neighbours(a):
            by.setdefault((n.rel, n.direction), []).append(n.id)
        groups += [(a, rel, way, ids) for (rel, way), ids in sorted(by.items()) if 2 <= len(set(ids)) <= MAX_LISTED]
    if not groups:
        return None
    a, rel, way, members = rng.choice(groups)
    member_type = world.entity(members[0]).type
    edge = Edge(1, rel, 0) if way == "out" else Edge(0, rel, 1)
    q = Query((Var(member_type), Var(world.entity(a).type, (Is(a),))), (edge,), count=True)
    witness = rng.choice(members)
    history: tuple[str, ...] = ()
    e = world.entity(witness)
    dated = sorted(e.dates)
    if dated and rng.random() < 0.5:
        blurred = blur_value(exact_pred(e, rng.choice(dated)), e, rng)
        filtered = dataclasses.replace(q, vars=(Var(member_type, (blurred,)), q.vars[1]))
        if len(world.match(filtered)) >= 2:
            q, history = filtered, ("date",)
    return Draft(q, (witness, a), "crawlqa", obfuscations=history)


def multihop_draft(world: World, path: list[str], rng: random.Random) -> Draft | None:
    """MULTI-HOP: a suffix of the clicked path, named at its start, made unique with facts of the pages on it.

    Longer chains are tried first; a chain that stays ambiguous gets attributes of its hidden pages."""
    fallback = None
    for start in range(len(path) - 1):
        chain = path[start:]
        if len(set(chain)) != len(chain):
            continue
        edges = [_link(world, chain[k], chain[k + 1], k, k + 1) for k in range(len(chain) - 1)]
        if None in edges:
            continue
        vars_ = tuple(Var(world.entity(x).type, (Is(x),) if k == 0 else ()) for k, x in enumerate(chain))
        d = tighten(Draft(Query(vars_, tuple(edges), target=len(chain) - 1), tuple(chain), "crawlqa"), world, rng)
        if d is not None and hops(simplify(d).query) >= 2:
            return d
        fallback = fallback or d
    return fallback


def intersection_draft(world: World, seen: list[str], rng: random.Random) -> Draft | None:
    """INTERSECTION: the one entity linked to two seen pages."""
    pairs = list(itertools.combinations(sorted(set(seen)), 2))
    rng.shuffle(pairs)
    for a, b in pairs:
        common = sorted({n.id for n in world.neighbours(a)} & {n.id for n in world.neighbours(b)} - {a, b})
        rng.shuffle(common)
        for c in common[:5]:
            ea, eb = _link(world, c, a, 0, 1), _link(world, c, b, 0, 2)
            vars_ = (
                Var(world.entity(c).type),
                Var(world.entity(a).type, (Is(a),)),
                Var(world.entity(b).type, (Is(b),)),
            )
            d = Draft(Query(vars_, (ea, eb)), (c, a, b), "crawlqa")
            if is_unique(d, world):
                return d
    return None


def propose(world: World, rng: random.Random, cfg: CrawlQAConfig = CrawlQAConfig()) -> Draft | None:
    """Crawl from a root page and write one question of a random kind from the pages seen."""
    root = rng.choice(root_entities(world, cfg.root_share))
    path = crawl(world, root, rng.randint(cfg.min_clicks, cfg.max_clicks), rng)
    kind = rng.choice(cfg.kinds)
    if kind == "count":
        d = count_draft(world, path, rng)
    elif kind == "multihop":
        d = multihop_draft(world, path, rng)
    elif kind == "intersection":
        d = intersection_draft(world, path, rng)
    else:
        raise ValueError(f"unknown CrawlQA kind {kind!r}; known: {KINDS}")
    if d is None:
        return None
    d = select(dataclasses.replace(d, natural=cfg.natural), world, rng)
    return dataclasses.replace(d, meta={"kind": kind, "clicks": [world.url(i) for i in path]})


def synthesize(
    world: World,
    n: int,
    *,
    seed: int = 0,
    progress: bool = False,
    config: CrawlQAConfig = CrawlQAConfig(),
    writer: Rewrite | None = None,
) -> SynthResult:
    """`n` CrawlQA questions from `world`."""
    return run_recipe(
        world, functools.partial(propose, cfg=config), n, seed=seed, progress=progress, rewrite=writer, desc="crawlqa"
    )
