"""E2HQA (WebDancer): an easy entity → attribute question made harder round by round.

Round 0 asks for an attribute of a named entity ("In what year was X born?"). Each round replaces
the most recently named entity by a description from its neighbours ("the painter who was born in
Y and is a member of Z"), so the chain of descriptions deepens while the answer never changes. A
round that leaves the question ambiguous is tightened or, failing that, the rounds stop there.
"""

from __future__ import annotations

import dataclasses
import functools
import random

from jaxseeker.synthesis.qa.clues import select
from jaxseeker.synthesis.qa.driver import Rewrite, SynthResult, run_recipe
from jaxseeker.synthesis.qa.obfuscate import describe, is_unique, tighten
from jaxseeker.synthesis.qa.record import Draft
from jaxseeker.synthesis.qa.render import render_question
from jaxseeker.world import Is, Query, Var, World


@dataclasses.dataclass(frozen=True)
class E2HQAConfig:
    """Rounds of replacement (drawn in [min_rounds, max_rounds]; 0 keeps the one-hop round-0 question)."""

    min_rounds: int = 1
    max_rounds: int = 3
    neighbours: int = 1


def propose(world: World, rng: random.Random, cfg: E2HQAConfig = E2HQAConfig()) -> Draft | None:
    """One E2HQA draft after its rounds; None when not even one round keeps the question unique."""
    e = world.entity(rng.choice(list(world.entities)))
    attrs = sorted(list(e.dates) + list(e.numbers))
    if not attrs:
        return None
    q = Query((Var(e.type, (Is(e.id),)),), answer_attr=rng.choice(attrs))
    d = Draft(q, (e.id,), "e2hqa")
    history = [render_question(world, q)]
    newest = 0
    for _ in range(rng.randint(cfg.min_rounds, cfg.max_rounds)):
        harder = describe(d, world, rng, newest, k=cfg.neighbours)
        if harder is not None and not is_unique(harder, world):
            harder = tighten(harder, world, rng, steps=2)
        if harder is None:
            break
        d, newest = harder, len(harder.query.vars) - 1
        history.append(render_question(world, d.query))
    if len(history) - 1 < cfg.min_rounds:
        return None
    d = select(d, world, rng)
    history[-1] = render_question(world, d.query)
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
