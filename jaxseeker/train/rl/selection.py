"""Which rollout groups train: GRPO keeps all, DAPO drops uninformative groups, DUPO duplicates informative ones.

All functions are pure functions of a signal array `[n_groups, group_size]` (numpy): a group is the G rollouts
of one question, and it is informative when its signal is not the same for all G (`filter_signal`, `rl.filter_metric`):
  correct  the judge's verdict (or score in [0, 1]): kept when 0 < #correct < G, as the papers do (default).
           A reward with a format term would keep an all-wrong group of which one rollout broke the format, and
           train its 15 wrong answers up (A = +0.258 under 0.1·format + 0.9·answer, G = 16).
  reward   the recipe reward: kept when its std > 0 (verl's `filter_groups.metric: seq_reward`).
A group whose rewards are all equal has zero advantage everywhere (`losses.group_advantages`), so it contributes
no policy gradient: the three modes differ only in what fills its slot in the batch.

  grpo  keep every group (DeepSeekMath arXiv 2402.03300; WebExplorer, WebSeer).
  dapo  dynamic sampling: keep informative groups; the loop samples new questions until `n_slots` such groups
        are found (DAPO arXiv 2503.14476; WebDancer).
  dupo  before training, drop questions the starting policy gets right in all of k rollouts; during
        training, fill the slots of uninformative groups with copies of informative groups of the same batch,
        so no extra rollouts are needed (WebSailor arXiv 2507.02592).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

SELECTION_MODES = ("grpo", "dapo", "dupo")
FILTER_METRICS = ("correct", "reward")


def _grouped(rewards: np.ndarray) -> np.ndarray:
    rewards = np.asarray(rewards, dtype=np.float64)
    if rewards.ndim != 2 or rewards.shape[1] < 1:
        raise ValueError(f"signal has shape {rewards.shape}, expected [n_groups, group_size]")
    return rewards


def filter_signal(scores: Sequence[Sequence[Any]], metric: str) -> np.ndarray:
    """`[n_groups, G]` float64 of the scored groups (`scoring.Score`s): each verdict (`metric` "correct";
    True = 1) or reward ("reward"), what decides whether a group is informative."""
    if metric not in FILTER_METRICS:
        raise ValueError(f"filter_metric {metric!r} is not one of {list(FILTER_METRICS)}")
    return np.array(
        [[float(s.outcome.correct) if metric == "correct" else s.reward for s in group] for group in scores],
        dtype=np.float64,
    )


def informative_groups(signal: np.ndarray, *, eps: float = 1e-9) -> np.ndarray:
    """`[n_groups]` bool: True where the group's signal is not all equal (std > eps)."""
    return _grouped(signal).std(axis=1) > eps


@dataclasses.dataclass(frozen=True)
class Selection:
    """The groups that fill a batch, in order (indices into the rollout's groups, repeats allowed)."""

    groups: tuple[int, ...]
    n_informative: int  # informative groups among those offered
    n_duplicated: int  # slots filled by a copy of another group (dupo, or dapo's last resort)

    @property
    def empty(self) -> bool:
        """True when nothing can train (no informative group)."""
        return not self.groups


def select_grpo(signal: np.ndarray, n_slots: int) -> Selection:
    """The first `n_slots` groups, whatever their signal."""
    signal = _grouped(signal)
    if len(signal) < n_slots:
        raise ValueError(f"grpo: {len(signal)} groups for {n_slots} slots")
    informative = informative_groups(signal[:n_slots])
    return Selection(tuple(range(n_slots)), int(informative.sum()), 0)


def select_dapo(signal: np.ndarray, n_slots: int) -> Selection:
    """Up to `n_slots` informative groups, in rollout order (fewer when the rollouts had fewer).

    The loop calls it on every group rolled out so far in the step and samples more questions while
    the selection is short (`dapo_shortfall`).
    """
    informative = informative_groups(signal)
    kept = np.flatnonzero(informative)[:n_slots]
    return Selection(tuple(int(i) for i in kept), int(informative.sum()), 0)


def dapo_shortfall(selection: Selection, n_slots: int) -> int:
    """How many more informative groups DAPO still needs to fill `n_slots`."""
    return max(0, n_slots - len(selection.groups))


def fill_by_duplication(groups: tuple[int, ...], n_slots: int, rng: np.random.Generator) -> tuple[int, ...]:
    """`groups` followed by random copies of its members until `n_slots` long (empty stays empty)."""
    if not groups or len(groups) >= n_slots:
        return tuple(groups[:n_slots])
    extra = rng.choice(np.asarray(groups), size=n_slots - len(groups), replace=True)
    return tuple(groups) + tuple(int(i) for i in extra)


def select_dupo(signal: np.ndarray, n_slots: int, rng: np.random.Generator) -> Selection:
    """The informative groups of the batch, then random copies of them in the slots of the others.

    Empty when no group of the batch has variance (the loop then skips the update).
    """
    signal = _grouped(signal)[:n_slots]
    informative = informative_groups(signal)
    kept = tuple(int(i) for i in np.flatnonzero(informative))
    groups = fill_by_duplication(kept, n_slots, rng)
    return Selection(groups, len(kept), len(groups) - len(kept))


def dupo_prefilter(correct: np.ndarray) -> np.ndarray:
    """`[n_questions]` bool: keep a question unless all of its k starting-policy rollouts were correct.

    correct: `[n_questions, k]` (bool or scores in [0, 1]; a score counts as correct at 1).
    """
    correct = np.asarray(correct, dtype=np.float64)
    if correct.ndim != 2 or correct.shape[1] < 1:
        raise ValueError(f"correct has shape {correct.shape}, expected [n_questions, k]")
    return ~np.all(correct >= 1.0, axis=1)


def select(mode: str, signal: np.ndarray, n_slots: int, rng: np.random.Generator) -> Selection:
    """The selection of `mode` (one of SELECTION_MODES) on the `filter_signal` of the groups rolled out so far."""
    if mode == "grpo":
        return select_grpo(signal, n_slots)
    if mode == "dapo":
        return select_dapo(signal, n_slots)
    if mode == "dupo":
        return select_dupo(signal, n_slots, rng)
    raise ValueError(f"selection {mode!r} is not one of {list(SELECTION_MODES)}")
