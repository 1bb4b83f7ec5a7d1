"""How the embedded expert behaves (`ExpertConfig`) and what it may consult to plan (`Knowledge`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence


@dataclasses.dataclass(frozen=True)
class ExpertConfig:
    """How the expert behaves; rates are probabilities per opportunity."""

    detour_rate: float = 0.25  # a descriptive first search / a wrong candidate opened and rejected
    empty_share: float = 0.5  # share of descriptive first searches aimed at "No results"
    link_rate: float = 0.7  # open a page by a link seen earlier instead of searching its name
    batch_rate: float = 0.35  # check several candidates in one visit instead of one by one
    batch: int = 4  # pages opened per visit call when checking candidates
    max_checks: int = 40  # candidate pages checked for one count before giving up
    snippet_rate: float = 0.0  # answer from a search snippet that already shows the answer, without a visit
    slip_rate: float = 0.0  # a search that miscopies the name (untrained), then the recovery (`Actor.slip`)
    hop_snippets: bool = False  # snippet_rate covers hops too: a link read from a snippet, a next page's listed hit
    restate_goal: bool = False  # the answer thought first says what is asked (`the population of X`), then quotes
    # thoughts that reason (`reasoned.ReasonedRun`): each names the clue it tests, quotes the observation's evidence
    # and what is still unchecked; candidates are checked in the order the pages list them, never picked unseen.
    # false: the narrating expert of earlier runs (the demo's pipeline keeps it, `expert.reasoning`)
    reasoning: bool = True
    verify_visits: int = 2  # reasoning: pages opened before the answer to check the clues still unchecked

    def __post_init__(self) -> None:
        for name in ("detour_rate", "empty_share", "link_rate", "batch_rate", "snippet_rate", "slip_rate"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"ExpertConfig.{name} must be in [0, 1], got {getattr(self, name)}")
        if self.batch < 2 or self.max_checks < 1:
            raise ValueError("ExpertConfig.batch must be >= 2 and max_checks >= 1")


@dataclasses.dataclass(frozen=True)
class Knowledge:
    """What the expert may consult to plan (never to answer)."""

    name: Callable[[str], str]  # entity id → name
    peek: Callable[[str], str | None]  # name → page text (to choose which wrong candidate to try)
    titles: Callable[[str], Sequence[str]]  # query → titles the search tool would list
    kind: Callable[[str], str | None]  # name → entity type
    slips: Callable[[str], Sequence[str]] = lambda name: ()  # name → names a hasty copy of it might give instead
