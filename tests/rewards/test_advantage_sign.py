"""Correctness decides the sign: under every built-in reward and GRPO / Dr. GRPO / RLOO advantages, a wrong answer's
advantage is never above 0, whatever the format (and length) of the rollouts of its group."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jaxseeker.rewards import EpisodeOutcome, get_reward_fn
from jaxseeker.train.rl.config import RLConfig
from jaxseeker.train.rl.scoring import episode_advantages

ESTIMATORS = ("grpo", "dr_grpo", "rloo")
SEER = {"l_expect": 100, "l_max": 300, "alpha": 0.9}


def outcome(correct: bool, format_ok: bool, n_tokens: int, evidence: float) -> EpisodeOutcome:
    """One rollout's judged outcome; a wrong answer has F1 0 too (webseer's correctness score is the F1)."""
    return EpisodeOutcome(
        format_ok=format_ok, correct=correct, f1=1.0 if correct else 0.0, n_tokens=n_tokens, evidence=evidence
    )


def advantages(fn: str, estimator: str, outcomes: list[EpisodeOutcome]) -> np.ndarray:
    """`[G]` advantages of one group under reward `fn` and advantage `estimator`, as the RL loop computes them."""
    kwargs = SEER if fn == "webseer" else {}
    rewards = np.array([[get_reward_fn(fn)(o, **kwargs) for o in outcomes]])  # [1, G]
    return episode_advantages(RLConfig(group_size=len(outcomes), advantage=estimator), rewards)


rollout = st.tuples(st.booleans(), st.booleans(), st.integers(0, 400))


@settings(max_examples=150, deadline=None)
@given(group=st.lists(rollout, min_size=2, max_size=8), estimator=st.sampled_from(ESTIMATORS))
@pytest.mark.parametrize("fn", ["webdancer", "websailor", "webexplorer", "webseer", "evidence"])
def test_a_wrong_answer_never_gets_a_positive_advantage(fn, group, estimator):
    """Rollouts without evidence pages: correctness alone may lift one above its group."""
    outcomes = [outcome(c, f, n, 0.0) for c, f, n in group]
    adv = advantages(fn, estimator, outcomes)
    wrong = np.array([not o.correct for o in outcomes])
    assert (adv[wrong] <= 0.0).all(), (fn, estimator, group, adv)
    if wrong.all():  # an all-wrong group is flat: nothing trained up or down
        assert (adv == 0.0).all()


@settings(max_examples=100, deadline=None)
@given(
    group=st.lists(st.tuples(st.booleans(), st.booleans(), st.floats(0.0, 1.0)), min_size=2, max_size=8),
    estimator=st.sampled_from(ESTIMATORS),
)
def test_evidence_lifts_a_wrong_answer_only_by_the_evidence_it_gathered(group, estimator):
    """Under `evidence`, a wrong answer is above its group only by its own evidence recall: with none, A <= 0."""
    outcomes = [outcome(c, f, 50, e) for c, f, e in group]
    adv = advantages("evidence", estimator, outcomes)
    no_credit = np.array([not o.correct and (o.evidence == 0.0 or not o.format_ok) for o in outcomes])
    assert (adv[no_credit] <= 0.0).all(), (group, adv)


@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_an_all_wrong_group_with_one_malformed_rollout_trains_nothing(estimator):
    """Under 0.1·format + 0.9·answer with GRPO this group gave its three wrong, well-formed answers A = +0.58."""
    outcomes = [outcome(False, True, 50, 0.0)] * 3 + [outcome(False, False, 50, 0.0)]
    additive = np.array([[0.1 * o.format_ok + 0.9 * o.correct for o in outcomes]])
    old = episode_advantages(RLConfig(group_size=4, advantage=estimator), additive)
    assert old[0] > 0.0  # the additive form's wrong answers are trained up (GRPO: +0.577)
    if estimator == "grpo":
        assert old[0] == pytest.approx(0.025 / np.sqrt(0.001875), abs=1e-4)
    for fn in ("webdancer", "websailor", "webexplorer"):
        np.testing.assert_array_equal(advantages(fn, estimator, outcomes), np.zeros(4))


@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_a_malformed_right_answer_ranks_below_a_well_formed_one(estimator):
    """Format still shapes what is right: of two right answers the malformed one gets the lower advantage."""
    outcomes = [outcome(True, True, 50, 0.0), outcome(True, False, 50, 0.0), outcome(False, True, 50, 0.0)]
    adv = advantages("webdancer", estimator, outcomes)
    assert adv[0] > adv[1] > 0.0 > adv[2]
