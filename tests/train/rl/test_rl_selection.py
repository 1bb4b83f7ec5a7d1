"""GRPO / DAPO / DUPO group selection on crafted reward batches, and the question sampler's resumable order."""

import numpy as np
import pytest

from jaxseeker import rewards
from jaxseeker.train.rl import selection as sel
from jaxseeker.train.rl.config import RLConfig
from jaxseeker.train.rl.scoring import QuestionSampler, Score, episode_advantages

# Six groups of four rollouts: groups 0, 3 and 5 have all-equal rewards (no advantage signal).
REWARDS = np.array(
    [
        [1.0, 1.0, 1.0, 1.0],
        [1.0, 0.0, 0.0, 0.0],
        [0.1, 1.0, 0.1, 1.0],
        [0.0, 0.0, 0.0, 0.0],
        [0.0, 0.9, 0.0, 0.0],
        [0.1, 0.1, 0.1, 0.1],
    ]
)


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


def webdancer_group(n_correct: int, n_format_failures: int, size: int = 16) -> list[Score]:
    """A group of `size` scored episodes under the papers' additive 0.1·format + 0.9·answer (a user's reward: the
    built-in `webdancer` discounts right answers instead, `rewards.gated`)."""
    outcomes = [
        rewards.EpisodeOutcome(format_ok=i >= n_format_failures, correct=i >= size - n_correct) for i in range(size)
    ]
    return [Score(0.1 * o.format_ok + 0.9 * o.correct, o) for o in outcomes]


@pytest.mark.parametrize("mode", ["dapo", "dupo"])
def test_groups_are_kept_on_correctness_not_on_a_format_term_of_the_reward(mode):
    """An all-wrong group of 16 with one format failure has reward variance (0.1 × 15, 0.0) but nothing right:
    kept, its 15 wrong answers would be trained up. The papers keep a group when 0 < #correct < G."""
    groups = [webdancer_group(0, 1), webdancer_group(5, 0), webdancer_group(16, 2)]
    wrong = np.array([[s.reward for s in groups[0]]])
    adv = episode_advantages(RLConfig(group_size=16), wrong)  # what training it would do, in float64
    centred = wrong[0] - wrong[0].mean()
    np.testing.assert_allclose(adv, centred / (wrong[0].std() + 1e-6), rtol=1e-6)
    assert adv[1] == pytest.approx(0.258, abs=1e-3) and adv[0] == pytest.approx(-3.873, abs=1e-3)

    by_correct = sel.select(mode, sel.filter_signal(groups, "correct"), 3, np.random.default_rng(0))
    assert by_correct.n_informative == 1 and set(by_correct.groups) == {1}  # only the group with 5 of 16 right
    by_reward = sel.select(mode, sel.filter_signal(groups, "reward"), 3, np.random.default_rng(0))
    assert by_reward.n_informative == 3  # the option of filtering on reward variance keeps all three
    with pytest.raises(ValueError, match="filter_metric 'format' is not one of"):
        sel.filter_signal(groups, "format")


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
