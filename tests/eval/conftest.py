"""A hand-built table of judged rollouts (k=2) shared by the metric and report tests.

question  level tag     round 0                          round 1
A         1     sailor  judge unparsed (None), 3 tools   correct, 1 tool         (+ round 2, ignored at k=2)
B         1     e2h     wrong, max_turns, bad format     correct
C         2     sailor  wrong                            wrong, context_limit, bad format
D         2     -       correct                          correct
"""

import pytest


def rollout(qid, rnd, correct, calls, termination="answer", answer_len=0, think_len=0, format_ok=True, **extra):
    """One judged rollout record as the runner writes it."""
    search, visit, python = calls
    return {
        "question_id": qid,
        "round": rnd,
        "correct": correct,
        "judge_parse_error": correct is None,
        "termination": termination,
        "tool_calls": {"search": search, "visit": visit, "python": python},
        "answer_len": answer_len,
        "think_len": think_len,
        "format_ok": format_ok,
        **extra,
    }


@pytest.fixture
def judged_rollouts():
    """Nine records: four questions × two rounds, plus a third round of A that k=2 leaves out."""
    a = {"level": 1, "tag": "sailor"}
    b = {"level": 1, "tag": "e2h"}
    c = {"level": 2, "tag": "sailor"}
    d = {"level": 2}
    return [
        rollout("A", 0, None, (2, 1, 0), answer_len=10, think_len=100, **a),
        rollout("A", 1, True, (1, 0, 0), answer_len=20, think_len=50, **a),
        rollout("A", 2, True, (9, 9, 9), answer_len=999, think_len=999, format_ok=False, **a),
        rollout("B", 0, False, (3, 2, 1), "max_turns", answer_len=0, think_len=300, format_ok=False, **b),
        rollout("B", 1, True, (1, 1, 0), answer_len=5, think_len=150, **b),
        rollout("C", 1, False, (2, 0, 2), "context_limit", answer_len=0, think_len=400, format_ok=False, **c),
        rollout("C", 0, False, (0, 0, 0), answer_len=8, think_len=20, **c),
        rollout("D", 0, True, (1, 1, 0), answer_len=4, think_len=40, **d),
        rollout("D", 1, True, (1, 1, 0), answer_len=6, think_len=60, **d),
    ]


@pytest.fixture
def make_rollout():
    """The record builder, for tests that need their own rollouts."""
    return rollout
