"""The pass@k family and rollout statistics over judged rollout records.

A judged rollout record is
`{question_id, round, correct: bool | None, judge_parse_error: bool, termination: str,
tool_calls: {search: int, visit: int, python: int, …}, answer_len, think_len, format_ok: bool}`
plus optional `level` and `tag` (a str or a list of str) and `evidence` (the share of the question's
evidence pages the rollout visited, None when the question lists none). `correct=None` (the judge's verdict could
not be parsed) counts as wrong in every accuracy and is counted in `judge_failures`: never dropped.

Accuracy metrics take a judgement table `{question_id: [c_1, …, c_n]}` (c_i ∈ {0, 1}, in round
order); `judgement_table(records, k)` builds it from the first k rounds of every question.
Notation: N questions, question q has n_q rollouts of which c_q are correct.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from statistics import fmean
from typing import Any

import numpy as np

Table = Mapping[str, Sequence[bool]]
REQUIRED_KEYS = (
    "question_id",
    "round",
    "correct",
    "judge_parse_error",
    "termination",
    "tool_calls",
    "answer_len",
    "think_len",
    "format_ok",
)
TOOL_TYPES = ("search", "visit", "python")


def pass_at_1(table: Table) -> float:
    """Mean correctness over all rollouts: pass@1 = Σ_q c_q / Σ_q n_q."""
    _check_table(table)
    return sum(sum(row) for row in table.values()) / sum(len(row) for row in table.values())


def pass_at_k(table: Table, k: int) -> float:
    """Fraction of questions solved by at least one of k tries (Chen et al. 2021, unbiased):
    pass@k = (1/N) Σ_q [1 − C(n_q − c_q, k) / C(n_q, k)], which is (1/N) Σ_q 1[c_q > 0] when n_q = k.
    """
    _check_table(table)
    if k < 1:
        raise ValueError(f"pass_at_k: k must be >= 1, got {k}")
    short = [qid for qid, row in table.items() if len(row) < k]
    if short:
        raise ValueError(f"pass_at_k: question {short[0]!r} has {len(table[short[0]])} rollouts, k={k}")
    return fmean(1.0 - math.comb(len(row) - sum(row), k) / math.comb(len(row), k) for row in table.values())


def avg_at_k(table: Table) -> float:
    """Mean over questions of the fraction correct (WebSailor's Avg@k): Avg@k = (1/N) Σ_q c_q / n_q.

    Equal to pass@1 when every question has the same number of rollouts, as `summarize` ensures.
    """
    _check_table(table)
    return fmean(sum(row) / len(row) for row in table.values())


def cons_at_k(table: Table) -> float:
    """Consistency (WebDancer's Cons@k), read as a majority vote of the k rollouts' verdicts:
    Cons@k = (1/N) Σ_q 1[c_q > n_q / 2].

    A question counts when a strict majority of its rollouts is correct (2 of 3; 3 of 4: a tie
    is not a majority). WebDancer names Cons@3 beside Pass@3 without a formula; we read it as
    DeepSeek-R1's cons@k (majority voting). The judged records carry verdicts, not answers, so
    the vote is over verdicts: it equals answer-level voting when the wrong answers agree and is a
    lower bound when they scatter. "Fraction of the k that are right" is `avg_at_k`.
    """
    _check_table(table)
    return fmean(1.0 if 2 * sum(row) > len(row) else 0.0 for row in table.values())


def pass_at_1_by_round(table: Table) -> list[float]:
    """Accuracy of each round r (the r-th rollout of every question): acc_r = (1/N) Σ_q c_{q,r}."""
    _check_table(table)
    lengths = {len(row) for row in table.values()}
    if len(lengths) != 1:
        raise ValueError(f"pass_at_1_by_round: questions have different numbers of rollouts {sorted(lengths)}")
    return [fmean(row[r] for row in table.values()) for r in range(lengths.pop())]


def best_pass_at_1(table: Table) -> float:
    """The best single round's accuracy (WebSailor's Best Pass@1): max_r (1/N) Σ_q c_{q,r}."""
    return max(pass_at_1_by_round(table))


def paired_change(before: Table, after: Table, *, resamples: int = 10_000, seed: int = 0) -> dict[str, Any]:
    """How the same questions fared under two policies (e.g. before and after RL), question by question.

    With a_q, b_q the fraction of question q's rollouts correct before and after and d_q = b_q − a_q:
    gained = #{q: d_q > 0}, lost = #{q: d_q < 0}, delta_pass_at_1 = pass@1(after) − pass@1(before), and
    - p_value: the exact two-sided sign test of gained against lost (McNemar's exact test when each question
      has one rollout): p = min(1, 2 · Σ_{i ≤ min(gained, lost)} C(n, i) / 2ⁿ), n = gained + lost (1 when n = 0);
    - p_permutation: the paired sign-flip permutation test, which also weighs how far each question moved
      (1/8 → 2/8 counts less than 0/8 → 8/8): T = |Σ_q d_q|, p = (1 + #{b: |Σ_q s_bq d_q| ≥ T}) / (1 + B) over
      B = `resamples` draws of random signs s_bq ∈ {−1, 1};
    - ci95: the paired bootstrap's 95% interval of delta_pass_at_1: the 2.5th and 97.5th percentiles of
      pass@1(after) − pass@1(before) over B resamples of the questions with replacement.
    A small eval moves a few questions either way by chance; the p-values say how often a change this lopsided
    arises when the two policies are equally good, the interval how far the true change may lie from the
    measured one. Draws use numpy's generator seeded with `seed`, so a table gives the same figures every time.
    """
    _check_table(before)
    _check_table(after)
    if set(before) != set(after):
        only = sorted(set(before) ^ set(after))[0]
        raise ValueError(f"paired_change: question {only!r} is in only one of the two tables")
    ids = list(before)
    correct = np.array([[sum(t[q]) for q in ids] for t in (before, after)], dtype=np.float64)  # [2, questions]
    rollouts = np.array([[len(t[q]) for q in ids] for t in (before, after)], dtype=np.float64)  # [2, questions]
    deltas = correct[1] / rollouts[1] - correct[0] / rollouts[0]  # [questions]
    gained, lost = int((deltas > 0).sum()), int((deltas < 0).sum())
    n = gained + lost
    tail = sum(math.comb(n, i) for i in range(min(gained, lost) + 1)) / 2**n
    rng = np.random.default_rng(seed)
    signs = rng.choice(np.array([-1.0, 1.0]), size=(resamples, len(ids)))  # [B, questions]
    observed = abs(deltas.sum())
    extreme = int((np.abs(signs @ deltas) >= observed - 1e-12).sum())
    picks = rng.integers(0, len(ids), size=(resamples, len(ids)))  # [B, questions]
    boot = correct[1][picks].sum(1) / rollouts[1][picks].sum(1) - correct[0][picks].sum(1) / rollouts[0][picks].sum(1)
    low, high = np.percentile(boot, [2.5, 97.5])
    return {
        "questions": len(ids),
        "gained": gained,
        "lost": lost,
        "unchanged": len(ids) - n,
        "delta_pass_at_1": pass_at_1(after) - pass_at_1(before),
        "p_value": min(1.0, 2 * tail),
        "p_permutation": (1 + extreme) / (1 + resamples),
        "ci95": [float(low), float(high)],
    }


def invalid_rate(records: Sequence[Mapping[str, Any]]) -> float:
    """Fraction of rollouts whose output broke the format: (1/R) Σ 1[not format_ok]."""
    return fmean(0.0 if record["format_ok"] else 1.0 for record in _nonempty(records, "invalid_rate"))


def judge_failures(records: Sequence[Mapping[str, Any]]) -> int:
    """Rollouts whose judgement failed: Σ 1[judge_parse_error or correct is None] (scored wrong)."""
    return sum(1 for record in records if record["judge_parse_error"] or record["correct"] is None)


def termination_mix(records: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """Fraction of rollouts per termination reason, most frequent first: (1/R) Σ 1[termination = t]."""
    counts = Counter(str(record["termination"]) for record in _nonempty(records, "termination_mix"))
    return {reason: count / len(records) for reason, count in counts.most_common()}


def tool_calls_per_rollout(records: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """Mean calls per rollout of each tool type and in total: (1/R) Σ tool_calls[t]."""
    records = _nonempty(records, "tool_calls_per_rollout")
    types = list(TOOL_TYPES) + sorted({t for r in records for t in r["tool_calls"]} - set(TOOL_TYPES))
    means = {t: fmean(r["tool_calls"].get(t, 0) for r in records) for t in types}
    means["total"] = fmean(sum(r["tool_calls"].values()) for r in records)
    return means


def mean_of(records: Sequence[Mapping[str, Any]], key: str) -> float:
    """Mean of a numeric field over rollouts, e.g. `answer_len` or `think_len`: (1/R) Σ record[key]."""
    return fmean(float(record[key]) for record in _nonempty(records, f"mean_of({key!r})"))


def evidence_rate(records: Sequence[Mapping[str, Any]]) -> float | None:
    """Mean evidence recall over the rollouts that have one: (1/R') Σ evidence, None when no question lists
    its evidence pages (`rewards.evidence_recall`: the share of a question's `meta.urls` the rollout visited)."""
    values = [float(r["evidence"]) for r in records if r.get("evidence") is not None]
    return fmean(values) if values else None


def group_rollouts(records: Iterable[Mapping[str, Any]], k: int) -> dict[str, list[Mapping[str, Any]]]:
    """Rollouts per question, the k lowest rounds in round order; bad or too few records raise."""
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    by_question: dict[str, dict[int, Mapping[str, Any]]] = {}
    for index, record in enumerate(records):
        _check_record(record, index)
        rounds = by_question.setdefault(str(record["question_id"]), {})
        if record["round"] in rounds:
            raise ValueError(f"record {index}: duplicate round {record['round']} of question {record['question_id']!r}")
        rounds[record["round"]] = record
    if not by_question:
        raise ValueError("no rollout records")
    grouped = {}
    for qid, rounds in by_question.items():
        if len(rounds) < k:
            raise ValueError(f"question {qid!r} has {len(rounds)} rollouts (rounds {sorted(rounds)}), k={k}")
        grouped[qid] = [rounds[r] for r in sorted(rounds)[:k]]
    return grouped


def judgement_table(records: Iterable[Mapping[str, Any]], k: int) -> dict[str, list[bool]]:
    """`{question_id: [correct of the k lowest rounds]}`; an unparsed verdict (None) is False."""
    return {qid: _verdicts(rollouts) for qid, rollouts in group_rollouts(records, k).items()}


def summarize(records: Iterable[Mapping[str, Any]], k: int) -> dict[str, Any]:
    """Every metric over the first k rounds of each question, overall and `by_level` / `by_tag`."""
    grouped = group_rollouts(records, k)
    summary = _summary_block(grouped, k)
    summary["by_level"] = {name: _summary_block(sub, k) for name, sub in _split(grouped, "level").items()}
    summary["by_tag"] = {name: _summary_block(sub, k) for name, sub in _split(grouped, "tag").items()}
    return summary


def _summary_block(grouped: Mapping[str, list[Mapping[str, Any]]], k: int) -> dict[str, Any]:
    """The metrics of one group of questions (each with exactly k rollouts)."""
    table = {qid: _verdicts(rollouts) for qid, rollouts in grouped.items()}
    rollouts = [rollout for group in grouped.values() for rollout in group]
    failures = judge_failures(rollouts)
    return {
        "k": k,
        "questions": len(table),
        "rollouts": len(rollouts),
        "pass_at_1": pass_at_1(table),
        "pass_at_k": pass_at_k(table, k),
        "avg_at_k": avg_at_k(table),
        "cons_at_k": cons_at_k(table),
        "best_pass_at_1": best_pass_at_1(table),
        "pass_at_1_by_round": pass_at_1_by_round(table),
        "invalid_rate": invalid_rate(rollouts),
        "judge_failures": failures,
        "judge_failure_rate": failures / len(rollouts),
        "termination": termination_mix(rollouts),
        "tool_calls": tool_calls_per_rollout(rollouts),
        "answer_len": mean_of(rollouts, "answer_len"),
        "think_len": mean_of(rollouts, "think_len"),
        "evidence": evidence_rate(rollouts),
    }


def _verdicts(rollouts: Sequence[Mapping[str, Any]]) -> list[bool]:
    """Each rollout's verdict; an unparsed one (None) is wrong."""
    return [rollout["correct"] is True for rollout in rollouts]


def _split(grouped: Mapping[str, list[Mapping[str, Any]]], key: str) -> dict[str, dict[str, list[Mapping[str, Any]]]]:
    """Questions by the value of `key` on their first rollout ("none" when absent; a list puts a
    question in each of its groups), groups in natural order (numbers first, ascending)."""
    groups: dict[str, dict[str, list[Mapping[str, Any]]]] = {}
    for qid, rollouts in grouped.items():
        value = rollouts[0].get(key)
        for name in value if isinstance(value, list) else [value]:
            groups.setdefault("none" if name is None else str(name), {})[qid] = rollouts
    return dict(sorted(groups.items(), key=lambda item: _natural_key(item[0])))


def _natural_key(name: str) -> tuple[int, float, str]:
    """Sort key that puts numeric names first, by value, then the rest alphabetically."""
    try:
        return (0, float(name), name)
    except ValueError:
        return (1, 0.0, name)


def _check_table(table: Table) -> None:
    """A judgement table must hold at least one question, each with at least one rollout."""
    if not table:
        raise ValueError("empty judgement table")
    empty = [qid for qid, row in table.items() if len(row) == 0]
    if empty:
        raise ValueError(f"question {empty[0]!r} has no rollouts")


def _check_record(record: Mapping[str, Any], index: int) -> None:
    """A rollout record must carry every key in `REQUIRED_KEYS` with the right kind of value (a flag given as
    the string "false" would count as true, a length given as text would be summed as a number)."""
    missing = [key for key in REQUIRED_KEYS if key not in record]
    if missing:
        raise ValueError(f"record {index}: missing key(s) {missing}")
    where = f"record {index} (question {record['question_id']!r}, round {record['round']!r})"
    if record["correct"] is not None and not isinstance(record["correct"], bool):
        raise ValueError(f"{where}: 'correct' must be true, false or null, got {record['correct']!r}")
    calls = record["tool_calls"]
    if not isinstance(calls, Mapping) or not all(isinstance(n, int) and n >= 0 for n in calls.values()):
        raise ValueError(f"{where}: 'tool_calls' must map tool name to a count >= 0, got {calls!r}")
    if isinstance(record["round"], bool) or not isinstance(record["round"], int):
        raise ValueError(f"{where}: 'round' must be an int, got {record['round']!r}")
    for key in ("judge_parse_error", "format_ok"):
        if not isinstance(record[key], bool):
            raise ValueError(f"{where}: {key!r} must be true or false, got {record[key]!r}")
    for key in ("answer_len", "think_len"):
        if isinstance(record[key], bool) or not isinstance(record[key], int | float) or record[key] < 0:
            raise ValueError(f"{where}: {key!r} must be a number >= 0, got {record[key]!r}")


def _nonempty(records: Sequence[Mapping[str, Any]], name: str) -> Sequence[Mapping[str, Any]]:
    """`records`, or a ValueError naming the metric when there are none."""
    if not records:
        raise ValueError(f"{name}: no rollout records")
    return records
