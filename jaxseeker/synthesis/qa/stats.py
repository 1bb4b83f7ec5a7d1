"""Statistics of a synthesised set: questions per level, hops, shapes, obfuscations, a solver's pass rate."""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Sequence

from jaxseeker.synthesis.qa.checks import same_answer
from jaxseeker.synthesis.qa.record import QARecord
from jaxseeker.synthesis.qa.solvers import Solver, SolverTask
from jaxseeker.world import Query


@dataclasses.dataclass(frozen=True)
class QAStats:
    """Counts over a set of records, and per level the share a solver answered correctly."""

    n: int
    by_tag: dict[str, int]
    by_level: dict[int, int]
    by_hops: dict[int, int]
    by_shape: dict[str, int]
    obfuscations: dict[str, int]
    solver_pass: dict[int, float]
    mean_question_words: float


def _sorted_counts(values) -> dict:
    return dict(sorted(collections.Counter(values).items()))


def compute_stats(records: Sequence[QARecord], solver: Solver | None = None) -> QAStats:
    """Counts over `records`; with a solver, its pass rate per level (closed book: no evidence given)."""
    passed: dict[int, list[bool]] = collections.defaultdict(list)
    if solver is not None:
        for r in records:
            q = Query.from_json(r.meta["query"]) if "query" in r.meta else None
            passed[r.level].append(same_answer(solver(SolverTask(r.question, q, None)), r.answer))
    return QAStats(
        n=len(records),
        by_tag=_sorted_counts(r.tag for r in records),
        by_level=_sorted_counts(r.level for r in records),
        # hops and shape are a structured query's: an LLM explorer's questions have none
        by_hops=_sorted_counts(r.meta["hops"] for r in records if "hops" in r.meta),
        by_shape=_sorted_counts(r.meta["shape"] for r in records if "shape" in r.meta),
        obfuscations=_sorted_counts(o for r in records for o in r.meta.get("obfuscations", ())),
        solver_pass={lvl: sum(v) / len(v) for lvl, v in sorted(passed.items())},
        mean_question_words=sum(len(r.question.split()) for r in records) / max(1, len(records)),
    )


def summary(stats: QAStats, attempts: int | None = None, dropped: dict[str, int] | None = None) -> str:
    """A few lines for the end of `jaxseeker synth`."""

    def fmt(d: dict) -> str:
        return ", ".join(f"{k}: {v}" for k, v in d.items()) or "-"

    lines = [f"{stats.n} questions ({fmt(stats.by_tag)}), {stats.mean_question_words:.1f} words on average"]
    if attempts is not None:
        lines[0] += f"; {attempts} drafts tried, dropped: {fmt(dict(sorted((dropped or {}).items())))}"
    lines += [
        f"  level: {fmt(stats.by_level)}",
        f"  hops: {fmt(stats.by_hops)}",
        f"  shape: {fmt(stats.by_shape)}",
        f"  obfuscations: {fmt(stats.obfuscations)}",
    ]
    if stats.solver_pass:
        lines.append(
            "  reference solver pass rate by level: " + ", ".join(f"{k}: {v:.0%}" for k, v in stats.solver_pass.items())
        )
    return "\n".join(lines)
