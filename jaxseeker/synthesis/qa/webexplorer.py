"""WebExplorer: explore from a seed, write a long explicit question, then evolve it long-to-short.

The embedded explorer searches for a seed entity, opens its page and follows links, noting how each
new page relates to one already seen. It writes an explicit question about the seed from everything
it noted (named entities, exact dates). The rule-based evolver then runs up to five rounds, each
one edit that keeps the answer unique: remove a salient clue, blur a date or number, hide a name
behind an initial, or replace a name by a description. The answer never changes.
"""

from __future__ import annotations

import dataclasses
import functools
import random

from jaxseeker.synthesis.qa.checks import is_shortcut, simplify
from jaxseeker.synthesis.qa.clues import select
from jaxseeker.synthesis.qa.driver import Rewrite, SynthResult, run_recipe
from jaxseeker.synthesis.qa.obfuscate import add_attribute, blur_one_value, describe, hide_name, is_unique, remove_clue
from jaxseeker.synthesis.qa.record import Draft
from jaxseeker.synthesis.qa.render import render_question
from jaxseeker.world import Edge, Is, Query, Var, World

EDITS = ("remove", "blur", "hide", "describe")


@dataclasses.dataclass(frozen=True)
class WebExplorerConfig:
    """Pages the explorer opens after the seed, exact facts of the seed it notes, evolution rounds."""

    steps: int = 4
    facts: int = 3
    rounds: int = 5
    natural: bool = True  # only informative clues, natural text, none solved by one search (`clues`, `render`)


def explore(world: World, rng: random.Random, steps: int) -> tuple[list[str], list[Edge], list[str]]:
    """(entities seen, edges between their indices, urls opened): a search for a seed, then clicks, each
    from the seed's page (more often) or from the page opened last."""
    seed = rng.choice(list(world.entities))
    hits = world.corpus.search(world.entity(seed).name, k=3)
    opened = [h.url for h in hits[:1]] + [world.url(seed)]
    seen, edges = [seed], []
    for _ in range(steps):
        frm = 0 if rng.random() < 0.6 else len(seen) - 1
        fresh = [n for n in world.neighbours(seen[frm]) if n.id not in seen]
        if not fresh:
            continue
        n = rng.choice(fresh)
        seen.append(n.id)
        j = len(seen) - 1
        edges.append(Edge(frm, n.rel, j) if n.direction == "out" else Edge(j, n.rel, frm))
        opened.append(world.url(n.id))
    return seen, edges, opened


def first_question(world: World, rng: random.Random, cfg: WebExplorerConfig) -> Draft | None:
    """The explorer's long, explicit question about the seed: every noted relation, named, plus exact facts."""
    seen, edges, opened = explore(world, rng, cfg.steps)
    if not edges:
        return None
    vars_ = (Var(world.entity(seen[0]).type),) + tuple(Var(world.entity(i).type, (Is(i),)) for i in seen[1:])
    d = Draft(Query(vars_, tuple(edges)), tuple(seen), "webexplorer", meta={"opened": opened}, natural=cfg.natural)
    for _ in range(cfg.facts):
        d = add_attribute(d, world, rng, 0, blur=False) or d
    return d if is_unique(d, world) else None


def evolve_once(d: Draft, world: World, rng: random.Random) -> Draft | None:
    """One long-to-short edit that changes the question and keeps the answer unique, or None.

    Every edit is tried; edits that leave no shortcut (the answer's own facts naming it) win, then
    edits that do not lengthen the question by more than 30%, then chance."""
    before = render_question(world, simplify(d).query)
    candidates = []
    for edit in EDITS:
        if edit == "remove":
            new = remove_clue(d, rng)
        elif edit == "blur":
            new = blur_one_value(d, world, rng)
        elif edit == "hide":
            new = hide_name(d, world, rng)
        else:
            new = describe(d, world, rng)
        if new is None or not is_unique(new, world):
            continue
        after = render_question(world, simplify(new).query)
        if after != before:
            candidates.append((is_shortcut(new, world), len(after) > 1.3 * len(before), rng.random(), new))
    return min(candidates, key=lambda c: c[:3])[3] if candidates else None


def propose(world: World, rng: random.Random, cfg: WebExplorerConfig = WebExplorerConfig()) -> Draft | None:
    """Explore, write the first question, evolve it for up to `cfg.rounds` rounds (at least one)."""
    d = first_question(world, rng, cfg)
    if d is None:
        return None
    history = [render_question(world, simplify(d).query)]
    for _ in range(cfg.rounds):
        new = evolve_once(d, world, rng)
        if new is None:
            break
        d = new
        history.append(render_question(world, simplify(d).query))
    if len(history) == 1:
        return None
    d = select(d, world, rng)
    history[-1] = render_question(world, simplify(d).query)
    return dataclasses.replace(d, meta={**d.meta, "rounds": len(history) - 1, "evolution": history})


def synthesize(
    world: World,
    n: int,
    *,
    seed: int = 0,
    progress: bool = False,
    config: WebExplorerConfig = WebExplorerConfig(),
    writer: Rewrite | None = None,
) -> SynthResult:
    """`n` WebExplorer questions from `world`."""
    return run_recipe(
        world,
        functools.partial(propose, cfg=config),
        n,
        seed=seed,
        progress=progress,
        rewrite=writer,
        desc="webexplorer",
    )
