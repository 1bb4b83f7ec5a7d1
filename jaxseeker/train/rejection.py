"""Rejection-sampling fine-tuning (RFT): the policy's own right episodes become SFT trajectories.

Reward-filtered self-training (STaR, Zelikman et al. arXiv 2203.14465; RAFT, Dong et al. arXiv 2304.06767;
ReST-EM, Singh et al. arXiv 2312.06585): roll out every question of a pool k times, keep the episodes the
judge scores right, and fine-tune on them with the SFT loss. It is the positive-only policy gradient with
one large batch of many questions and the SFT's optimizer, so it carries the copy replay that the small
policy's copying needs (README, "What `make demo` learns"). The rollouts are `eval.run_eval` records; the
kept trajectories are the `{messages, question, answer, provenance}` records that `jaxseeker sft` reads.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any


def is_kept(record: Mapping[str, Any]) -> bool:
    """True for an episode worth imitating: judged right, well formed in every turn, ended by its answer."""
    return bool(record["correct"]) and bool(record["format_ok"]) and record["termination"] == "answer"


def kept_trajectories(records: Iterable[Mapping[str, Any]], per_question: int) -> list[dict[str, Any]]:
    """The trajectories to fine-tune on: kept episodes (`is_kept`) whose assistant turns differ, at most
    `per_question` of each question (so the easy questions, right in every rollout, do not drown the hard ones)."""
    if per_question < 1:
        raise ValueError(f"per_question must be >= 1, got {per_question}")
    seen: dict[str, set[tuple[str, ...]]] = {}
    kept = []
    for r in records:
        turns = tuple(m["content"] for m in r["messages"] if m["role"] == "assistant")
        mine = seen.setdefault(str(r["question_id"]), set())
        if not is_kept(r) or turns in mine or len(mine) >= per_question:
            continue
        mine.add(turns)
        kept.append({"messages": list(r["messages"]), "question": r["question"], "answer": r["answer"],
                     "provenance": {"source": "rft", "question_id": str(r["question_id"]), "round": r["round"]}})
    return kept


def rft_counts(records: list[Mapping[str, Any]], kept: list[Mapping[str, Any]]) -> dict[str, Any]:
    """What the rejection kept: episodes and questions rolled out, right, kept, per level."""
    level = {str(r["question_id"]): str(r.get("level", "all")) for r in records}
    kept_questions = {t["provenance"]["question_id"] for t in kept}
    return {"episodes": len(records), "right": sum(bool(r["correct"]) for r in records),
            "questions": len(level), "kept": len(kept), "kept_questions": len(kept_questions),
            "questions_by_level": dict(Counter(level.values())),
            "kept_questions_by_level": dict(Counter(level[q] for q in kept_questions))}
