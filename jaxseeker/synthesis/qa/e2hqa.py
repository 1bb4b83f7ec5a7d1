"""E2HQA (WebDancer): an easy entity → attribute question made harder round by round.

Round 0 asks for an attribute of a named entity ("In what year was X born?") or, as WebDancer's mostly do, for an
entity that one named neighbour fixes ("Which city is the birthplace of X?": a natural config's `p_entity`, on
entities with at most `hub_degree` links). Each round replaces
the most recently named entity by a description from its neighbours ("the painter who was born in
Y and is a member of Z"), so the chain of descriptions deepens while the answer never changes. A
round that leaves the question ambiguous is tightened or, failing that, the rounds stop there.
"""

from __future__ import annotations

import dataclasses
import functools
import random

from jaxseeker.synthesis.qa.checks import simplify
from jaxseeker.synthesis.qa.clues import select
from jaxseeker.synthesis.qa.driver import Rewrite, SynthResult, run_recipe
from jaxseeker.synthesis.qa.obfuscate import describe, is_unique, kind_preds, tighten
from jaxseeker.synthesis.qa.record import Draft
from jaxseeker.synthesis.qa.render import render_question
from jaxseeker.world import Edge, Is, Query, Var, World


@dataclasses.dataclass(frozen=True)
class E2HQAConfig:
    """Rounds of replacement (drawn in [min_rounds, max_rounds]; 0 keeps the one-hop round-0 question)."""

    min_rounds: int = 1
    max_rounds: int = 3
    neighbours: int = 1
    natural: bool = True  # entity answers as well as attributes, natural text, only informative clues
    p_entity: float = 0.6  # natural: the share of questions that ask for an entity
    hub_degree: int = 100  # natural: an entity answer has at most this many links (no country answers)


def entity_start(world: World, rng: random.Random, hub_degree: int) -> Draft | None:
    """Round 0 of an entity question: the answer unnamed, joined to one named neighbour that fixes it (the only
    entity on that side of that relation: `the birthplace of X`); None when the drawn entity has none."""
    z = rng.choice(list(world.entities))
    if world.degree(z) > hub_degree:
        return None
    links = list(world.neighbours(z))
    rng.shuffle(links)
    for n in links[:20]:
        fixed = world.sources(n.id, n.rel) if n.direction == "out" else world.targets(n.id, n.rel)
        if fixed != (z,):
            continue
        e = world.entity(z)
        edge = Edge(0, n.rel, 1) if n.direction == "out" else Edge(1, n.rel, 0)
        q = Query((Var(e.type, kind_preds(e)), Var(world.entity(n.id).type, (Is(n.id),))), (edge,))
        return Draft(q, (z, n.id), "e2hqa", natural=True)
    return None


def propose(world: World, rng: random.Random, cfg: E2HQAConfig = E2HQAConfig()) -> Draft | None:
    """One E2HQA draft after its rounds; None when not even one round keeps the question unique."""
    if cfg.natural and rng.random() < cfg.p_entity:
        d = entity_start(world, rng, cfg.hub_degree)
        if d is None:
            return None
        newest = 1
    else:
        e = world.entity(rng.choice(list(world.entities)))
        attrs = sorted(list(e.dates) + list(e.numbers))
        if not attrs:
            return None
        q = Query((Var(e.type, (Is(e.id),)),), answer_attr=rng.choice(attrs))
        d = Draft(q, (e.id,), "e2hqa", natural=cfg.natural)
        newest = 0
    history = [render_question(world, d.query, natural=cfg.natural)]
    for _ in range(rng.randint(cfg.min_rounds, cfg.max_rounds)):
        harder = describe(d, world, rng, newest, k=cfg.neighbours)
        if harder is not None and not is_unique(harder, world):
            harder = tighten(harder, world, rng, steps=2)
        if harder is None:
            break
        d, newest = harder, len(harder.query.vars) - 1
        history.append(render_question(world, d.query, natural=cfg.natural))
    if len(history) - 1 < cfg.min_rounds:
        return None
    d = select(d, world, rng)
    history[-1] = render_question(world, simplify(d).query if cfg.natural else d.query, natural=cfg.natural)
    return dataclasses.replace(d, meta={"rounds": len(history) - 1, "history": history})


def synthesize(
    world: World,
    n: int,
    *,
    seed: int = 0,
    progress: bool = False,
    config: E2HQAConfig = E2HQAConfig(),
    writer: Rewrite | None = None,
) -> SynthResult:
    """`n` E2HQA questions from `world`."""
    return run_recipe(
        world, functools.partial(propose, cfg=config), n, seed=seed, progress=progress, rewrite=writer, desc="e2hqa"
    )
