"""SRRL (WebSeer) answer submissions: the feedback text after each submission and when to stop."""


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
