"""Rewards: ReAct format checks, answer judges (EM, F1, LLM judge), SRRL feedback, evidence recall and per-recipe
shaping."""

from jaxseeker.rewards.format import FormatResult, check_format, extract_answer
from jaxseeker.rewards.judges import (
    JUDGE_STYLES,
    JudgeResult,
    JudgeStats,
    exact_match,
    judge_messages,
    llm_judge,
    normalize_answer,
    summarize_judgements,
    token_f1,
)
from jaxseeker.rewards.recipes import (
    REWARD_FNS,
    EpisodeOutcome,
    evidence,
    get_reward_fn,
    length_penalty,
    webdancer,
    webexplorer,
    websailor,
    webseer,
)
from jaxseeker.rewards.srrl import should_stop, submission_feedback
from jaxseeker.rewards.visits import evidence_recall

__all__ = [
    "JUDGE_STYLES",
    "REWARD_FNS",
    "EpisodeOutcome",
    "FormatResult",
    "JudgeResult",
    "JudgeStats",
    "check_format",
    "evidence",
    "evidence_recall",
    "exact_match",
    "extract_answer",
    "get_reward_fn",
    "judge_messages",
    "length_penalty",
    "llm_judge",
    "normalize_answer",
    "should_stop",
    "submission_feedback",
    "summarize_judgements",
    "token_f1",
    "webdancer",
    "webexplorer",
    "websailor",
    "webseer",
]
