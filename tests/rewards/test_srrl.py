import pytest

from jaxseeker.rewards import (
    EpisodeOutcome,
    get_reward_fn,
    should_stop,
    submission_feedback,
    token_f1,
)
from jaxseeker.rewards.srrl import submit_feedback


def test_feedback_text():
    assert submission_feedback(0.4, threshold=0.8) == "Incorrect! The F1 score is 0.40."
    assert submission_feedback(0.8, threshold=0.8) == "Correct! The F1 score is 0.80."
    assert submission_feedback(1.0, threshold=0.8) == "Correct! The F1 score is 1.00."
    with pytest.raises(ValueError, match="f1 must be in"):
        submission_feedback(1.5, threshold=0.8)


def test_submit_feedback_scores_against_the_question_s_answer_or_its_aliases():
    feedback = submit_feedback("Marie Curie", threshold=0.6)
    assert [feedback(a) for a in ("Pierre Curie", "Curie", "marie curie")] == [
        "Incorrect! The F1 score is 0.50.",
        "Correct! The F1 score is 0.67.",
        "Correct! The F1 score is 1.00.",
    ]
    aliases = submit_feedback('["Marie Curie", "Maria Skłodowska"]', threshold=0.8)  # a JSON list of aliases
    assert aliases("Maria Skłodowska") == "Correct! The F1 score is 1.00."
    with pytest.raises(ValueError, match="no reference 'answer'"):
        submit_feedback(None, threshold=0.8)


def test_stop_at_threshold_or_submission_limit():
    assert not should_stop(0.4, 1, threshold=0.8)
    assert should_stop(0.8, 1, threshold=0.8)
    assert not should_stop(0.0, 19, threshold=0.8)
    assert should_stop(0.0, 20, threshold=0.8)
    assert should_stop(0.0, 3, threshold=0.8, max_submissions=3)


def test_a_three_submission_transcript_and_its_reward():
    gold = "Marie Curie"
    transcript = []
    for n, answer in enumerate(["Pierre Curie", "Curie", "Marie Curie"], start=1):
        f1 = token_f1(answer, gold)
        transcript.append(submission_feedback(f1, threshold=1.0))
        if should_stop(f1, n, threshold=1.0, max_submissions=20):
            break
    assert transcript == [
        "Incorrect! The F1 score is 0.50.",
        "Incorrect! The F1 score is 0.67.",
        "Correct! The F1 score is 1.00.",
    ]
    outcome = EpisodeOutcome(format_ok=True, f1=f1, n_tokens=100, n_submissions=len(transcript))
    assert get_reward_fn("webseer")(outcome, alpha=0.9) == pytest.approx(0.9**3)
