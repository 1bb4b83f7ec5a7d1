"""SRRL (WebSeer) answer submissions: the feedback text after each submission and when to stop."""

from collections.abc import Callable

from jaxseeker.rewards.judges import gold_answers, token_f1

SUBMIT_THRESHOLD = 0.8  # the F1 from which a submission is "Correct!" (RL's `RewardConfig.submit_threshold`)


def submission_feedback(f1: float, *, threshold: float) -> str:
    """The environment's reply to a submitted answer, e.g. "Incorrect! The F1 score is 0.40.".

    "Correct!" when F1 >= threshold (the same threshold `should_stop` uses), else "Incorrect!".
    """
    if not 0.0 <= f1 <= 1.0:
        raise ValueError(f"f1 must be in [0, 1], got {f1}")
    verdict = "Correct!" if f1 >= threshold else "Incorrect!"
    return f"{verdict} The F1 score is {f1:.2f}."


def should_stop(f1: float, n_submissions: int, *, threshold: float, max_submissions: int = 20) -> bool:
    """True once an answer reaches F1 >= threshold or `max_submissions` answers have been submitted."""
    if max_submissions < 1:
        raise ValueError(f"max_submissions must be >= 1, got {max_submissions}")
    return f1 >= threshold or n_submissions >= max_submissions


def submit_feedback(answer: str | None, threshold: float) -> Callable[[str], str]:
    """The `answer_submit` feedback of one question whose reference is `answer` (`gold_answers` text): a submission →
    `submission_feedback` of its token F1, e.g. "Incorrect! The F1 score is 0.40."."""
    golds = gold_answers(answer)
    return lambda submitted: submission_feedback(token_f1(submitted, golds), threshold=threshold)
