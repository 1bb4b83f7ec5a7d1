"""The pipeline recipe's data sections: the world, the questions synthesised on it, the expert's trajectories and
the tools every rollout (expert, eval, RL) uses; `config.PipelineConfig` holds them with the training stages."""

from __future__ import annotations

import dataclasses
from typing import Any

from jaxseeker.synthesis.expert import ExpertConfig
from jaxseeker.tools import ToolsConfig, VisitOptions


@dataclasses.dataclass(frozen=True)
class WorldStage:
    """Which world to build (see `jaxseeker.world.build_world`): synthetic `size`/`seed`, or atlas `countries`."""

    source: str = "synthetic"  # synthetic (a seeded made-up world) | atlas (real facts from PyPI wheels)
    size: int = 3000  # synthetic: entities
    seed: int = 0  # synthetic: the world's seed
    countries: tuple[str, ...] = ()  # atlas: ISO codes to keep (empty: all)

    def __post_init__(self):
        object.__setattr__(self, "countries", tuple(self.countries))

    def spec(self) -> str:
        """The world as an `open_world` spec (what the RL stage opens)."""
        if self.source == "atlas":
            return "atlas" + (":" + ",".join(self.countries) if self.countries else "")
        return f"{self.source}:{self.size}:{self.seed}"


@dataclasses.dataclass(frozen=True)
class QAStage:
    """Questions per recipe, and the split sizes (the rest of the questions go to training)."""

    # questions per QA recipe
    recipes: tuple[tuple[str, int], ...] = (("e2hqa", 1200), ("sailorfog", 200), ("openseeker", 100))
    n_test: int = 60  # held-out test questions
    n_rl: int = 120  # questions of the RL split
    seed: int = 0  # the QA synthesis seed
    e2hqa_rounds: tuple[int, int] = (1, 3)  # E2HQA rounds of description (0: the one-hop question itself)
    # the recipes' natural questions (`jaxseeker synth`'s default): entities described, clues the others imply
    # dropped, E2HQA entity answers, none solved by one search; false keeps the questions of earlier runs
    natural: bool = False

    def __post_init__(self):
        if isinstance(self.recipes, dict):
            object.__setattr__(self, "recipes", tuple(sorted(self.recipes.items())))
        lo, hi = self.e2hqa_rounds
        if not 0 <= lo <= hi:
            raise ValueError(f"qa.e2hqa_rounds must be [min, max] with 0 <= min <= max, got {list(self.e2hqa_rounds)}")
        object.__setattr__(self, "e2hqa_rounds", (int(lo), int(hi)))

    def key(self) -> dict[str, Any]:
        """The section as stage fingerprints take it: `natural` only when set, so runs from before it keep their
        stages."""
        return {k: v for k, v in dataclasses.asdict(self).items() if k != "natural" or v}


@dataclasses.dataclass(frozen=True)
class ExpertStage:
    """Embedded-expert trajectory synthesis."""

    tries: int = 2  # rollouts per question at most (rejection sampling)
    detour_rate: float = 0.2  # a descriptive first search, or a wrong page opened and rejected
    snippet_rate: float = 0.0  # answer from a search snippet that shows the answer, without visiting the page
    slip_rate: float = 0.0  # a search that miscopies the name (out of the loss), then the recovery
    hop_snippets: bool = False  # snippet_rate covers hops: a link read from a snippet, a next page's shown hit
    restate_goal: bool = False  # the answer thought first says what is asked (`the population of X`), then quotes
    reasoning: bool = False  # the reasoning expert (`synth trajectories`' default); false: the narrating one
    seed: int = 0  # the expert's randomness

    def config(self) -> ExpertConfig:
        """The ExpertConfig of these settings (the others keep ExpertConfig's defaults)."""
        fields = {f.name for f in dataclasses.fields(ExpertConfig)}
        return ExpertConfig(**{k: v for k, v in dataclasses.asdict(self).items() if k in fields})

    def key(self) -> dict[str, Any]:
        """The section as stage fingerprints take it: the switches only when set, so runs from before them keep
        their stages."""
        switches = ("hop_snippets", "restate_goal", "reasoning")
        return {k: v for k, v in dataclasses.asdict(self).items() if k not in switches or v}


@dataclasses.dataclass(frozen=True)
class ToolsStage:
    """The search and visit tools of every rollout (expert, eval, RL): short observations for a small policy, which
    learns more per CPU-minute from ~30-token snippets."""

    top_k: int = 3  # search results per query
    page_chars: int = 400  # budget of one visited page's evidence
    max_links: int = 5  # links listed under a visited page
    goal_passages: int = 0  # a visit keeps at most this many goal-relevant sentences (tools.VisitOptions); 0: all
    title_first: bool = False  # search lists the pages titled with the query first (tools.ToolsConfig.title_first)

    def __post_init__(self):
        for key in ("top_k", "page_chars"):
            if getattr(self, key) < 1:
                raise ValueError(f"tools.{key} must be >= 1, got {getattr(self, key)}")
        for key in ("max_links", "goal_passages"):
            if getattr(self, key) < 0:
                raise ValueError(f"tools.{key} must be >= 0, got {getattr(self, key)}")

    def config(self) -> ToolsConfig:
        """The ToolsConfig of these settings (search and visit over the world, offline)."""
        visit = VisitOptions(page_chars=self.page_chars, max_links=self.max_links, goal_passages=self.goal_passages)
        return ToolsConfig(enabled=("search", "visit"), top_k=self.top_k, visit=visit, title_first=self.title_first)

    def key(self) -> dict[str, Any]:
        """The section as stage fingerprints take it: `title_first` only when set, so runs from before it keep
        their stages."""
        return {k: v for k, v in dataclasses.asdict(self).items() if k != "title_first" or v}
