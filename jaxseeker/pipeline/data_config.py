"""The pipeline recipe's data sections: the world, the questions synthesised on it, the expert's trajectories and
the tools every rollout (expert, eval, RL) uses; `config.PipelineConfig` holds them with the training stages. The
`world` and `tools` sections are those of every recipe (`world.world_spec`, `tools.tools_config`), read here with
the pipeline's defaults and refused where an offline run over the world cannot do what they ask."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from jaxseeker.errors import InputError
from jaxseeker.synthesis.expert import ExpertConfig
from jaxseeker.tools import ToolsConfig, VisitOptions, tools_config
from jaxseeker.world.spec import WorldSpec, world_spec

# The pipeline's world when its recipe has none; the keys a recipe's `world` leaves out come from it.
PIPELINE_WORLD = WorldSpec(size=3000)
PIPELINE_SOURCES = ("synthetic", "atlas")  # worlds of entities, which the pipeline's QA synthesis walks


def pipeline_world(value: Any, where: str = "world") -> WorldSpec:
    """The pipeline recipe's `world` (a spec string or a mapping, `world.world_spec`; null or absent:
    PIPELINE_WORLD), refused when it is not a world of entities the questions can be drawn from."""
    world = world_spec(value, where, PIPELINE_WORLD) or PIPELINE_WORLD
    if world.source not in PIPELINE_SOURCES:
        raise InputError(
            f"{where}: the pipeline draws its questions from a world's entities, so its world is synthetic or atlas; "
            f"got {world.spec()!r} (a {world.source} world serves the tools of `jaxseeker rl` and `eval` recipes)"
        )
    return world


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


# The pipeline's tools where its recipe's `tools` leaves a key out: search and visit over the world, with short
# observations for a small policy, which learns more per CPU-minute from ~30-token snippets.
PIPELINE_TOOLS = ToolsConfig(enabled=("search", "visit"), top_k=3, visit=VisitOptions(page_chars=400, max_links=5))
# what a pipeline's rollouts cannot use: they run offline over the world, and the expert and eval search and visit
OFFLINE = {
    "search_backend": "local",
    "visit_backend": "local",
    "summarizer": None,
}


def pipeline_tools(data: Mapping[str, Any] | None, where: str = "tools") -> ToolsConfig:
    """The pipeline recipe's `tools` (the `tools` section of every recipe, `tools.tools_config`, over
    PIPELINE_TOOLS), refused where it asks for what an offline run over the world cannot do."""
    tools = tools_config(data, where, PIPELINE_TOOLS)
    for key, offline in OFFLINE.items():
        if getattr(tools, key) != offline:
            raise InputError(
                f"{where}.{key}: the pipeline's rollouts run offline over its world, so {key} stays {offline!r} "
                f"(got {getattr(tools, key)!r}); live back-ends serve `jaxseeker rl` recipes"
            )
    if set(tools.enabled) != {"search", "visit"}:
        raise InputError(
            f"{where}.enabled: the pipeline's expert and eval search and visit the world, so enabled is "
            f"[search, visit] (got {list(tools.enabled)}); python and answer_submit serve `jaxseeker rl` recipes"
        )
    return tools


def tools_key(tools: ToolsConfig) -> dict[str, Any]:
    """The tools as stage fingerprints take them: the search and visit sizes, and every other key only where it
    differs from PIPELINE_TOOLS, so runs from before a key was settable keep their stages."""
    sizes = {
        "top_k": tools.top_k,
        "page_chars": tools.visit.page_chars,
        "max_links": tools.visit.max_links,
        "goal_passages": tools.visit.goal_passages,
    }
    given, defaults = _leaves(dataclasses.asdict(tools)), _leaves(dataclasses.asdict(PIPELINE_TOOLS))
    named = {"top_k", "visit.page_chars", "visit.max_links", "visit.goal_passages"}
    return sizes | {k: v for k, v in given.items() if k not in named and v != defaults.get(k)}


def _leaves(values: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """`values` flattened to dotted keys (`visit.page_chars`)."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        if isinstance(value, Mapping):
            out |= _leaves(value, f"{prefix}{key}.")
        else:
            out[prefix + key] = value
    return out
