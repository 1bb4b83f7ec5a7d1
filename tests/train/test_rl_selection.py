"""GRPO / DAPO / DUPO group selection on crafted reward batches, and the question sampler's resumable order."""

import numpy as np
import pytest

from jaxseeker.train import selection as sel
from jaxseeker.train.rl_scoring import QuestionSampler

# Six groups of four rollouts: groups 0, 3 and 5 have all-equal rewards (no advantage signal).
REWARDS = np.array([
    [1.0, 1.0, 1.0, 1.0],
    [1.0, 0.0, 0.0, 0.0],
    [0.1, 1.0, 0.1, 1.0],
    [0.0, 0.0, 0.0, 0.0],
    [0.0, 0.9, 0.0, 0.0],
    [0.1, 0.1, 0.1, 0.1],
])


def test_informative_groups_are_those_with_reward_variance():
    assert sel.informative_groups(REWARDS).tolist() == [False, True, True, False, True, False]


def test_grpo_keeps_every_group_of_the_batch():
    s = sel.select("grpo", REWARDS[:4], 4, np.random.default_rng(0))
    assert s.groups == (0, 1, 2, 3) and s.n_informative == 2 and s.n_duplicated == 0


def test_dapo_drops_zero_variance_groups_and_reports_the_shortfall():
    first = sel.select("dapo", REWARDS[:4], 3, np.random.default_rng(0))  # one round of 4 questions
    assert first.groups == (1, 2) and sel.dapo_shortfall(first, 3) == 1
    # The loop rolls out more questions; with them the batch fills, in rollout order, and stops at 3.
    full = sel.select("dapo", REWARDS, 3, np.random.default_rng(0))
    assert full.groups == (1, 2, 4) and sel.dapo_shortfall(full, 3) == 0


def test_dupo_fills_zero_variance_slots_with_copies_of_informative_groups_of_the_same_batch():
    s = sel.select("dupo", REWARDS, 6, np.random.default_rng(0))
    assert len(s.groups) == 6 and s.groups[:3] == (1, 2, 4)
    assert set(s.groups[3:]) <= {1, 2, 4}  # the three empty slots hold copies, no other group
    assert (s.n_informative, s.n_duplicated) == (3, 3)
    again = sel.select("dupo", REWARDS, 6, np.random.default_rng(0))
    assert again.groups == s.groups  # seeded: a resumed run picks the same copies


def test_dupo_with_no_informative_group_selects_nothing():
    s = sel.select("dupo", REWARDS[[0, 3, 5]], 3, np.random.default_rng(0))
    assert s.empty and s.n_duplicated == 0


def test_dupo_prefilter_drops_questions_solved_in_every_rollout():
    correct = np.array([[1, 1, 1, 1, 1, 1, 1, 1], [1, 1, 0, 1, 1, 1, 1, 1], [0] * 8, [1.0] * 7 + [0.99]])
    assert sel.dupo_prefilter(correct).tolist() == [False, True, True, True]


def test_bad_inputs_name_the_problem():
    with pytest.raises(ValueError, match=r"expected \[n_groups, group_size\]"):
        sel.informative_groups(np.zeros(4))
    with pytest.raises(ValueError, match="not one of"):
        sel.select("ppo", REWARDS, 2, np.random.default_rng(0))
    with pytest.raises(ValueError, match="6 groups for 8 slots"):
        sel.select("grpo", REWARDS, 8, np.random.default_rng(0))


def test_question_sampler_resumes_mid_epoch_and_reshuffles_each_epoch():
    whole = QuestionSampler([3, 5, 7, 9, 11], seed=1)
    first = whole.take(3)
    state = whole.state()
    rest = whole.take(4)  # crosses into epoch 1
    resumed = QuestionSampler([3, 5, 7, 9, 11], seed=1, state=state)
    assert resumed.take(4) == rest
    assert sorted(first + rest[:2]) == [3, 5, 7, 9, 11]  # an epoch is a permutation of the pool
    assert whole.state() == {"epoch": 1, "position": 2}
