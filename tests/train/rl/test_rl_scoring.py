"""Episode scoring: the judged outcome the recipe reward sees, read from a finished episode and its question."""

import numpy as np
import pytest

from jaxseeker.agent import Episode
from jaxseeker.agent.episode import Submission, ToolCallRecord
from jaxseeker.train.rl.config import RLConfig
from jaxseeker.train.rl.scoring import RewardConfig, Scorer, answer_attempts, episode_advantages, score_metrics

HUB, ANSWER = "https://atlas.test/wiki/Jenkins_Airport", "https://atlas.test/wiki/Vidor"


def episode(prediction, visits, urls):
    """A one-answer episode that visited `visits` for a question whose record lists `urls` as evidence."""
    answer = f"<think>Read.</think><answer>{prediction}</answer>"
    calls = [
        ToolCallRecord(turn=i + 1, name="visit", arguments={"url": [u], "goal": "g"}, error=None, latency_s=0.0)
        for i, u in enumerate(visits)
    ]
    return Episode(
        question="What is the population of the city Jenkins Airport serves?",
        messages=[{"role": "assistant", "content": answer}],
        token_ids=[1, 2],
        loss_mask=[1, 1],
        logprobs=[0.0, 0.0],
        termination="answer",
        prediction=prediction,
        answer="10945",
        tool_calls=calls,
        meta={"id": "e2hqa-1", "meta": {"urls": urls}},
    )


def test_evidence_reward_reads_the_question_pages_from_the_record():
    scorer = Scorer(RewardConfig(fn="evidence"))
    right, guess, halfway = (
        episode("10945", [HUB, ANSWER], [ANSWER, HUB]),
        episode("5", [], [ANSWER, HUB]),
        episode("5", [HUB], [ANSWER, HUB]),
    )
    scores = scorer.score_all([right, guess, halfway])
    assert [s.outcome.evidence for s in scores] == [1.0, 0.0, 0.5]
    assert [s.reward for s in scores] == pytest.approx([1.3, 0.0, 0.15])
    assert score_metrics([right, guess, halfway], scores)["evidence"] == pytest.approx(0.5)


def test_questions_without_evidence_pages_score_zero_evidence():
    score = Scorer(RewardConfig(fn="evidence")).score(episode("10945", [HUB], []))
    assert (score.outcome.evidence, score.reward) == (0.0, 1.0)


def srrl_episode(submitted: list[str], final: str | None, n_sampled: int = 10) -> Episode:
    """A WebSeer multi-submit episode: `answer_submit` calls with feedback, then (maybe) a final <answer> turn."""
    messages = [{"role": "user", "content": "Who founded Velmora?"}]
    for answer in submitted:
        messages += [
            {
                "role": "assistant",
                "content": f'<think>Try.</think><tool_call>{{"name": "answer_submit", '
                f'"arguments": {{"answer": "{answer}"}}}}</tool_call>',
            },
            {"role": "user", "content": "<tool_response>Incorrect!</tool_response>"},
        ]
    if final is not None:
        messages.append({"role": "assistant", "content": f"<think>So.</think><answer>{final}</answer>"})
    return Episode(
        question="Who founded Velmora?",
        messages=messages,
        token_ids=list(range(n_sampled)),
        loss_mask=[1] * n_sampled,
        logprobs=[0.0] * n_sampled,
        termination="answer",
        prediction=final if final is not None else submitted[-1],
        answer="Ida Konst",
        submissions=[Submission(a, "Incorrect! The F1 score is 0.00.") for a in submitted],
    )


def test_a_final_answer_after_submissions_counts_as_an_attempt():
    """Two wrong submissions then a right <answer> are three attempts: F1 · 0.9^3 = 0.729, as three submissions with
    the third right (the final answer used to be left out: 0.81)."""
    scorer = Scorer(RewardConfig(fn="webseer", judge="f1", kwargs={"l_expect": 400, "l_max": 800, "alpha": 0.9}))
    after = srrl_episode(["Velmora", "Konst"], "Ida Konst")
    three = srrl_episode(["Velmora", "Konst", "Ida Konst"], None)
    assert [answer_attempts(e) for e in (after, three)] == [3, 3]
    assert scorer.score(after).reward == pytest.approx(1.0 * 0.9**3)
    assert scorer.score(three).reward == pytest.approx(1.0 * 0.9**3)
    plain = srrl_episode([], "Ida Konst")
    assert answer_attempts(plain) == 1 and scorer.score(plain).reward == pytest.approx(0.9)
    assert answer_attempts(srrl_episode(["Konst"], None)) == 1


@pytest.mark.parametrize("fn", ["webdancer", "webexplorer", "evidence"])
def test_dapo_soft_overlong_punishment_discounts_every_recipe(fn):
    """L_max = 100 policy tokens, L_cache = 40: no discount up to 60, then a factor falling linearly to 0 at 100."""
    plain = Scorer(RewardConfig(fn=fn))
    shaped = Scorer(RewardConfig(fn=fn, overlong_buffer=40, overlong_max_tokens=100))
    for n_sampled, penalty in ((50, 0.0), (60, 0.0), (70, -0.25), (100, -1.0), (130, -1.0)):
        ep = episode("10945", [HUB], [ANSWER, HUB])
        ep.token_ids, ep.loss_mask, ep.logprobs = list(range(n_sampled)), [1] * n_sampled, [0.0] * n_sampled
        assert shaped.score(ep).reward == pytest.approx(plain.score(ep).reward * (1 + penalty)), n_sampled
        wrong = episode("5", [], [ANSWER, HUB])
        wrong.token_ids, wrong.loss_mask = list(range(n_sampled)), [1] * n_sampled
        assert shaped.score(wrong).reward == 0.0  # a wrong answer stays the least any rollout gets
    half = Scorer(RewardConfig(fn=fn, overlong_buffer=40, overlong_max_tokens=100, overlong_penalty=0.5))
    ep = episode("10945", [HUB], [ANSWER, HUB])
    ep.token_ids, ep.loss_mask, ep.logprobs = list(range(90)), [1] * 90, [0.0] * 90
    assert half.score(ep).reward == pytest.approx(plain.score(ep).reward * (1 - 0.5 * 30 / 40))
    with pytest.raises(ValueError, match="overlong_buffer / overlong_max_tokens / overlong_penalty: need 0 < buffer"):
        RewardConfig(fn=fn, overlong_buffer=40)


def test_advantages_of_equal_rewards_are_exactly_zero_and_the_rest_float64_exact():
    rewards = np.array([[1.2] * 8, [1.2, 0.2, 0.2, 1.2, 0.0, 1.2, 0.2, 0.2]])  # WebExplorer: solved, wrong, broken
    adv = episode_advantages(RLConfig(group_size=8), rewards)
    np.testing.assert_array_equal(adv[:8], 0.0)  # float32 statistics gave +0.1065 on every rollout
    second = rewards[1]
    np.testing.assert_allclose(adv[8:], (second - second.mean()) / (second.std() + 1e-6), rtol=1e-7)
