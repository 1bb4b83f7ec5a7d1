"""Rejection-sampling fine-tuning (RFT): the policy's own right episodes become SFT trajectories.

Reward-filtered self-training (STaR, Zelikman et al. arXiv 2203.14465; RAFT, Dong et al. arXiv 2304.06767;
ReST-EM, Singh et al. arXiv 2312.06585): roll out every question of a pool k times, keep the episodes the
judge scores right, and fine-tune on them with the SFT loss. It is the positive-only policy gradient with
one large batch of many questions and the SFT's optimizer, so it carries the copy replay that the small
policy's copying needs (docs/results.md). The rollouts are `eval.run_eval` records; the
kept trajectories are the `{messages, question, answer, provenance}` records that `jaxseeker sft` reads.

The rollouts' failures can teach too: `rejected_trajectories` marks every turn that broke the episode format
(`"weight": -1`), and `data.unlikelihood_weight` makes the n-grams such a turn repeats unlikely
(`data.unlikelihood`): the loops a small policy falls into at temperature, which end a fifth of its episodes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from jaxseeker.agent.prompts import format_error_text

FORMAT_ERROR = format_error_text("")  # how the observation after a malformed turn starts


def is_kept(record: Mapping[str, Any]) -> bool:
    """True for an episode worth imitating: judged right, well formed in every turn, ended by its answer."""
    return bool(record["correct"]) and bool(record["format_ok"]) and record["termination"] == "answer"


def assistant_turns(record: Mapping[str, Any]) -> tuple[str, ...]:
    """An episode's assistant turns, in order: what tells two rollouts of a question apart."""
    return tuple(m["content"] for m in record["messages"] if m["role"] == "assistant")


def kept_trajectories(records: Iterable[Mapping[str, Any]], per_question: int) -> list[dict[str, Any]]:
    """The trajectories to fine-tune on: kept episodes (`is_kept`) whose assistant turns differ, at most
    `per_question` of each question (so the easy questions, right in every rollout, do not drown the hard ones)."""
    if per_question < 1:
        raise ValueError(f"per_question must be >= 1, got {per_question}")
    seen: dict[str, set[tuple[str, ...]]] = {}
    kept = []
    for r in records:
        turns = assistant_turns(r)
        mine = seen.setdefault(str(r["question_id"]), set())
        if not is_kept(r) or turns in mine or len(mine) >= per_question:
            continue
        mine.add(turns)
        kept.append(
            {
                "messages": list(r["messages"]),
                "question": r["question"],
                "answer": r["answer"],
                "provenance": {"source": "rft", "question_id": str(r["question_id"]), "round": r["round"]},
            }
        )
    return kept


def malformed_turns(record: Mapping[str, Any]) -> list[int]:
    """Indices in `record["messages"]` of the assistant turns that broke the format: those answered by a format-error
    observation, and the last turn of an episode that a format error ended."""
    messages = record["messages"]
    bad = [
        i
        for i, (m, after) in enumerate(zip(messages, messages[1:]))
        if m["role"] == "assistant" and after["role"] != "assistant" and FORMAT_ERROR in str(after["content"])
    ]
    if record.get("termination") == "format_error":
        last = max(i for i, m in enumerate(messages) if m["role"] == "assistant")
        if last not in bad:
            bad.append(last)
    return bad


def rejected_trajectories(records: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The episodes with a malformed turn (`malformed_turns`) as SFT records for the unlikelihood loss: those turns
    get `"weight": -1`, every other assistant turn `"weight": 0` (context only); duplicates are dropped."""
    seen: set[tuple[str, ...]] = set()
    rejected = []
    for r in records:
        bad = set(malformed_turns(r))
        turns = assistant_turns(r)
        if not bad or turns in seen:
            continue
        seen.add(turns)
        messages = [
            m if m["role"] != "assistant" else {**m, "weight": -1 if i in bad else 0}
            for i, m in enumerate(r["messages"])
        ]
        rejected.append(
            {
                "messages": messages,
                "question": r["question"],
                "answer": r["answer"],
                "provenance": {
                    "source": "rft-rejected",
                    "question_id": str(r["question_id"]),
                    "round": r["round"],
                    "turns": sorted(bad),
                },
            }
        )
    return rejected


def rft_counts(
    records: list[Mapping[str, Any]], kept: list[Mapping[str, Any]], rejected: list[Mapping[str, Any]] = ()
) -> dict[str, Any]:
    """What the rejection kept: episodes and questions rolled out, right, kept, per level; and the episodes whose
    malformed turns were marked (`rejected_trajectories`)."""
    level = {str(r["question_id"]): str(r.get("level", "all")) for r in records}
    kept_questions = {t["provenance"]["question_id"] for t in kept}
    return {
        "episodes": len(records),
        "right": sum(bool(r["correct"]) for r in records),
        "questions": len(level),
        "kept": len(kept),
        "kept_questions": len(kept_questions),
        "rejected": len(rejected),
        "rejected_turns": sum(len(t["provenance"]["turns"]) for t in rejected),
        "questions_by_level": dict(Counter(level.values())),
        "kept_questions_by_level": dict(Counter(level[q] for q in kept_questions)),
    }
