"""OpenSeeker graph QA: a seed page and its neighbours, obfuscated, kept only if hard yet solvable.

From a seed page (the answer) take `k` of its outgoing links; the seed's relations to them are the
question's constraints. Entity obfuscation hides the neighbours (an initial, or a description by
their own neighbours); question obfuscation blurs the seed's own facts and rephrases. A question is
kept only when a closed-book solver fails (difficulty) and a solver given the entity subgraph (the
seed, its neighbours and theirs) succeeds (solvability). Solvers are any `Solver` callables.
"""

from __future__ import annotations

import dataclasses
import functools
import random

from jaxseeker.synthesis.qa.checks import same_answer
from jaxseeker.synthesis.qa.clues import select
from jaxseeker.synthesis.qa.driver import Keep, Rewrite, SynthResult, run_recipe
from jaxseeker.synthesis.qa.obfuscate import add_attribute, describe, hide_name, tighten
from jaxseeker.synthesis.qa.record import Draft, QARecord
from jaxseeker.synthesis.qa.solvers import RuleSolver, Solver, SolverTask
from jaxseeker.world import Edge, Is, Query, Var, World


@dataclasses.dataclass(frozen=True)
class OpenSeekerConfig:
    """Neighbours per seed, share of neighbours obfuscated, and how (described vs hidden behind an initial)."""

    k: int = 3
    p_obfuscate: float = 0.8
    p_describe: float = 0.5
    natural: bool = True  # only informative clues, natural text, none solved by one search (`clues`, `render`)


def entity_subgraph(world: World, seed: str, neighbours: list[str]) -> list[str]:
    """The seed, its chosen neighbours and every neighbour of those (the evidence a solver may read)."""
    ids = {seed, *neighbours}
    for n in neighbours:
        ids.update(x.id for x in world.neighbours(n))
    return sorted(ids)


def propose(world: World, rng: random.Random, cfg: OpenSeekerConfig = OpenSeekerConfig()) -> Draft | None:
    """One OpenSeeker draft (before the solver checks), or None."""
    seed = rng.choice(list(world.entities))
    page = world.page(world.url(seed))
    linked = sorted({e.id for u in (page.links if page else ()) if (e := world.entity_at(u)) is not None} - {seed})
    if len(linked) < cfg.k:
        return None
    picked = rng.sample(linked, cfg.k)
    edges = []
    for j, n in enumerate(picked, 1):
        link = next(x for x in world.neighbours(seed) if x.id == n)
        edges.append(Edge(0, link.rel, j) if link.direction == "out" else Edge(j, link.rel, 0))
    vars_ = (Var(world.entity(seed).type),) + tuple(Var(world.entity(n).type, (Is(n),)) for n in picked)
    d = Draft(Query(vars_, tuple(edges)), (seed, *picked), "openseeker", natural=cfg.natural)
    for j in range(1, cfg.k + 1):
        if rng.random() < cfg.p_obfuscate:
            edit = describe if rng.random() < cfg.p_describe else hide_name
            d = edit(d, world, rng, j) or d
    d = add_attribute(d, world, rng, 0, blur=True) or d
    d = tighten(d, world, rng)
    if d is None:
        return None
    d = select(d, world, rng, cut=True)
    evidence = sorted(set(entity_subgraph(world, seed, picked)) | set(d.binding))
    return dataclasses.replace(d, meta={"evidence": evidence})


def solver_filter(difficulty: Solver, solvability: Solver) -> Keep:
    """The keep rule: the closed-book solver must fail and the solver reading the evidence must succeed."""

    def keep(record: QARecord, draft: Draft) -> str:
        q = Query.from_json(record.meta["query"])
        closed = difficulty(SolverTask(record.question, q, None))
        if same_answer(closed, record.answer):
            return "too_easy"
        given = solvability(SolverTask(record.question, q, tuple(record.meta["evidence"])))
        if not same_answer(given, record.answer):
            return "unsolvable"
        record.meta["closed_book_answer"] = closed
        return "kept"

    return keep


def synthesize(
    world: World,
    n: int,
    *,
    seed: int = 0,
    progress: bool = False,
    config: OpenSeekerConfig = OpenSeekerConfig(),
    difficulty: Solver | None = None,
    solvability: Solver | None = None,
    writer: Rewrite | None = None,
) -> SynthResult:
    """`n` OpenSeeker questions; both solvers default to the embedded `RuleSolver` (closed book / evidence)."""
    rule = RuleSolver(world)
    keep = solver_filter(difficulty or rule, solvability or rule)
    return run_recipe(
        world,
        functools.partial(propose, cfg=config),
        n,
        seed=seed,
        keep=keep,
        rewrite=writer,
        progress=progress,
        desc="openseeker",
    )
