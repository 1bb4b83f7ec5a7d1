"""Names `jaxseeker.rewards` exports, each imported from its module on first use (lazy_loader reads this stub)."""

from .format import FormatResult, check_format, extract_answer
from .judges import (
    JUDGE_STYLES,
    JudgeResult,
    JudgeStats,
    exact_match,
    gold_answers,
    judge_messages,
    llm_judge,
    normalize_answer,
    summarize_judgements,
    token_f1,
)
from .recipes import (
    REWARD_FNS,
    EpisodeOutcome,
    evidence,
    gated,
    get_reward_fn,
    length_penalty,
    overlong_penalty,
    webdancer,
    webexplorer,
    websailor,
    webseer,
)
from .srrl import SUBMIT_THRESHOLD, should_stop, submission_feedback, submit_feedback
from .visits import evidence_recall

__all__ = [
    "JUDGE_STYLES",
    "REWARD_FNS",
    "SUBMIT_THRESHOLD",
    "EpisodeOutcome",
    "FormatResult",
    "JudgeResult",
    "JudgeStats",
    "check_format",
    "evidence",
    "evidence_recall",
    "exact_match",
    "extract_answer",
    "gated",
    "get_reward_fn",
    "gold_answers",
    "judge_messages",
    "length_penalty",
    "llm_judge",
    "normalize_answer",
    "overlong_penalty",
    "should_stop",
    "submission_feedback",
    "submit_feedback",
    "summarize_judgements",
    "token_f1",
    "webdancer",
    "webexplorer",
    "websailor",
    "webseer",
]
