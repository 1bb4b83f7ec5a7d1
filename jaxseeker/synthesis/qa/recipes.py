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


# each recipe's config class (a frozen dataclass with a `natural` switch, see each module)
RECIPE_CONFIGS = {
    "sailorfog": sailorfog.SailorFogConfig,
    "e2hqa": e2hqa.E2HQAConfig,
    "crawlqa": crawlqa.CrawlQAConfig,
    "openseeker": openseeker.OpenSeekerConfig,
    "webexplorer": webexplorer.WebExplorerConfig,
}


def get_recipe(name: str):
    """The `synthesize` function of recipe `name`; an unknown name lists the known ones."""
    try:
        return RECIPES[name]
    except KeyError:
        raise ValueError(f"unknown QA recipe {name!r}; known: {', '.join(RECIPES)}") from None
