"""Episode scoring: the judged outcome the recipe reward sees, read from a finished episode and its question."""

import pytest

from jaxseeker.agent import Episode
from jaxseeker.agent.episode import ToolCallRecord
from jaxseeker.train.rl_scoring import RewardConfig, Scorer, score_metrics

HUB, ANSWER = "https://atlas.test/wiki/Jenkins_Airport", "https://atlas.test/wiki/Vidor"


def episode(prediction, visits, urls):
    """A one-answer episode that visited `visits` for a question whose record lists `urls` as evidence."""
    answer = f"<think>Read.</think><answer>{prediction}</answer>"
    calls = [ToolCallRecord(turn=i + 1, name="visit", arguments={"url": [u], "goal": "g"}, error=None, latency_s=0.0)
             for i, u in enumerate(visits)]
    return Episode(question="What is the population of the city Jenkins Airport serves?",
                   messages=[{"role": "assistant", "content": answer}], token_ids=[1, 2], loss_mask=[1, 1],
                   logprobs=[0.0, 0.0], termination="answer", prediction=prediction, answer="10945", tool_calls=calls,
                   meta={"id": "e2hqa-1", "meta": {"urls": urls}})


def test_evidence_reward_reads_the_question_pages_from_the_record():
    scorer = Scorer(RewardConfig(fn="evidence"))
    right, guess, halfway = (episode("10945", [HUB, ANSWER], [ANSWER, HUB]), episode("5", [], [ANSWER, HUB]),
                             episode("5", [HUB], [ANSWER, HUB]))
    scores = scorer.score_all([right, guess, halfway])
    assert [s.outcome.evidence for s in scores] == [1.0, 0.0, 0.5]
    assert [s.reward for s in scores] == pytest.approx([1.3, 0.0, 0.15])
    assert score_metrics([right, guess, halfway], scores)["evidence"] == pytest.approx(0.5)


def test_questions_without_evidence_pages_score_zero_evidence():
    score = Scorer(RewardConfig(fn="evidence")).score(episode("10945", [HUB], []))
    assert (score.outcome.evidence, score.reward) == (0.0, 1.0)
