"""The QA recipes by name: each `synthesize(world, n, *, seed, progress) -> SynthResult`."""

from __future__ import annotations

from jaxseeker.synthesis.qa import crawlqa, e2hqa, openseeker, sailorfog, webexplorer

RECIPES = {
    "sailorfog": sailorfog.synthesize,
    "e2hqa": e2hqa.synthesize,
    "crawlqa": crawlqa.synthesize,
    "openseeker": openseeker.synthesize,
    "webexplorer": webexplorer.synthesize,
}


def get_recipe(name: str):
    """The `synthesize` function of recipe `name`; an unknown name lists the known ones."""
    try:
        return RECIPES[name]
    except KeyError:
        raise ValueError(f"unknown QA recipe {name!r}; known: {', '.join(RECIPES)}") from None
